"""Leases on running tasks: the node that runs a task renews its lease, and a node takes over the tasks whose lease
ran out — how a task survives the death of the process that ran it, when processes share one task store.

The rule. A task that is not finished is held by the node (``Server.node_id``) that runs its work, under a lease of
``lease`` seconds that this node renews every ``renewal`` seconds while the work runs. Every node, at each renewal,
also looks for tasks whose lease ran out (their node died, or stalled past the lease) and takes them over:

- a task whose tool is marked idempotent (``idempotentHint: true``) and that has run once is run once more, here,
  with the arguments it was called with (kept in the record for that, until the task ends), under the identity it
  was created by and without a client to ask (what it asks fails; 2026-07-28 questions wait in ``inputRequests``);
- any other is ended ``failed`` with ``STOPPED`` as its status message.

What holds: a live lease is never taken over, whatever the other node's clock says (renewal writes the lease through
the store); the store takes a task over atomically (of several nodes racing for one task, one wins); a task runs at
most ``MAX_RUNS`` times; a task's own work settles it only while its node holds it, so a stalled node that wakes up
changes nothing — and at its next renewal it learns which tasks it lost and stops their work (the same goes for a
task cancelled on another process). No task is left ``working`` once its node is gone: the first node to look after
the lease ends it or runs it again (a node looks from the first task request it serves).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..engine.errors import BackendUnavailableError
from ..protocol import versions
from ..security.approvals import awaits_approver
from ..security.principal import Principal
from ..tasks.record import MAX_RUNS, TaskRecord
from .request import RequestContext

if TYPE_CHECKING:
    from ..protocol.jsonrpc import RequestId
    from ..tasks.store import TaskStore
    from ..tools.tool import Tool

log = logging.getLogger("tooldeck.tasks")

STOPPED = "The process running this task stopped before the task finished"


class Holder(Protocol):
    """What the leases need of the TaskManager (task_manager.py, which imports this module)."""

    store: TaskStore
    server: Any
    running: dict[str, asyncio.Task[None]]
    clock: Callable[[], float]

    def tool(self, name: str) -> Tool | None: ...

    def run_again(self, rctx: RequestContext, task_id: str, tool: Tool, arguments: dict[str, Any], *,
                  admitted: bool = True) -> None: ...  # fmt: skip

    def halt(self, task_id: str) -> None: ...

    def announce(self, record: TaskRecord) -> None: ...


class Leases:
    """The leases of the tasks one node runs, and the takeover of other nodes' tasks whose lease ran out."""

    def __init__(self, manager: Holder, node: str, lease: float, renewal: float) -> None:
        self.manager = manager
        self.node = node
        self.lease = lease
        self.renewal = renewal

    async def forever(self) -> None:
        """Tend the leases every ``renewal`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.renewal)
            try:
                await self.tend()
            except BackendUnavailableError as exc:  # the store is out of reach for a while: the next round tries again
                log.warning("task leases were not renewed this round: %s", exc)
            except Exception:
                log.exception("renewing and taking over task leases failed")

    async def tend(self) -> int:
        """One round: renew the leases of the tasks this node runs, stop the work of those it lost, and take over
        the tasks whose lease ran out. Returns how many it took over."""
        manager = self.manager
        store = manager.store
        now = manager.clock()
        running = list(manager.running)  # taken before renewing: a task created meanwhile is not counted as lost
        if running:
            held = set(await store.renew(self.node, running, now, now + self.lease))
            for task_id in running:
                if task_id not in held:
                    await self._lost(task_id, now)
        taken = 0
        for seen in await store.expired(now):
            if seen.task_id in manager.running:
                continue  # its work runs here (and its renewal above was refused): never run a task twice at once
            tool = manager.tool(seen.tool)
            again = tool is not None and _idempotent(tool) and seen.arguments is not None and seen.attempts < MAX_RUNS
            record = await store.take_over(seen, node=self.node, now=now, lease_until=now + self.lease,
                                           failure=None if again else STOPPED)  # fmt: skip
            if record is None:
                continue  # another node was first, or the task was renewed or finished meanwhile
            taken += 1
            log.warning("task %s: node %s stopped renewing its lease; %s", seen.task_id, seen.node or "(none)",
                        "running it once more here" if again else "ended failed")  # fmt: skip
            if again and tool is not None:
                rerun(manager, record, tool, waited=awaits_approver(seen))
            else:
                manager.announce(record)
        return taken

    async def _lost(self, task_id: str, now: float) -> None:
        """A task this node runs was not renewed: if another node took it over, or it ended elsewhere (cancelled
        from another process) or is gone, its work here stops; if this node's own work ended it, that is all."""
        record = await self.manager.store.get(task_id, now)
        if record is None or record.node != self.node or record.status == "cancelled":
            self.manager.halt(task_id)


