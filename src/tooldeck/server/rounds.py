"""Multi round-trip requests (2026-07-28): how a tool asks the client something when the server may send no request.

In a modern ``tools/call``, ``prompts/get`` or ``resources/read`` (``ASKING``), ``ctx.elicit``/``ctx.sample`` do not
send a request: the first question that has no answer yet ends the run (``InputRequired``), and the request is
answered with an ``InputRequiredResult`` — the questions under ``inputRequests`` and a sealed ``requestState``. The
client retries (new id, same method and params, plus ``inputResponses`` and the echoed state), and the function runs
again from the start: each question gets a key in call order (``input-1``, ``input-2``, ... or the one the tool
names), questions answered before return their answers at once, and the run goes on to the next question or the end.

Nothing is kept in the server: the answers so far, the questions pending and the values a run must see again (a
confirmation code, an elicitation id: ``memo``) travel in the state, sealed by ``RequestStates`` under the deck's
key — bound to the principal, the request (method, name, arguments digest) and an expiry — so any process holding
the key takes the retry. An answer counts only for the very question it answered (its method and params digest).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..protocol import envelope
from ..protocol.errors import INVALID_PARAMS, RefusedError
from ..security.principal import principal_id
from .request import RequestContext

ASKING = frozenset({"tools/call", "prompts/get", "resources/read"})  # the only methods that may answer input_required
_ACTIONS = frozenset({"accept", "decline", "cancel"})


class InputRequired(BaseException):
    """Ends a run at its first unanswered question. A BaseException, like cancellation, so that a tool's
    ``except Exception`` does not swallow it; the modern request path turns it into the InputRequiredResult."""


class RoundTrip(RequestContext):
    """The context of a modern request that may ask the client for input: a request context with its ``rounds``,
    made when the request is a retry (``begin``) or when the function first asks (most calls never do)."""

    __slots__ = ("_rounds",)

    _rounds: Rounds | None

    @property
    def rounds(self) -> Rounds:
        found = self._rounds
        if found is None:
            found = self._rounds = Rounds(self)
        return found

    @property
    def asked(self) -> bool:
        """Whether this run stopped at questions it could not answer."""
        found = self._rounds
        return found is not None and bool(found.asked)

    def withdraw(self) -> None:
        """Take back the questions this run asked: the request is answered otherwise (its audit record could not be
        written, so the call is refused)."""
        if self._rounds is not None:
            self._rounds.asked.clear()

    @property
    def retry(self) -> bool:
        found = self._rounds
        return found is not None and found.retry


class RetryRefusedError(RefusedError):
    """-32602 for a retry that cannot be taken (a malformed answer; a tampered, expired, foreign or spent state);
    over HTTP a 400, like every -32602 of a 2026-07-28 request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=INVALID_PARAMS, http_status=400)


def begin(rctx: RoundTrip) -> None:
    """Read the retry parts of the request's params (``inputResponses``, ``requestState``) and open the state;
    -32602 naming what is wrong (a malformed response, a tampered, expired, foreign state)."""
    params = rctx.params
    responses = params.get("inputResponses")
    state = params.get("requestState")
    rctx._rounds = rounds = Rounds(rctx)
    if "inputResponses" in params and type(responses) is not dict:
        raise RetryRefusedError('Invalid params: "inputResponses" must be an object mapping the keys of '
                                 "inputRequests to the client's results")  # fmt: skip
    if responses is not None:
        for key, value in responses.items():
            if type(value) is not dict:
                raise RetryRefusedError(f'Invalid params: "inputResponses.{key}" must be an object (the client\'s '
                                         "result for that request)")  # fmt: skip
    if state is None and "requestState" not in params:
        # A first attempt. Answers sent with it (the client knew the questions) are taken for the questions of
        # their keys, checked as any answer; a confirmation never is (it needs the state that issued its code).
        rounds.unsolicited = responses or {}
        return
    if type(state) is not str:
        raise RetryRefusedError('Invalid params: "requestState" must be the string the server sent')
    rounds.retry = True
    rounds.raw = state
    data = rounds.open()
    if type(data) is not dict:
        raise RetryRefusedError("Invalid params: requestState is not a state this server issued")
    rounds.answers = dict(data.get("a") or {})
    rounds.memos = dict(data.get("m") or {})
    for key, (method, digest) in (data.get("q") or {}).items():
        if responses is not None and key in responses:  # other keys are ignored; missing ones are asked again
            rounds.answers[key] = [digest, _checked(key, method, responses[key])]


