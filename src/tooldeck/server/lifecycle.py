"""The session lifecycle (spec: basic/lifecycle) as a table: which messages each state serves, and what moves it.

The rules, in short. A connection starts ``NEW``: the client must open with ``initialize``, and until it has, the
server answers nothing but ``initialize`` and ``ping`` (anything else is refused with -32600 at once: a request
before initialize is not valid in any revision). A successful ``initialize`` answer moves the session to
``INITIALIZED``; from then on every method the server offers is served (the spec asks the *client* to wait for its
own ``notifications/initialized`` before sending more than pings, but a server that refused an eager client would
gain nothing). That notification moves it to ``READY``, the state a healthy session spends its life in. A second
``initialize`` is refused in both. ``CLOSED`` is final: the transport ended the session, and nothing is served.

Only two things move a session: the answer to ``initialize`` (never the request: a refused initialize leaves it
``NEW``) and the client's ``notifications/initialized`` (ignored before initialize, as any notification is). The
table below is the whole machine; ``Session`` consults it and changes state nowhere else.
"""

from __future__ import annotations

NEW = "new"
INITIALIZED = "initialized"
READY = "ready"
CLOSED = "closed"

ANY = None  # "every method"

# state -> the requests it serves (ANY: all of them but a second initialize)
SERVES: dict[str, frozenset[str] | None] = {
    NEW: frozenset({"initialize", "ping"}),
    INITIALIZED: ANY,
    READY: ANY,
    CLOSED: frozenset(),
}
# (state, event) -> next state. Events: "initialize" answered with a result, a notification's method.
MOVES: dict[tuple[str, str], str] = {
    (NEW, "initialize"): INITIALIZED,
    (INITIALIZED, "notifications/initialized"): READY,
}


def serves(state: str, method: str) -> bool:
    """Whether a request for ``method`` is served in ``state`` (a refusal is the caller's to word)."""
    allowed = SERVES[state]
    if allowed is ANY:
        return method != "initialize"
    return method in allowed


def refusal(state: str, method: str) -> str:
    """Why ``method`` is not served in ``state``, for the -32600 message."""
    if state == NEW:
        return f"Invalid request: {method} before initialize; send initialize first"
    if state == CLOSED:
        return "Invalid request: the session is closed"
    return "Invalid request: the session is already initialized"


def move(state: str, event: str) -> str:
    """The state after ``event``; events the table does not name leave it where it is."""
    return MOVES.get((state, event), state)