def _idempotent(tool: Tool) -> bool:
    return bool((tool.annotations or {}).get("idempotentHint"))


def rerun(manager: Holder, record: TaskRecord, tool: Tool, *, waited: bool = False) -> None:
    """Run a task taken over from another node once more, here: the call it was created by, under the identity it
    was created by (admitted then, so not again — unless it still ``waited`` for its approver, four eyes: then it
    is admitted here, and waits for an approver again), with no client to ask."""
    revision, owner = era_of(record.owner)
    principal = identity(owner)
    arguments = record.arguments or {}
    peer = Detached(asyncio.get_running_loop())
    params = {"name": record.tool, "arguments": arguments}
    rctx = RequestContext.standalone(manager.server, peer, f"takeover-{record.task_id}", "tools/call", params,
                                     revision, principal=principal, identifies_requestor=principal is not None)  # fmt: skip
    manager.run_again(rctx, record.task_id, tool, arguments, admitted=not waited)


def identity(principal_id: str | None) -> Principal | None:
    """The principal a task's owner names (``Principal.id``: "token:ci", "jwt:https://issuer#ci"), as the run taken
    over is made by it: what the audit trail and the tool's Context read of it. Its scopes and roles are not kept
    with the task; the call was admitted when the task was created."""
    if principal_id is None:
        return None
    method, _, rest = principal_id.partition(":")
    issuer, mark, subject = rest.partition("#")
    if method == "jwt" and mark:  # a token from an issuer: the issuer has no fragment, so the first "#" ends it
        principal = Principal(subject, method=method, issuer=issuer)
    else:
        principal = Principal(rest, method=method)
    principal.id = principal_id  # what the task is bound to, whatever shape a backend of its own gave it
    return principal


def era_of(owner: str | None) -> tuple[str, str | None]:
    """The revision a task was created in and the principal id it is bound to, from its owner in the store (a task
    of the 2026-07-28 tasks extension is stored under ``task_extension.owner_of``)."""
    from .task_extension import EXTENSION

    if owner is not None and (owner == EXTENSION or owner.startswith(f"{EXTENSION}|")):
        return versions.MODERN[-1], owner[len(EXTENSION) + 1 :] or None
    return versions.LATEST, owner


class Detached:
    """The peer of a run on a node that took its task over: the client that created the task is connected elsewhere
    (or gone), so what the run sends goes nowhere, and what it asks the client fails at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._asked = 0

    @property
    def key(self) -> str | None:
        return None

    @property
    def address(self) -> str | None:
        return None

    def send(self, message: Any, related: Any) -> None:
        pass

    def ask(self, method: str, params: dict[str, Any], related: RequestId | None) -> tuple[RequestId, Any]:
        self._asked += 1
        answer = self._loop.create_future()
        answer.set_exception(ConnectionError("the task was taken over by another process, where its client is not "
                                             "connected"))  # fmt: skip
        return f"takeover-{self._asked}", answer

    def abandon(self, request_id: RequestId, reason: str, related: RequestId | None) -> None:
        pass

    def close_stream(self, request_id: RequestId) -> None:
        pass

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop
