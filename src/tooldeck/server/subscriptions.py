"""subscriptions/listen (2026-07-28): a modern client's stream of change notifications, fed by the same bus
publications that reach 2025 sessions (``list_changed`` and ``resource_updated``, see ``bus.py``).

One ``Listener`` per open listen request. Its first step sends ``notifications/subscriptions/acknowledged`` with the part of the client's filter this server
honours, and only then subscribes to the bus topics that part needs; every message it sends carries
``_meta["io.modelcontextprotocol/subscriptionId"]`` (the listen request's id, of its own type) and is tied to that
request, so HTTP writes it on the POST's SSE stream and stdio on the connection. What the filter did not ask for is
never sent; a resource update only for a subscribed URI (or one under it) that the request's principal may read,
checked again at each delivery (the resource may have been replaced by a guarded one since).

No ``notifications/message`` or progress ever goes on a listen stream: the spec forbids request-scoped traffic there,
and tooldeck has no other log source (``logLevel`` on a listen request is accepted and checked, and changes nothing).

It ends when the client closes the stream (HTTP: the session of that one request closes, cancelling it) or cancels it
(stdio: notifications/cancelled): the work is cancelled, its bus subscriptions dropped, nothing more is sent. When
the server ends it (``Listeners.end_all``, at shutdown), or when the credential it was opened with expires (the
principal's ``expires_at``: a listener opened with a token hears nothing once the token is no longer valid), it
answers the request with the ``SubscriptionsListenResult`` the spec gives. ``Listeners`` counts the open ones (a leak shows there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import jsonrpc
from ..protocol.errors import InvalidParamsError
from .request import RequestContext, Work

if TYPE_CHECKING:
    import asyncio

    from ..tasks.record import TaskRecord

METHOD = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
# Filter member -> the registry kind the bus names in ``list_changed`` (and the capability that offers it).
LIST_FILTERS = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
RESOURCES = "resourceSubscriptions"
TASKS = "taskIds"  # the tasks extension's filter member: notifications/tasks for these tasks (task_extension.py)


class Listeners:
    """The listen streams open in this process (the server keeps one)."""

    def __init__(self) -> None:
        self._open: dict[Listener, None] = {}

    def __len__(self) -> int:
        return len(self._open)

    def add(self, listener: Listener) -> None:
        self._open[listener] = None

    def discard(self, listener: Listener) -> None:
        self._open.pop(listener, None)

    def end_all(self) -> None:
        """End every open stream gracefully: each request gets its result (the server is going away)."""
        for listener in list(self._open):
            listener.end()


def listen(rctx: RequestContext) -> Work:
    """The handler: -32602 for a malformed filter, else the listener's work, in a task of its own. Not started
    eagerly (``own``): a task cancelled before its first step never runs its coroutine, so the acknowledgement and
    the bus subscriptions are made in that first step, and nothing is left behind by a stream cancelled at once."""
    requested = read_filter(rctx.params)
    if TASKS in requested:
        from . import task_extension

        if not task_extension.declared(rctx):
            raise task_extension.required(f'{METHOD} with "{TASKS}"')
    listener = Listener(rctx, requested)
    return Work(listener.run(), streams=True)


def read_filter(params: dict[str, Any]) -> dict[str, Any]:
    """``params.notifications``, checked: an object of booleans and a list of URI strings."""
    found = params.get("notifications")
    if type(found) is not dict:
        raise InvalidParamsError(f'Invalid params: {METHOD} needs "notifications" (an object: the filter) - at '
                                 "$.params.notifications")  # fmt: skip
    for name in LIST_FILTERS:
        if name in found and type(found[name]) is not bool:
            raise InvalidParamsError(f"Invalid params: expected a boolean - at $.params.notifications.{name}")
    uris = found.get(RESOURCES, [])
    if type(uris) is not list:
        raise InvalidParamsError(f"Invalid params: expected an array of URIs - at $.params.notifications.{RESOURCES}")
    for index, uri in enumerate(uris):
        if type(uri) is not str:
            raise InvalidParamsError(f"Invalid params: expected a string - at $.params.notifications.{RESOURCES}"
                                     f"[{index}]")  # fmt: skip
    ids = found.get(TASKS, [])
    if type(ids) is not list or not all(type(task_id) is str for task_id in ids):
        raise InvalidParamsError(f"Invalid params: expected an array of task ids - at $.params.notifications.{TASKS}")
    return found


class Listener:
    """One open subscriptions/listen request."""

    __slots__ = ("_ended", "_seen", "_subscriptions", "honoured", "kinds", "rctx", "requested_tasks", "uris")

    def __init__(self, rctx: RequestContext, requested: dict[str, Any]) -> None:
        self.rctx = rctx
        offered = rctx.capabilities
        self.honoured: dict[str, Any] = {}
        for name, kind in LIST_FILTERS.items():
            if requested.get(name) is True and kind in offered:
                self.honoured[name] = True
        self.kinds = frozenset(LIST_FILTERS[name] for name in self.honoured)
        uris: list[str] = []
        if RESOURCES in requested and "resources" in offered:
            for uri in requested[RESOURCES]:
                if uri not in uris and self._readable(uri):
                    uris.append(uri)
            self.honoured[RESOURCES] = uris
        self.uris = tuple(uris)
        self.requested_tasks: list[str] = list(dict.fromkeys(requested.get(TASKS, ())))
        self._seen: dict[str, float] = {}  # task id -> lastUpdatedAt of the state last sent (never send an older one)
        self._ended: asyncio.Future[None] | None = None
        self._subscriptions: tuple[Any, ...] = ()

    async def run(self) -> dict[str, Any]:
        rctx = self.rctx
        server = rctx.server
        tasks = await self._own_tasks() if self.requested_tasks else []
        if self.requested_tasks:
            self.honoured[TASKS] = [record.task_id for record in tasks]
        self._send(ACKNOWLEDGED, {"notifications": self.honoured})
        bus = server.bus
        subscriptions = []
        if self.kinds:
            subscriptions.append(bus.subscribe("list_changed", self.list_changed))
        if self.uris:
            subscriptions.append(bus.subscribe("resource_updated", self.resource_updated))
        for record in tasks:  # each change of each task, and (below) each task's state now
            subscriptions.append(bus.subscribe(f"task/{record.task_id}", self.task_changed))
        self._subscriptions = tuple(subscriptions)
        import asyncio  # not at import time: the handshake path stays light

        loop = asyncio.get_running_loop()
        self._ended = loop.create_future()
        expires_at = getattr(rctx.principal, "expires_at", None)
        if expires_at is not None:  # the stream lives no longer than the credential it was opened with
            import time

            expiry = loop.call_later(max(0.0, expires_at - time.time()), self.end)
            self._ended.add_done_callback(lambda _: expiry.cancel())
        server.listeners.add(self)
        try:
            if tasks:
                self.requested_tasks = self.honoured[TASKS]
                for record in await self._own_tasks():  # read after subscribing: no change falls in between
                    self._send_task(record)
            await self._ended
        finally:
            self._close()
        return {"_meta": {SUBSCRIPTION_ID: rctx.request_id}}

    def end(self) -> None:
        """The server ends the stream: the request is answered with its result."""
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    def _close(self) -> None:
        for subscription in self._subscriptions:
            subscription.cancel()
        self._subscriptions = ()
        self.rctx.server.listeners.discard(self)

    # --- what the bus delivers ----------------------------------------------------------------------------------

    def list_changed(self, kind: str) -> None:
        if kind in self.kinds and self.rctx.server.sees_change(kind, self.rctx.principal):
            self._send(f"notifications/{kind}/list_changed", {})

    def resource_updated(self, uri: str) -> None:
        for subscribed in self.uris:
            if uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/"):
                if self.rctx.server.may_read(self.rctx.principal, uri, subscribed):
                    self._send("notifications/resources/updated", {"uri": uri})
                return

    def task_changed(self, payload: dict[str, Any]) -> None:
        """A task's change as the bus carries it (``TaskRecord.to_dict``, published by ``TaskManager.announce``)."""
        from ..tasks.record import TaskRecord

        self._send_task(TaskRecord.from_dict(payload))

    def _send_task(self, record: TaskRecord) -> None:
        """notifications/tasks: the task as tasks/get would show it now (task_extension.detailed)."""
        from .task_extension import detailed

        if record.updated_at < self._seen.get(record.task_id, 0.0):
            return  # a state older than one already sent
        self._seen[record.task_id] = record.updated_at
        task = detailed(self.rctx, self.rctx.server.task_manager(), record)
        del task["resultType"], task["_meta"]
        self._send("notifications/tasks", task)

    async def _own_tasks(self) -> list[Any]:
        """The requested tasks that exist and belong to this caller (the extension's own tasks, not 2025 ones)."""
        from .task_extension import owner_of

        manager = self.rctx.server.task_manager()
        owner = owner_of(self.rctx)
        found = []
        for task_id in self.requested_tasks:
            record = await manager.lookup(task_id, owner)
            if record is not None:
                found.append(record)
        return found

    # --- helpers ------------------------------------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any]) -> None:
        rctx = self.rctx
        if rctx.cancelled:
            return  # the client ended it: nothing more may be sent for this request
        params["_meta"] = {SUBSCRIPTION_ID: rctx.request_id}
        rctx.peer.send(jsonrpc.notification(method, params), rctx.request_id)

    def _readable(self, uri: str) -> bool:
        """Whether the URI names a resource (or template match) that the request's principal may read."""
        return bool(self.rctx.server.may_read(self.rctx.principal, uri))
