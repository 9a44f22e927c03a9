"""The request context: everything one request carries and its handler may read, never the connection itself.

A 2025-era request takes the revision, client capabilities and log level from its session (``RequestContext`` with
``state``); a stateless request (2026-07-28, or stateless HTTP) carries them itself and has no ``state``. Handlers,
the call pipeline and ``Context`` read only this object, so they work the same either way.

``Peer`` is the other end of a request while it runs: where the messages tied to it go, the event loop its work
runs on, transport hints, and who asked (the client's address). A 2025 request's peer is its session, which can also
send the client requests of its own (``asking.Requester``); a 2026-07-28 request over HTTP has a peer of its own
(``peer.RequestPeer``), with nothing of a session.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.errors import InvalidParamsError
from ..protocol.jsonrpc import RequestId, is_request_id
from .state import SessionState, principal_id

if TYPE_CHECKING:
    import asyncio

    from .state import SessionState

Send = Callable[[Any, Any], None]


class Peer(Protocol):
    """The other end of a request: the session it arrived on, or a peer of its own (``peer.RequestPeer``)."""

    @property
    def key(self) -> str | None:
        """The session's address on the bus and in audit records; None for a request that has no session."""
        ...

    @property
    def address(self) -> str | None:
        """The client's network address where the transport knows it: anonymous callers are told apart by it."""
        ...

    def send(self, message: Any, related: Any) -> None:
        """Send ``message``; ``related`` is the id of the client request it belongs to (HTTP routes on it)."""
        ...

    def close_stream(self, request_id: RequestId) -> None:
        """Over HTTP, end the SSE connection of this request now (the client resumes it); elsewhere nothing."""
        ...

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the peer's work runs in."""
        ...


class RequestContext:
    """One request as its handler sees it.

    The negotiated state it reads (revision, client capabilities, log level, principal) is a ``SessionState``: its
    session's, read live (logging/setLevel applies to requests already running), or, for a request that stands alone,
    one made from what the request itself carries (``standalone``). ``cancelled`` is set once, by ``cancel()`` (the
    client's notifications/cancelled, tasks/cancel, shutdown, a time-out), and read everywhere else.
    """

    __slots__ = ("cancelled", "method", "params", "peer", "request_id", "server", "state")

    def __init__(
        self, server: Any, peer: Peer, request_id: RequestId, method: str, params: dict[str, Any], state: SessionState
    ) -> None:
        self.server = server
        self.peer = peer
        self.request_id = request_id
        self.method = method
        self.params = params
        self.state = state
        self.cancelled = False

    @classmethod
    def standalone(
        cls, server: Any, peer: Peer, request_id: RequestId, method: str, params: dict[str, Any], revision: str,
        **carried: Any,
    ) -> RequestContext:  # fmt: skip
        """A request that stands alone (no session): ``carried`` is what it brings itself (``client_capabilities``,
        ``client_info``, ``principal``, ``log_level``, ``identifies_requestor``; see ``SessionState.of_request``)."""
        return cls(server, peer, request_id, method, params, SessionState.of_request(server, revision, **carried))

    @property
    def revision(self) -> str | None:
        return self.state.revision

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the server declared to this client: features are served by these."""
        return self.state.capabilities

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.state.client_capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.state.client_info

    @property
    def principal(self) -> Any:
        return self.state.principal

    @property
    def identifies_requestor(self) -> bool:
        """Whether tasks can be bound to the requestor: the transport tells clients apart, or one authenticated."""
        state = self.state
        return state.identifies_requestor or state.principal is not None

    @property
    def log_rank(self) -> int:
        """The lowest log level the client wants, as a rank (the session's, which logging/setLevel may change)."""
        return self.state.log_rank

    def cancel(self) -> None:
        self.cancelled = True

    def progress_token(self) -> str | int | None:
        """``params._meta.progressToken``, checked: -32602 if it is not a string or an integer."""
        meta = self.params.get("_meta")
        if type(meta) is not dict:
            if meta is None:
                return None
            raise InvalidParamsError('Invalid params: "_meta" must be an object')
        token = meta.get("progressToken")
        if token is not None and not is_request_id(token):
            raise InvalidParamsError('Invalid params: "_meta.progressToken" must be a string or an integer')
        return token

    def owner(self) -> str | None:
        """Who the request's tasks belong to: the principal's id, or None (unauthenticated)."""
        return principal_id(self.state.principal)

    def __repr__(self) -> str:
        return f"RequestContext({self.method} id={self.request_id!r}, revision={self.revision})"


class Work:
    """What a handler hands to the runner: a coroutine that makes the result (or raises a ``ProtocolError``).

    ``streams``: the work may send messages tied to its request while it runs (it has a ``Context``), so a
    transport must not await it in the place that would write them. ``own``: tooldeck's own code, never user code,
    which the runner may start eagerly (see runner.py).
    """

    __slots__ = ("coro", "own", "streams")

    def __init__(self, coro: Coroutine[Any, Any, Any], streams: bool = False, *, own: bool = False) -> None:
        self.coro = coro
        self.streams = streams
        self.own = own
