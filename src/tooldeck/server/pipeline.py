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
``(request, call, result) -> result`` and auditors ``(request, call, result)`` see every result. A step list that is
empty costs one truth test. What a running function sends besides its result (logs, progress, its questions) goes
through ``message_sanitiser`` ``(method, params) -> params``, set with the output sanitiser (None: sent as it is).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    InternalError,
    ProtocolError,
    RefusedError,
    ToolError,
)
from ..protocol.record import Record
from ..tools.call import check_arguments, describe_failure
from ..tools.result import INPUT_REQUIRED, build_result, error_result
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
    clock reading) and, for a call an authorize or limit step refused, the ``refusal``."""

    __slots__ = ("kind", "name", "item", "arguments", "started", "refusal")

    def __init__(self, kind: str, name: str, item: Any, arguments: dict[str, Any]) -> None:
        self.kind = kind
        self.name = name
        self.item = item
        self.arguments = arguments
        self.started = monotonic()
        self.refusal: Exception | None = None


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
        self._background: set[Any] = set()  # async auditors of refusals, kept until they finish

    # --- authorize, limits --------------------------------------------------------------------------------------

    def admit(self, rctx: RequestContext, call: Call) -> Any:
        """The authorize and limit steps, in that order; the first refusal ends the call. Returns None when every
        step finished at once (the common case: no coroutine is made), else an awaitable of the rest."""
        for steps in (self.authorizers, self.limiters):
            for index, step in enumerate(steps):
                outcome = step(rctx, call)
                if outcome is not None and hasattr(outcome, "__await__"):
                    rest = steps[index + 1 :] if steps is self.limiters else (*steps[index + 1 :], *self.limiters)
                    return self._admit_rest(outcome, tuple(rest), rctx, call)
        return None

    async def _admit_rest(self, outcome: Any, steps: tuple[Step, ...], rctx: RequestContext, call: Call) -> None:
        await outcome
        for step in steps:
            outcome = step(rctx, call)
            if hasattr(outcome, "__await__"):
                await outcome

    async def admit_or_refuse(self, rctx: RequestContext, call: Call) -> None:
        """``admit`` for a call that has no isError result to carry a step's ``ToolError`` (a resource, a prompt, a
        task being created): the refusal is the error response."""
        try:
            pending = self.admit(rctx, call)
            if pending is not None:
                await pending
        except ToolError as exc:
            refusal = _as_refusal(exc) or RefusedError(str(exc) or f"{call.kind} {call.name!r} was refused")
            self._refused(rctx, call, refusal)
            raise refusal from None
        except ProtocolError as exc:
            self._refused(rctx, call, exc)
            raise

    @property
    def admits(self) -> bool:
        return bool(self.authorizers or self.limiters)

    # --- tools --------------------------------------------------------------------------------------------------

    async def call_tool(self, rctx: RequestContext, tool: Tool, arguments: dict[str, Any], *,
                        task: tuple[Any, str] | None = None, admitted: bool = False) -> dict[str, Any]:  # fmt: skip
        """The CallToolResult of one call. Tool failures are isError results; cancellation passes through."""
        call = None
        if not admitted and self.admits:
            call = Call("tool", tool.name, tool, arguments)
            try:
                pending = self.admit(rctx, call)  # a ProtocolError refusal is the call's error response
                if pending is not None:
                    await pending
            except InputRequired:  # a level 8-10 confirmation asked in a 2026-07-28 round
                await self._audit(rctx, call, INPUT_REQUIRED)
                raise
            except ToolError as exc:
                call.refusal = exc  # refused with an isError result (a rate limit, say): audited as a refusal
                return await self.finish(rctx, call, self._refusal_result(tool, exc))
            except ProtocolError as exc:
                self._refused(rctx, call, exc)
                raise
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
            await self._audit(rctx, call or Call("tool", tool.name, tool, arguments), _errored(exc))
            raise
        except InputRequired:  # the run stopped at a question: this round of a 2026-07-28 call ends input-required
            await self._audit(rctx, call or Call("tool", tool.name, tool, arguments), INPUT_REQUIRED)
            raise
        except TimeoutError as exc:
            if timeout is None:  # the tool's own time-out, not ours
                result = error_result(describe_failure(f"tool {tool.name!r}", exc, self.options.mask_errors))
            else:
                log.warning("tool %r timed out after %g s", tool.name, timeout)
                result = error_result(f"Tool {tool.name!r} timed out after {timeout:g} s and was stopped")
        except Exception as exc:  # the tool's own bug or failure; BaseException (cancellation, exit) passes through
            result = error_result(describe_failure(f"tool {tool.name!r}", exc, self.options.mask_errors))
        if self.sanitisers or self.auditors:
            result, pending = self._finish(rctx, call or Call("tool", tool.name, tool, arguments), result)
            if pending:  # an async auditor (the built-in ones are not: they hand records to a writer thread)
                for outcome in pending:
                    await outcome
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
        for outcome in pending:
            await outcome
        return result

    def _finish(
        self, rctx: RequestContext, call: Call, result: dict[str, Any]
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        for sanitise in self.sanitisers:
            result = sanitise(rctx, call, result)
        pending: tuple[Any, ...] = ()  # the auditors to await (the built-in ones are sync: none)
        for audit in self.auditors:
            outcome = audit(rctx, call, result)
            if outcome is not None and hasattr(outcome, "__await__"):
                pending += (outcome,)
        return result, pending

    async def _audit(self, rctx: RequestContext, call: Call, result: dict[str, Any]) -> None:
        """Auditors hear of a call that ended without a result of its own (a JSON-RPC error, an input-required round)."""
        for audit in self.auditors:
            outcome = audit(rctx, call, result)
            if hasattr(outcome, "__await__"):
                await outcome

    def _refused(self, rctx: RequestContext, call: Call, refusal: ProtocolError) -> None:
        """Auditors hear of a refused call too: ``call.refusal`` says why, and there is no result (None)."""
        call.refusal = refusal
        for audit in self.auditors:
            outcome = audit(rctx, call, None)
            if hasattr(outcome, "__await__"):
                import asyncio

                task = asyncio.ensure_future(outcome)  # the refusal is answered now; the record follows
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    @staticmethod
    def _refusal_result(tool: Tool, exc: ToolError) -> dict[str, Any]:
        """The isError result of a tools/call a step refused with a ToolError; a rate limit adds when to retry."""
        result = error_result(str(exc) or f"Tool {tool.name!r} was refused")
        refusal = _as_refusal(exc)
        if refusal is not None:
            result["_meta"] = refusal.data
        return result


def _errored(exc: ProtocolError) -> dict[str, Any]:
    """What auditors see of a call that ended in a JSON-RPC error (the client gets the error itself)."""
    return {"content": [{"type": "text", "text": exc.message}], "isError": True}


def _as_refusal(exc: ToolError) -> RefusedError | None:
    """A rate limit's refusal as the error a call without an isError result gets (429, Retry-After); else None."""
    if getattr(exc, "retry_after", None) is None:
        return None
    from ..security.limits import RateLimitRefusedError  # loaded by the first call over a limit

    return RateLimitRefusedError(str(exc), exc.retry_after)  # type: ignore[attr-defined]