class Rounds:
    """One run of a modern request that may ask: the answers it has, the questions it asked, what it remembers."""

    __slots__ = ("_digest", "answers", "asked", "count", "escalate", "memos", "method", "params", "principal", "raw",
                 "retry", "server", "unsolicited")  # fmt: skip

    def __init__(self, rctx: RequestContext) -> None:
        # What the state is sealed for, not the context itself: no reference cycle to leave to the collector.
        self.server = rctx.server
        self.principal = rctx.principal
        self.method = rctx.method
        self.params = rctx.params
        self.answers: dict[str, list[Any]] = {}  # key -> [question digest, the client's result]
        self.memos: dict[str, Any] = {}
        self.asked: dict[str, dict[str, Any]] = {}  # key -> the request (method, params) this run could not answer
        self.count = 0
        self.raw: str | None = None
        self.retry = False
        self.unsolicited: dict[str, Any] = {}  # key -> an answer sent with a first attempt (no state)
        self._digest: str | None = None
        # Set for an ask_before_task tool called with the tasks extension: ctx.continue_as_task() awaits it, and the
        # call goes on as a task (task_extension.py).
        self.escalate: Callable[[], Awaitable[tuple[Any, str]]] | None = None

    # --- what Context calls (an asking.Asker) ---------------------------------------------------------------------

    def key(self, key: str | None) -> str:
        """The key of the next question: the tool's own, or the next in call order."""
        if key is not None:
            if type(key) is not str or not key:
                raise ValueError(f"an input request key must be a non-empty string, got {key!r}")
            return key
        self.count += 1
        return f"input-{self.count}"

    async def ask(self, key: str, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The client's result for this question if a round answered it; else the run ends (``InputRequired``).
        No time-out applies: the client takes as long as it likes before it retries."""
        digest = _digest(method, params)
        answer = self.answers.get(key)
        if answer is not None and answer[0] == digest:
            return answer[1]
        if key in self.unsolicited:
            checked = _checked(key, method, self.unsolicited.pop(key))
            self.answers[key] = [digest, checked]  # carried in the state should a later question end this run
            return checked
        if key in self.asked and _digest(self.asked[key]["method"], self.asked[key]["params"]) != digest:
            raise ValueError(f"input request key {key!r} was used for two different questions")
        self.asked[key] = {"method": method, "params": params}
        raise InputRequired(key)

    def memo(self, name: str, make: Callable[[], Any]) -> Any:
        """A value the run must see again on each round (made once, then carried in the state): JSON only."""
        if name not in self.memos:
            self.memos[name] = make()
        return self.memos[name]

    async def spend(self) -> None:
        """Mark the incoming state used (at most once, wherever the backends' spent store reaches): for answers that
        may be redeemed once."""
        if self.raw is None:
            raise RetryRefusedError("Invalid params: this request needs the requestState of its confirmation")
        from ..security.request_state import RequestStateError

        try:
            await self.server.request_states().spend(self.raw, principal_id(self.principal), self.digest)
        except RequestStateError as exc:
            raise RetryRefusedError(f"Invalid params: {exc}") from None

    # --- the interim result ------------------------------------------------------------------------------------

    def interim(self) -> dict[str, Any]:
        """The InputRequiredResult of a run that stopped at questions: every question it could not answer, and a
        state carrying the answers so far. No cache hints (interim results carry none)."""
        pending = {key: [request["method"], _digest(request["method"], request["params"])]
                   for key, request in self.asked.items()}  # fmt: skip
        data = {"a": self.answers, "q": pending, "m": self.memos}
        state = self.server.request_states().seal(principal_id(self.principal), self.digest, data)
        return {"resultType": "input_required", "inputRequests": self.asked, "requestState": state,
                "_meta": {envelope.SERVER_INFO: self.server.server_info}}  # fmt: skip

    # --- the state ---------------------------------------------------------------------------------------------

    @property
    def digest(self) -> str:
        """What the state is bound to: the method, the name (a resource's URI) and the arguments."""
        if self._digest is None:
            from ..security.request_state import request_digest

            params = self.params
            method = self.method
            if method == "resources/read":
                self._digest = request_digest(method, str(params.get("uri")), None)
            else:
                self._digest = request_digest(method, str(params.get("name")), params.get("arguments") or {})
        return self._digest

    def open(self) -> Any:
        from ..security.request_state import RequestStateError

        try:
            return self.server.request_states().open(self.raw, principal_id(self.principal), self.digest)
        except RequestStateError as exc:
            raise RetryRefusedError(f"Invalid params: {exc}") from None
        except (ValueError, KeyError, TypeError):  # intact tag, unreadable payload: not a state of this server
            raise RetryRefusedError("Invalid params: requestState is not a state this server issued") from None


def _digest(method: str, params: dict[str, Any]) -> str:
    from hashlib import sha256  # not at import time: sessions load this module, and 2025 start-up needs no hashlib

    return sha256(orjson.dumps([method, params], option=orjson.OPT_SORT_KEYS)).hexdigest()


def checked_answer(key: str, method: str, result: Any) -> dict[str, Any]:
    """A client's answer (an element of ``inputResponses``) to the question ``method`` under ``key``, checked."""
    if type(result) is not dict:
        raise RetryRefusedError(f'Invalid params: "inputResponses.{key}" must be an object (the client\'s result '
                                 "for that request)")  # fmt: skip
    return _checked(key, method, result)


def _checked(key: str, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A client's result for a question, checked for its shape (content is checked where the tool reads it)."""
    where = f'"inputResponses.{key}"'
    if method == "elicitation/create":
        if result.get("action") not in _ACTIONS:
            raise RetryRefusedError(f'Invalid params: {where} must be an elicitation result with "action" accept, '
                                     "decline or cancel")  # fmt: skip
        if "content" in result and result["content"] is not None and type(result["content"]) is not dict:
            raise RetryRefusedError(f"Invalid params: {where}.content must be an object")
    elif method == "sampling/createMessage":
        missing = [field for field in ("role", "content", "model") if field not in result]
        if missing:
            raise RetryRefusedError(f"Invalid params: {where} must be a sampling result; it lacks "
                                     f"{', '.join(missing)}")  # fmt: skip
    elif method == "roots/list" and type(result.get("roots")) is not list:
        raise RetryRefusedError(f'Invalid params: {where} must be a roots result with a "roots" array')
    return result
