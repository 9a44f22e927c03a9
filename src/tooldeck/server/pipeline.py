"""The call pipeline: the one path by which user code runs — tools/call (plain or as a task), resources/read and
prompts/get — so no entry point can skip a check.

    look up  ->  authorize  ->  limits  ->  validate and convert  ->  run  ->  output  ->  sanitise  ->  audit
    methods/     admit()        admit()     tools/call.py            _run()   tools/      sanitisers     auditors
                 (policies)     (limiters)  prompts/, resources/     (the     result.py
                                                                      Context)

Lookup happens in the method handlers (an unknown name is a -32602 before any work starts). ``admit`` runs the
authorize and limit steps: each is an async-capable callable ``step(request, call)`` that may await (a key set, a
rate limiter, a confirmation) and refuses by raising (``RefusedError`` carries the HTTP status a transport answers
with; any ``ProtocolError`` is answered as itself; a ``ToolError`` becomes an isError result). ``_run`` is the one
place a ``Context`` is made and finished, sync functions go to the worker pool, and time-outs apply. Sanitisers
``(request, call, result) -> result`` and auditors ``(request, call, result)`` see every result, refusals too
(``result`` None). What an auditor returns to await (the audit trail's batch) is awaited before the call is
answered — the record is written first — and if it raises ``ToolError`` (the trail could not take the record), a
call that ran is answered with that error instead of its result. A step list that is empty costs one truth test.
What a running function sends besides its result (logs, progress, its questions) goes through
``message_sanitiser`` ``(method, params) -> params``, set with the output sanitiser (None: sent as it is).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any, NoReturn

from ..protocol.errors import (
    InternalError,
    ProtocolError,
    RefusedError,
    ToolError,
)
from ..protocol.record import Record
from ..tools.call import check_arguments, describe_failure
from ..tools.result import CANCELLED, INPUT_REQUIRED, build_result, error_result
from . import tracing
from .context import Context
from .rounds import InputRequired

if TYPE_CHECKING:
    from ..tools.tool import Tool
    from .options import ServerOptions
    from .request import RequestContext
    from .workers import WorkerPool

log = logging.getLogger("tooldeck.pipeline")

Step = Callable[["RequestContext", "Call"], Any]  # may return an awaitable
Sanitiser = Callable[["RequestContext", "Call", dict[str, Any]], dict[str, Any]]
Auditor = Callable[["RequestContext", "Call", "dict[str, Any] | None"], Any]  # None: the call was refused


class Call(Record):
    """What one invocation is about: ``kind`` ("tool", "resource", "prompt"), its ``name`` (a tool or prompt name, a
    resource URI), the registered ``item`` and the ``arguments`` as the client sent them; ``started`` (a monotonic
    clock reading); for a call an authorize or limit step refused, the ``refusal``; for one a person approved (four
    eyes, a URL approval), the ``approval``: who, and why (its audit record's reason)."""

    __slots__ = ("kind", "name", "item", "arguments", "started", "refusal", "approval")
    defers_approval = False  # an approver's wait may come after it is admitted (TaskCall: a task being created)

    def __init__(self, kind: str, name: str, item: Any, arguments: dict[str, Any]) -> None:
        self.kind = kind
        self.name = name
        self.item = item
        self.arguments = arguments
        self.started = monotonic()
        self.refusal: Exception | None = None
        self.approval: str | None = None  # who approved it, and why, when a person had to (security/levels.py)


class TaskCall(Call):
    """The call of a task being created: a step that would wait for an approver (four eyes) raises
    ``ApprovalDeferred`` instead, and the task waits in the background (task_manager.py)."""

    __slots__ = ()
    defers_approval = True


class Pipeline:
    """The steps every call goes through, configured per server (``Deck.policies`` is the authorize list)."""

    def __init__(self, workers: Callable[[], WorkerPool], options: ServerOptions) -> None:
        self._workers = workers  # the pool is made when the first sync function runs
        self.options = options  # mask_errors, tool_timeout
        self.authorizers: list[Step] = []
        self.limiters: list[Step] = []
        self.sanitisers: list[Sanitiser] = []
        self.auditors: list[Auditor] = []
        # Cleans the params of each notification or request a running function sends (the Context calls it).
        self.message_sanitiser: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None

    # --- authorize, limits --------------------------------------------------------------------------------------

    def admit(self, rctx: RequestContext, call: Call) -> Any:
        """The authorize and limit steps, in that order; the first refusal ends the call. Returns None when every
        step finished at once (the common case: no coroutine is made), else an awaitable of the rest."""
        steps = (*self.authorizers, *self.limiters)
        for index, step in enumerate(steps):
            outcome = step(rctx, call)
            if outcome is not None and hasattr(outcome, "__await__"):
                return self._admit_rest(outcome, steps[index + 1 :], rctx, call)
        return None

    async def _admit_rest(self, outcome: Any, steps: tuple[Step, ...], rctx: RequestContext, call: Call) -> None:
        await outcome
        for step in steps:
            outcome = step(rctx, call)
            if hasattr(outcome, "__await__"):
                await outcome

    async def admit_or_refuse(self, rctx: RequestContext, call: Call) -> None:
        """``admit`` for a call that has no isError result to carry a step's ``ToolError`` (a resource, a prompt, a
        task being created): the refusal is the error response, with the HTTP status the ``ToolError`` names (a
        rate limit's 429, an unavailable audit trail's 503; else 403)."""
        try:
            pending = self.admit(rctx, call)
            if pending is not None:
                await pending
        except ToolError as exc:
            refusal = _as_refusal(exc) or RefusedError(str(exc) or f"{call.kind} {call.name!r} was refused",
                                                       http_status=getattr(exc, "http_status", 403))  # fmt: skip
            await self.refuse(rctx, call, refusal)
            raise refusal from None
        except ProtocolError as exc:
            await self.refuse(rctx, call, exc)
            raise

    @property
    def admits(self) -> bool:
        return bool(self.authorizers or self.limiters)

    # --- tools --------------------------------------------------------------------------------------------------

    async def call_tool(self, rctx: RequestContext, tool: Tool, arguments: dict[str, Any], *,
                        task: tuple[Any, str] | None = None, admitted: bool = False) -> dict[str, Any]:  # fmt: skip
        """The CallToolResult of one call. Tool failures are isError results; cancellation passes through."""
        call = None
        if not admitted and (self.authorizers or self.limiters):  # (``admits``, inline)
            call = Call("tool", tool.name, tool, arguments)
            try:
                pending = self.admit(rctx, call)  # a ProtocolError refusal is the call's error response
                if pending is not None:
                    await pending
            except InputRequired:  # a level 8-10 confirmation asked in a 2026-07-28 round
                problem = await self.audit(rctx, call, INPUT_REQUIRED)
                if problem is not None:
                    return _withdrawn(rctx, problem)
                raise
            except ToolError as exc:
                call.refusal = exc  # refused with an isError result (a rate limit, say): audited as a refusal
                if rctx.server.metrics is not None or tracing.active:
                    _observe_refusal(rctx, exc, tool)
                return await self.finish(rctx, call, self._refusal_result(tool, exc))
            except ProtocolError as exc:
                await self.refuse(rctx, call, exc)
                raise
            if task is not None:  # a task admitted as it runs: it waited for its approver, and runs now
                await task[0].approved(task[1])
        pending = getattr(rctx.peer, "standing", None)  # ``unheard``, inline on the hot path
        if pending is not None and not pending.done():  # whether the session still stands: heard before the run
            await until_heard(pending)
        if tracing.active:
            tracing.decision(None, rctx.server.access.level_of(tool))
        timeout = tool.timeout if tool.timeout is not None else self.options.tool_timeout
        try:
            if tool.is_async and timeout is None and not tool.injected:  # the common case, one await fewer
                result = build_result(tool, await tool.fn(**check_arguments(tool, arguments)))
            else:
                value = await self._run(rctx, tool, check_arguments(tool, arguments), tool.name, task, timeout)
                result = build_result(tool, value)
        except ToolError as exc:  # raised by the tool, or invalid arguments
            result = error_result(str(exc) or f"Tool {tool.name!r} failed")
        except ProtocolError as exc:  # the tool's own JSON-RPC error (-32042/-32021 from its questions, too)
            problem = await self.audit(rctx, call or Call("tool", tool.name, tool, arguments), _errored(exc))
            if problem is not None:
                return problem
            raise
        except InputRequired:  # the run stopped at a question: this round of a 2026-07-28 call ends input-required
            problem = await self.audit(rctx, call or Call("tool", tool.name, tool, arguments), INPUT_REQUIRED)
            if problem is not None:
                return _withdrawn(rctx, problem)
            raise
        except TimeoutError as exc:
            if timeout is None:  # the tool's own time-out, not ours
                result = error_result(describe_failure(f"tool {tool.name!r}", exc, self.options.mask_errors))
            else:
                log.warning("tool %r timed out after %g s", tool.name, timeout)
                result = error_result(f"Tool {tool.name!r} timed out after {timeout:g} s and was stopped")
        except Exception as exc:  # the tool's own bug or failure; BaseException (cancellation, exit) passes through
            result = error_result(describe_failure(f"tool {tool.name!r}", exc, self.options.mask_errors))
        except BaseException as exc:  # stopped while it ran (the client, tasks/cancel, the process stopping): recorded
            if self.auditors and not isinstance(exc, GeneratorExit):  # (a coroutine closed unawaited cannot wait)
                await self._stopped(rctx, call or Call("tool", tool.name, tool, arguments))
            raise
        if self.auditors:
            call = call or Call("tool", tool.name, tool, arguments)
            result, pending = self._finish(rctx, call, result)
            if pending:  # the audit trail's batch (written before the answer leaves), or an async auditor's work
                result = await self._recorded(call, result, pending, rctx.server.metrics)
        elif self.sanitisers:  # no audit trail (no policy, say): the sanitiser alone, without the audit's machinery
            call = call or Call("tool", tool.name, tool, arguments)
            for sanitise in self.sanitisers:
                result = sanitise(rctx, call, result)
        return result

    # --- resources and prompts ----------------------------------------------------------------------------------

    async def invoke(
        self, rctx: RequestContext, call: Call, label: str, convert: Callable[[Any, dict[str, Any]], dict[str, Any]]
    ) -> Any:
        """Run a resource's or prompt's function: authorize and limits, then ``convert(item, arguments)`` validates and
        converts the arguments (raising -32602), then the run step. Failures are JSON-RPC errors."""
        if self.admits:
            await self.admit_or_refuse(rctx, call)
        kwargs = convert(call.item, call.arguments)
        pending = unheard(rctx.peer)
        if pending is not None:
            await until_heard(pending)
        try:
            return await self._run(rctx, call.item, kwargs, label, None, None)
        except ProtocolError:
            raise
        except Exception as exc:
            raise InternalError(describe_failure(label, exc, self.options.mask_errors)) from None

    # --- run, sanitise, audit -----------------------------------------------------------------------------------

    async def _run(self, rctx: RequestContext, item: Any, kwargs: dict[str, Any], name: str,
                   task: tuple[Any, str] | None, timeout: float | None) -> Any:  # fmt: skip
        """Call ``item.fn`` with ``kwargs`` (and its Context, if it takes one): on the loop if it is async, in the
        worker pool if not, within ``timeout`` seconds if one is given."""
        context = None
        if item.injected:
            context = Context(rctx, name, task)
            kwargs = {**kwargs, **dict.fromkeys(item.injected, context)}
        try:
            if item.is_async:
                running = item.fn(**kwargs)
            else:  # with a Context, what it sends from the thread must reach the loop before the result does
                running = self._workers().run(functools.partial(item.fn, **kwargs), may_wait=context is None)
            if timeout is None:
                return await running
            import asyncio

            async with asyncio.timeout(timeout):
                return await running
        finally:
            if context is not None:
                context.finished = True  # nothing may follow the response

    async def finish(self, rctx: RequestContext, call: Call, result: dict[str, Any]) -> dict[str, Any]:
        """The sanitise and audit steps of a result (resources and prompts call it; tools/call calls it itself)."""
        result, pending = self._finish(rctx, call, result)
        if pending:
            result = await self._recorded(call, result, pending, rctx.server.metrics)
        return result

    def _finish(
        self, rctx: RequestContext, call: Call, result: dict[str, Any]
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        for sanitise in self.sanitisers:
            result = sanitise(rctx, call, result)
        pending: tuple[Any, ...] = ()  # what the auditors return to await: the audit trail's batch
        for audit in self.auditors:
            outcome = audit(rctx, call, result)
            if outcome is not None and hasattr(outcome, "__await__"):
                pending += (outcome,)
        return result, pending

    @staticmethod
    async def _recorded(call: Call, result: dict[str, Any], pending: tuple[Any, ...],
                        metrics: Any = None) -> dict[str, Any]:  # fmt: skip
        """``result`` once every auditor's awaitable is done: a call is answered only after its record is written.
        An auditor that raises ``ToolError`` (the audit trail could not take the record) withholds the result of a
        call that ran: a tools/call gets that error as an isError result, anything else the error (its HTTP status
        too). A refused call keeps its own refusal."""
        refused: ToolError | None = None
        for outcome in pending:
            try:
                await outcome
            except ToolError as exc:
                refused = refused or exc
                if metrics is not None:
                    metrics.audit_errors.inc()
            else:
                if metrics is not None:
                    metrics.audit_records.inc()
        if refused is None or call.refusal is not None:
            return result
        if call.kind == "tool":
            return error_result(str(refused))
        raise RefusedError(str(refused), http_status=getattr(refused, "http_status", 503))

    async def audit(self, rctx: RequestContext, call: Call, result: dict[str, Any]) -> dict[str, Any] | None:
        """Auditors hear of a call that ended without a result of its own (a JSON-RPC error, an input-required round,
        a task created: the sentinels of tools/result.py). None once its record is written; else the isError result
        that answers the call instead (the record could not be written)."""
        pending = tuple(
            outcome for audit in self.auditors if hasattr(outcome := audit(rctx, call, result), "__await__")
        )
        if pending:
            answer = await self._recorded(call, result, pending, rctx.server.metrics)
            if answer is not result:
                return answer
        return None

    async def _stopped(self, rctx: RequestContext, call: Call) -> None:
        """Record a call whose run was cancelled (outcome "cancelled"), as well as it can: nobody waits for an answer,
        so a record that cannot be written is logged, and the cancellation goes on either way."""
        try:
            await self.audit(rctx, call, CANCELLED)
        except Exception:
            log.exception("the cancelled call %r could not be recorded", call.name)

    async def refuse(self, rctx: RequestContext, call: Call, refusal: ProtocolError) -> None:
        """Auditors hear of a refused call too (``call.refusal`` says why; there is no result, None); returns once its
        record is written, so the refusal is answered after it. A record that cannot be written does not change the
        refusal."""
        call.refusal = refusal
        metrics = rctx.server.metrics
        if metrics is not None or tracing.active:
            _observe_refusal(rctx, refusal, call.item)
        pending = tuple(outcome for audit in self.auditors if hasattr(outcome := audit(rctx, call, None), "__await__"))
        if pending:
            await self._recorded(call, {}, pending, metrics)

    async def unknown(self, rctx: RequestContext, call: Call, refusal: ProtocolError) -> NoReturn:
        """Refuse a call of a name that is not registered (``call.item`` is None) with ``refusal``, once the auditors
        have recorded it: the answer is the same as without them."""
        await self.refuse(rctx, call, refusal)
        raise refusal

    @staticmethod
    def _refusal_result(tool: Tool, exc: ToolError) -> dict[str, Any]:
        """The isError result of a tools/call a step refused with a ToolError; a rate limit adds when to retry."""
        result = error_result(str(exc) or f"Tool {tool.name!r} was refused")
        refusal = _as_refusal(exc)
        if refusal is not None:
            result["_meta"] = refusal.data
        return result


def _observe_refusal(rctx: RequestContext, refusal: BaseException, item: Any) -> None:
    """A refused call in the metrics (by reason and level) and on the request's span."""
    server = rctx.server
    level = None if item is None else server.access.level_of(item)
    if server.metrics is not None and (item is not None or isinstance(refusal, RefusedError)):
        server.metrics.refused(refusal, level)
    if tracing.active:
        tracing.decision(refusal, level)


async def until_heard(pending: Any) -> None:
    """Wait until ``pending`` (the word of a shared session store on whether a request's session still stands:
    ``Session.standing``) is in, whatever it says: what it says is acted on as it comes (a session ended elsewhere
    cancels its requests' work, this one's too, before the run). Waiting never cancels it."""
    import asyncio

    await asyncio.wait((pending,))


def unheard(peer: Any) -> Any:
    """The word on whether ``peer``'s session still stands (``Session.standing``), while it is still to come; else
    None (no such word: stdio, memory backends, a request peer; or already heard). Sync, for the hot path."""
    pending = getattr(peer, "standing", None)
    return None if pending is None or pending.done() else pending


async def standing_heard(rctx: RequestContext) -> None:
    """``until_heard`` for the request's session, if its standing is still to be heard (off the hot path)."""
    pending = unheard(rctx.peer)
    if pending is not None:
        await until_heard(pending)


def _withdrawn(rctx: RequestContext, refusal: dict[str, Any]) -> dict[str, Any]:
    """``refusal`` answers a round that stopped at questions: they are taken back (see ``RoundTrip.withdraw``)."""
    withdraw = getattr(rctx, "withdraw", None)
    if withdraw is not None:
        withdraw()
    return refusal


def _errored(exc: ProtocolError) -> dict[str, Any]:
    """What auditors see of a call that ended in a JSON-RPC error (the client gets the error itself)."""
    return {"content": [{"type": "text", "text": exc.message}], "isError": True}


def _as_refusal(exc: ToolError) -> RefusedError | None:
    """A rate limit's refusal as the error a call without an isError result gets (429, Retry-After); else None."""
    if getattr(exc, "retry_after", None) is None:
        return None
    from ..security.limits import RateLimitRefusedError  # loaded by the first call over a limit

    return RateLimitRefusedError(str(exc), exc.retry_after)  # type: ignore[attr-defined]
