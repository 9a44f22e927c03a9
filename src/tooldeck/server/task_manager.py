"""Task-augmented tools/call (spec §7): the TaskManager that runs tools as tasks and answers the tasks/* methods.

A call with ``params.task`` answers at once with a CreateTaskResult and runs the tool in the background, through
the same call pipeline as a plain call (admitted before the task is created, so a refusal is immediate); the outcome
goes to the TaskStore, so tasks/get, tasks/result, tasks/list and tasks/cancel work from any session that holds the
id (or, with an authenticated principal, only from that principal's sessions: another's task is "not found").
Every status change is announced with notifications/tasks/status to the session that created the task, through the
server's bus (topic ``session/<key>``).

The pollInterval of a task that is not finished is worked out from its age whenever it is sent (``PollInterval``:
short while the task is young, longer as it ages), so a short task is seen finished soon after it finishes.

Processes sharing the task store each run their own tasks, held under a lease this manager renews; a task whose
process died is taken over by another after its lease (takeover.py has the rule).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..engine.errors import BackendUnavailableError
from ..protocol import jsonrpc, versions
from ..protocol.errors import InternalError, InvalidParamsError, ProtocolError, TaskLimitError
from ..security.approvals import APPROVED, WAITING_FOR_APPROVER, ApprovalDeferred, awaits_approver
from ..tasks.memory import MemoryTaskStore
from ..tasks.polling import PollInterval
from ..tasks.record import TaskRecord, new_task_id
from ..tasks.specs import open_store
from ..tasks.store import TaskStore
from .asking import RELATED_TASK
from .pipeline import Call, Pipeline, TaskCall, standing_heard

if TYPE_CHECKING:
    import asyncio

    from ..tools.tool import Tool
    from .bus import Bus
    from .request import RequestContext
    from .task_inputs import TaskInputs
    from .task_relay import TaskRelay

log = logging.getLogger("tooldeck.tasks")

IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
NOT_FOUND = "Failed to retrieve task: Task not found"
STOP_WAIT = 5.0  # seconds a stopping process waits for the task runs it cancelled to end (and be recorded)


class TaskManager:
    """Creates tasks, runs their work, records outcomes, and answers the tasks/* methods for one deck."""

    def __init__(
        self,
        pipeline: Pipeline,
        bus: Bus,
        cursors: Any,
        page_size: int | None,
        store: TaskStore | str | None = None,
        *,
        default_ttl_ms: int = 3_600_000,
        max_ttl_ms: int = 86_400_000,
        poll_interval: PollInterval | None = None,
        poll_interval_ms: int | None = None,
        max_active: int = 100,
        clock: Callable[[], float] = time.time,
        server: Any = None,
        lease: float = 30.0,
        renewal: float = 10.0,
    ) -> None:
        from .takeover import Leases

        self.pipeline = pipeline
        self.server = server  # the tools a taken-over task runs again, and its request context, come from here
        self.node: str = server.node_id if server is not None else "local"
        self.bus = bus
        self.cursors = cursors
        self.page_size = page_size
        self._spec = store if isinstance(store, str) else None  # "sqlite:PATH": opened on first use
        self.store: TaskStore = MemoryTaskStore() if store is None or isinstance(store, str) else store
        self.default_ttl_ms = default_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        # poll_interval_ms (the older option) is a fixed interval; otherwise it adapts to each task's age.
        if poll_interval_ms is not None:
            poll_interval = PollInterval.fixed(poll_interval_ms)
        self.poll_interval = poll_interval if poll_interval is not None else PollInterval()
        self.max_active = max_active
        self.clock = clock
        self.running: dict[str, asyncio.Task[Any]] = {}
        self._finished: dict[str, asyncio.Event] = {}
        # The request each running task was created by: its cancellation, and its session's bus key for status.
        self.requests: dict[str, RequestContext] = {}
        # The questions each running 2026-07-28 task waits on (the tasks extension: tasks/get, tasks/update).
        self.inputs: dict[str, TaskInputs] = {}
        self.leases = Leases(self, self.node, lease, renewal)
        self._started = False
        self._purger: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self.relay: TaskRelay | None = None  # with shared backends: what reaches the tasks other processes hold

    async def start(self) -> None:
        """Once per process: open the store, take over at once the tasks whose lease already ran out (left by a
        process that died), and from now on renew this node's leases and look for others that run out."""
        if not self._started:
            await self._begin()

    async def _begin(self) -> int:
        self._started = True
        import asyncio

        if self._spec is not None:
            self.store = await open_store(self._spec)
        if self.server is not None and self.server.backends.shared:
            from .task_relay import TaskRelay

            self.relay = TaskRelay(self, self.server.nodes)
        taken = await self.leases.tend()
        loop = asyncio.get_running_loop()
        self._purger = loop.create_task(self._purge_forever())
        self._keeper = loop.create_task(self.leases.forever())
        return taken

    async def tend_leases(self) -> int:
        """One round of lease keeping now (the manager does one every ``renewal`` seconds by itself): renew this
        node's leases and take over the tasks whose lease ran out; how many were taken over."""
        if not self._started:
            return await self._begin()
        return await self.leases.tend()

    async def _purge_forever(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(60)
            try:
                await self.store.purge_expired(self.clock())
            except BackendUnavailableError as exc:  # the next round purges them
                log.warning("expired tasks were not purged this round: %s", exc)
            except Exception:
                log.exception("purging expired tasks failed")

    async def aclose(self) -> None:
        """Stop the work of every task running here and wait (``STOP_WAIT`` at most) until it stopped, so each run's
        audit record is written; in a shared store another process takes such a task over (takeover.py)."""
        import asyncio

        for request in list(self.requests.values()):
            request.cancel()
        for task in (running := list(self.running.values())):
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=STOP_WAIT)
        for service in (self._purger, self._keeper):
            if service is not None:
                service.cancel()
        await self.store.close()

    # --- creating and running -----------------------------------------------------------------------------------

    async def create(
        self, rctx: RequestContext, tool: Tool, arguments: dict[str, Any], task: dict[str, Any]
    ) -> dict[str, Any]:
        """A task-augmented call of a 2025 session: the task is opened, its work started, its CreateTaskResult made."""
        record = await self.open(rctx, tool, arguments, rctx.owner(), task.get("ttl"))
        problem = await self.recorded(rctx, record, tool, arguments)
        if problem is not None:
            return problem
        self.launch(rctx, record.task_id, tool, arguments, admitted=not awaits_approver(record))
        result: dict[str, Any] = {"task": record.to_wire()}
        if tool.immediate_response is not None:
            result["_meta"] = {IMMEDIATE_RESPONSE: tool.immediate_response}
        return result

    async def open(self, rctx: RequestContext, tool: Tool, arguments: dict[str, Any], owner: str | None,
                   requested_ttl: int | None = None, *, admit: bool = True) -> TaskRecord:  # fmt: skip
        """Store a new ``working`` task of ``owner`` for ``rctx``'s call of ``tool`` (once it is stored, a tasks/get
        finds it); ``admit``: authorize and limits first, so a refusal is immediate and nothing is created."""
        deferred = False
        if admit and self.pipeline.admits:
            try:
                await self.pipeline.admit_or_refuse(rctx, TaskCall("tool", tool.name, tool, arguments))
            except ApprovalDeferred:  # four eyes: created now, admitted (and approved) in the background
                deferred = True
        await standing_heard(rctx)  # a session ended on another process stores no task
        if not self._started:
            await self.start()
        now = self.clock()
        if await self.store.count_active(owner, now) >= self.max_active:
            raise TaskLimitError(f"Too many active tasks: the limit is {self.max_active} per requestor")
        ttl = self.default_ttl_ms if requested_ttl is None else min(requested_ttl, self.max_ttl_ms)
        annotations = tool.annotations
        record = TaskRecord(
            task_id=new_task_id(),
            owner=owner,
            status="working",
            created_at=now,
            updated_at=now,
            ttl_ms=ttl,
            poll_interval_ms=self.poll_interval.at(0),  # what a task of age 0 advertises; stored for the record
            tool=tool.name,
            node=self.node,
            lease_until=now + self.leases.lease,
            # kept only for a tool that may be run again by a node that takes the task over
            arguments=arguments if annotations is not None and annotations.get("idempotentHint") else None,
            status_message=WAITING_FOR_APPROVER if deferred else None,
        )
        await self.store.create(record)
        if rctx.server.metrics is not None:
            rctx.server.metrics.tasks.labels("working").inc()
        self.requests[record.task_id] = rctx
        return record

    async def recorded(self, rctx: RequestContext, record: TaskRecord, tool: Tool,
                       arguments: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
        """Audit the call that created ``record`` (outcome "task_created") before its CreateTaskResult leaves. None
        once it is recorded (or nothing audits); else the isError result that answers the call instead, the task
        ended ``failed`` without running (the audit trail fails closed)."""
        pipeline = self.pipeline
        if not pipeline.auditors:
            return None
        from ..tools.result import TASK_CREATED

        problem = await pipeline.audit(rctx, Call("tool", tool.name, tool, arguments), TASK_CREATED)
        if problem is not None:
            self.requests.pop(record.task_id, None)
            await self.settle(record.task_id, "failed", status_message=_text(problem), result=problem)
        return problem

    def launch(self, rctx: RequestContext, task_id: str, tool: Tool, arguments: dict[str, Any], *,
               admitted: bool = True) -> None:  # fmt: skip
        """Run the call in the background; its outcome settles the task. ``admitted``: authorized and counted when
        the task was created (else it is as it runs: a task that waits for its approver first, four eyes)."""
        work = functools.partial(self.pipeline.call_tool, rctx, tool, arguments, task=(self, task_id),
                                 admitted=admitted)  # fmt: skip
        self._watch(rctx, task_id, work)

    def run_again(self, rctx: RequestContext, task_id: str, tool: Tool, arguments: dict[str, Any], *,
                  admitted: bool = True) -> None:  # fmt: skip
        """Run a task taken over from another node (takeover.py): admitted when it was created, so not again —
        unless it was still waiting for its approver (``admitted=False``): then it says so again, and is admitted,
        and approved, here."""
        self.requests[task_id] = rctx
        if admitted:
            self.launch(rctx, task_id, tool, arguments)
            return

        async def waits_again() -> dict[str, Any]:
            await self._said(task_id, WAITING_FOR_APPROVER)
            return await self.pipeline.call_tool(rctx, tool, arguments, task=(self, task_id))

        self._watch(rctx, task_id, waits_again)

    def halt(self, task_id: str) -> None:
        """Stop the work of a task this node no longer holds (taken over, or ended, elsewhere); record nothing."""
        request = self.requests.get(task_id)
        if request is not None:
            request.cancel()
        running = self.running.get(task_id)
        if running is not None:
            running.cancel()

    def tool(self, name: str) -> Tool | None:
        """The tool ``name`` as this process serves it (None without a server, or if it is not registered here)."""
        return None if self.server is None else self.server.tools.get(name)

    def adopt(self, rctx: RequestContext, task_id: str, job: asyncio.Task[dict[str, Any]]) -> None:
        """Let ``job`` (a call that began in its request and became this task) settle the task when it ends."""
        watcher = self._watch(rctx, task_id, lambda: job)
        watcher.add_done_callback(lambda _: job.cancel())  # stopped before it began to wait: the job stops too

    def _watch(self, rctx: RequestContext, task_id: str,
               work: Callable[[], Awaitable[dict[str, Any]]]) -> asyncio.Task[None]:  # fmt: skip
        watcher = rctx.peer.loop().create_task(self._outcome(rctx, task_id, work))
        self.running[task_id] = watcher
        watcher.add_done_callback(functools.partial(self._forget, task_id))
        return watcher

    def _forget(self, task_id: str, watcher: asyncio.Task[None]) -> None:
        """The task's work is over (even if it was cancelled before it began): nothing of it stays in memory."""
        if self.running.get(task_id) is watcher:
            del self.running[task_id]
        self.requests.pop(task_id, None)
        inputs = self.inputs.pop(task_id, None)
        if inputs is not None:
            inputs.close()
        event = self._finished.pop(task_id, None)  # made only if a tasks/result is waiting
        if event is not None:
            event.set()

    async def _outcome(self, rctx: RequestContext, task_id: str, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Await the call and record how it ended. A 2026-07-28 task (the tasks extension) is ``completed`` with any
        result, isError too, and ``failed`` only with a JSON-RPC error; a 2025 task with isError is ``failed``."""
        import asyncio

        modern = versions.is_modern(rctx.revision)
        try:
            result = await work()
        except asyncio.CancelledError:  # tasks/cancel (which recorded "cancelled" first) or shutdown
            return
        except ProtocolError as exc:
            if modern:
                from .stateless import translate

                exc = translate(exc)
            await self._record(task_id, "failed", status_message=exc.message, error=exc.to_error())
        except Exception:
            log.exception("task %s failed", task_id)
            await self._record(
                task_id, "failed", status_message="Internal error", error=InternalError("Internal error").to_error()
            )
        else:
            if result.get("isError") and not modern:
                await self._record(task_id, "failed", status_message=_text(result), result=result)
            else:
                await self._record(task_id, "completed", result=result)

    async def _record(self, task_id: str, status: str, **outcome: Any) -> None:
        """``settle`` the task with its work's outcome; while the task store is out of reach, wait for it (trying
        again every second at most), so no outcome is lost to an outage. The work's watcher stays in ``running``
        meanwhile, so the task's lease is renewed as soon as the store is back, and no other node takes it over."""
        import asyncio

        delay = 0.05
        waited = False
        while True:
            try:
                await self.settle(task_id, status, **outcome)
                break
            except BackendUnavailableError as exc:
                if not waited:
                    waited = True
                    log.warning("task %s ended %s; its outcome waits for the task store: %s", task_id, status, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        if waited:
            log.info("task %s: its outcome is stored", task_id)

    async def approved(self, task_id: str) -> None:
        """A task that waited for its approver was approved: it says so as it runs (still ``working``)."""
        await self._said(task_id, APPROVED)

    async def _said(self, task_id: str, message: str) -> None:
        """A ``working`` task's status message changed (its status did not): stored, and announced."""
        record = await self.store.update(task_id, status="working", now=self.clock(), status_message=message,
                                         node=self.node)  # fmt: skip
        if record is not None and record.status == "working":
            self.announce(record)

    async def settle(self, task_id: str, status: str, *, status_message: str | None = None,
                     result: dict[str, Any] | None = None, error: dict[str, Any] | None = None,
                     held: bool = True) -> TaskRecord | None:  # fmt: skip
        """Move a task to ``status`` (if the status machine allows it) and announce the change. ``held``: the move
        comes from the task's own work, so it applies only while this node holds the task (a client's cancel,
        ``held=False``, applies wherever the task runs)."""
        record = await self.store.update(task_id, status=status, now=self.clock(), status_message=status_message,
                                         result=result, error=error, node=self.node if held else None)  # fmt: skip
        if record is not None and record.status == status:
            self.announce(record)
            if self.server is not None and self.server.metrics is not None:
                self.server.metrics.tasks.labels(status).inc()
        return record

    def announce(self, record: TaskRecord) -> None:
        """Tell who listens that the task's status changed: the 2025 session that created it (if its request is
        known here), or the 2026-07-28 streams listening for the task."""
        task_id = record.task_id
        request = self.requests.get(task_id)
        if request is not None:
            modern = versions.is_modern(request.revision)
        else:
            from .takeover import era_of

            modern = versions.is_modern(era_of(record.owner)[0])
        if modern:
            # The listen streams that asked for this task (subscriptions.py), wherever they are open: a bus payload is
            # JSON, so the record goes as its dict, without the arguments, which no listener needs.
            payload = record.to_dict()
            payload.pop("arguments", None)
            self.bus.publish(f"task/{task_id}", payload)
        else:
            key = None if request is None else getattr(request.peer, "key", None)
            if key is not None:
                note = jsonrpc.notification("notifications/tasks/status", self._wire(record, self.clock()))
                self.bus.publish(f"session/{key}", note)

    # --- tasks/* ------------------------------------------------------------------------------------------------

    def _wire(self, record: TaskRecord, now: float) -> dict[str, Any]:
        """The Task as sent at ``now``: while it runs, with the pollInterval for its age."""
        if record.is_terminal:
            return record.to_wire()
        return record.to_wire(self.poll_interval.at(now - record.created_at))

    async def lookup(self, task_id: str, owner: str | None) -> TaskRecord | None:
        """The live task ``task_id`` if ``owner`` owns it; None otherwise (another owner's task is as unknown as one
        that never existed)."""
        if not self._started:
            await self.start()
        record = await self.store.get(task_id, self.clock())
        return record if record is not None and record.owner == owner else None

    def questions(self, task_id: str) -> TaskInputs:
        """The questions the running 2026-07-28 task ``task_id`` waits on (made when it first asks)."""
        inputs = self.inputs.get(task_id)
        if inputs is None:
            from .task_inputs import TaskInputs

            inputs = self.inputs[task_id] = TaskInputs(self, task_id)
        return inputs

    async def _find(self, rctx: RequestContext, params: dict[str, Any]) -> TaskRecord:
        task_id = params.get("taskId")
        if type(task_id) is not str:
            raise InvalidParamsError('Invalid params: "taskId" must be a string')
        record = await self.lookup(task_id, rctx.owner())
        if record is None:
            raise InvalidParamsError(NOT_FOUND)
        return record

    async def get(self, rctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return self._wire(await self._find(rctx, params), self.clock())

    async def result(self, rctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        record = await self._find(rctx, params)
        while not record.is_terminal:
            if record.task_id in self.running:  # running here: wake exactly when it ends
                event = self._finished.get(record.task_id)
                if event is None:
                    event = self._finished[record.task_id] = asyncio.Event()
                await event.wait()
            else:  # running elsewhere (another process sharing the store): poll
                await asyncio.sleep(self.poll_interval.at(self.clock() - record.created_at) / 1000)
            record = await self._find(rctx, params)
        related = {RELATED_TASK: {"taskId": record.task_id}}
        if record.error is not None:
            raise ProtocolError(record.error.get("message", "Task failed"), record.error.get("data"),
                                code=record.error.get("code"))  # fmt: skip
        if record.result is not None:
            meta = {**record.result.get("_meta", {}), **related}
            return {**record.result, "_meta": meta}
        # Cancelled before it produced anything: the call has no result, so say so in one (there is no rule).
        text = record.status_message or f"The task was {record.status} before it finished."
        return {"content": [{"type": "text", "text": text}], "isError": True, "_meta": related}

    async def list(self, rctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await self.start()
        cursor = params.get("cursor")
        codec = self.cursors
        after = None if cursor is None else codec.decode_key("tasks", cursor)
        page = self.page_size or 50
        now = self.clock()
        records = await self.store.list(rctx.owner(), now, after=after, limit=page + 1)
        result: dict[str, Any] = {"tasks": [self._wire(r, now) for r in records[:page]]}
        if len(records) > page:
            result["nextCursor"] = codec.encode_key("tasks", records[page - 1].task_id)
        return result

    async def cancel(self, rctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        record = await self._find(rctx, params)
        if record.is_terminal:
            raise InvalidParamsError(f"Cannot cancel task: it is already {record.status}")
        updated = await self.stop(record.task_id)
        if updated is None or updated.status != "cancelled":
            status = updated.status if updated is not None else "gone"
            raise InvalidParamsError(f"Cannot cancel task: it is already {status}")
        return updated.to_wire()

    async def stop(self, task_id: str) -> TaskRecord | None:
        """Record the task ``cancelled`` (if it is not finished) and stop its work; the record as it now stands."""
        updated = await self.settle(task_id, "cancelled", status_message="Cancelled by the client", held=False)
        if updated is not None and updated.status == "cancelled":
            running = self.running.get(task_id)
            if running is not None:
                request = self.requests.get(task_id)
                if request is not None:
                    request.cancel()  # a sync tool in the worker pool polls ctx.is_cancelled: it sees this
                running.cancel()  # "cancelled" is recorded first, so the work's own ending cannot overwrite it
            elif self.relay is not None:
                self.relay.cancelled(updated)  # running in another process: it stops the work there
        return updated


def _text(result: dict[str, Any]) -> str:
    for block in result.get("content", ()):
        if block.get("type") == "text":
            return str(block["text"])[:500]
    return "The tool reported an error"
