"""Context: what a running tool can do with its request: report progress, log to the client, see cancellation.

Declare a parameter annotated ``Context`` and tooldeck passes it in; it never appears in the inputSchema. Its
methods work from async tools (``await ctx.report_progress(1, 3)``) and from sync tools running in a worker thread
(``ctx.report_progress(1, 3)``, no await): the message is handed to the event loop's thread either way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, cast

from ..protocol import jsonrpc, versions
from ..protocol.errors import ClientRequestError
from .asking import ClientRequests
from .options import LOG_LEVELS, LOG_RANK

ELICIT_TIMEOUT = 600.0  # a person is answering
SAMPLE_TIMEOUT = 300.0  # a model is answering (and maybe a person approving)
ROOTS_TIMEOUT = 60.0  # the client answers by itself

if TYPE_CHECKING:
    from .asking import Asker, Requester
    from .elicitation import ElicitResult
    from .request import RequestContext

log = logging.getLogger("tooldeck.context")


class _Done:
    """An awaitable that is already complete: lets sync tools call the methods without ``await``."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


DONE = _Done()


class Context:
    """Passed to a tool (resource, prompt) that asks for it; valid while the call runs (calls after it are ignored).

    Made and finished in one place, the call pipeline's run step (``server/pipeline.py``); cancellation is read from
    the request (``RequestContext.cancelled``), which is the one place it is set.
    """

    __slots__ = ("_last_progress", "_loop", "_loop_thread", "_sanitise", "finished", "progress_token", "request",
                 "task", "tool_name")  # fmt: skip

    def __init__(self, request: RequestContext, tool_name: str, task: tuple[Any, str] | None = None) -> None:
        self.request = request
        self.tool_name = tool_name
        self.progress_token = request.progress_token()
        self._loop = request.peer.loop()  # where messages go from a sync tool's worker thread
        self._loop_thread = threading.get_ident()
        self._last_progress: float | None = None
        self.finished = False
        self.task = task  # (TaskManager, task id) when the call runs as a task
        # The output sanitiser of what the tool sends (security/apply.py), None when the policy turned it off; log
        # and progress are cleaned where they are sent from (for a sync tool: its worker thread, not the loop).
        self._sanitise = request.server.pipeline.message_sanitiser

    @property
    def request_id(self) -> jsonrpc.RequestId:
        return self.request.request_id

    @property
    def cancelled(self) -> bool:
        return self.request.cancelled

    # --- what the tool can read ---------------------------------------------------------------------------------

    @property
    def is_cancelled(self) -> bool:
        """True once the client cancelled the request; sync tools should poll it in long loops."""
        return self.cancelled

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.request.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.request.client_capabilities

    @property
    def protocol_version(self) -> str | None:
        return self.request.revision

    @property
    def principal(self) -> Any:
        """Who is calling: the authenticated principal, or None."""
        return self.request.principal

    # --- what the tool can send ---------------------------------------------------------------------------------

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> _Done:
        """Send notifications/progress, only if the request carried a progressToken.

        ``progress`` must grow with every call (the spec requires it); a value that does not is dropped with a
        warning in the server log rather than sent.
        """
        if self.progress_token is None or self.finished or self.cancelled:
            return DONE
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            raise TypeError(f"progress must be a number, got {type(progress).__name__}")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int | float)):
            raise TypeError(f"total must be a number or None, got {type(total).__name__}")
        if message is not None and not isinstance(message, str):
            raise TypeError(f"message must be a string or None, got {type(message).__name__}")
        if self._last_progress is not None and progress <= self._last_progress:
            log.warning(
                "tool %r: progress %r does not exceed %r; not sent", self.tool_name, progress, self._last_progress
            )
            return DONE
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
            if self._sanitise is not None and not (message.isascii() and message.isprintable() and "\\" not in message):
                params = self._sanitise("notifications/progress", params)  # printable ASCII has nothing to clean
        self._emit(jsonrpc.notification("notifications/progress", params))
        return DONE

    def log(self, level: str, message: Any, *, logger: str | None = None) -> _Done:
        """Send notifications/message at ``level`` (debug ... emergency) if the client's log level lets it through.

        ``message`` may be a string or any JSON value (the spec's ``data``).
        """
        if level not in LOG_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self.finished or LOG_RANK[level] < self.request.log_rank:
            return DONE
        params: dict[str, Any] = {"level": level, "data": message}
        if logger is not None:
            params["logger"] = logger
        if self._sanitise is not None and (
            logger is not None
            or type(message) is not str
            or not (message.isascii() and message.isprintable() and "\\" not in message)
        ):  # printable ASCII (with no backslash: no JSON escape either) has nothing to clean: the usual line
            params = self._sanitise("notifications/message", params)
        self._emit(jsonrpc.notification("notifications/message", params))
        return DONE

    def debug(self, message: Any, *, logger: str | None = None) -> _Done:
        return self.log("debug", message, logger=logger)

    def info(self, message: Any, *, logger: str | None = None) -> _Done:
        return self.log("info", message, logger=logger)

    def warning(self, message: Any, *, logger: str | None = None) -> _Done:
        return self.log("warning", message, logger=logger)

    def error(self, message: Any, *, logger: str | None = None) -> _Done:
        return self.log("error", message, logger=logger)

    # --- what the tool can ask the client (async tools only) -----------------------------------------------------
    # Each question goes to the request's asker (server/asking.py). In a 2025 session it is a request to the client.
    # In a 2026-07-28 request the first question without an answer ends the run with an input-required result, and
    # the client's retry runs the function again with the answers (server/rounds.py): code before a question runs
    # once per round. ``key`` names the question in ``inputRequests`` (default: ``input-1``, ``input-2``, ... in call
    # order); 2025 sessions ignore it.

    async def elicit(self, message: str, schema: dict[str, Any], *, timeout: float = ELICIT_TIMEOUT,
                     key: str | None = None) -> ElicitResult:  # fmt: skip
        """Ask the user to fill in a form (elicitation/create, form mode) and return their answer.

        ``schema`` is a flat JSON Schema object (strings, numbers, booleans, enums). An accepted answer is checked
        against it. Raises ``ClientRequestError`` if the client cannot elicit, refuses, answers badly or not in time.
        """
        from . import elicitation  # loaded by the first tool that asks the client something

        asker = self._asker({"elicitation": {"form": {}}}, "An elicitation")
        try:
            params, validator = elicitation.form_params(message, schema, self.request.client_capabilities)
        except ClientRequestError:
            self._undeclared({"elicitation": {"form": {}}}, "An elicitation")
            raise
        result = await self._ask(asker, asker.key(key), "elicitation/create", params, timeout)
        return elicitation.elicit_result(result, validator)

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                         timeout: float = ELICIT_TIMEOUT, key: str | None = None) -> ElicitResult:  # fmt: skip
        """Ask the user to open ``url`` (elicitation/create, URL mode). "accept" means they agreed to open it."""
        from . import elicitation

        asker = self._asker({"elicitation": {"url": {}}}, "A URL elicitation")
        named = asker.key(key)
        if versions.is_modern(self.request.revision):  # 2026-07-28 has no elicitationId: the retry says the outcome
            elicitation_id = None
        elif elicitation_id is None:  # the same on each round, or the question would never be answered
            elicitation_id = asker.memo(f"{named}/elicitationId", elicitation.new_elicitation_id)
        try:
            params = elicitation.url_params(message, url, elicitation_id, self.request.client_capabilities)
        except ClientRequestError:
            self._undeclared({"elicitation": {"url": {}}}, "A URL elicitation")
            raise
        result = await self._ask(asker, named, "elicitation/create", params, timeout)
        return elicitation.elicit_result(result, None)

    async def sample(
        self,
        messages: Any,
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: dict[str, Any] | None = None,
        include_context: str | None = None,
        metadata: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | None = None,
        timeout: float = SAMPLE_TIMEOUT,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (sampling/createMessage); returns the CreateMessageResult.

        ``messages``: a string (one user message) or a list of ``{"role", "content"}`` dicts / prompt Messages.
        """
        from . import sampling

        capability: dict[str, Any] = {"sampling": {"tools": {}} if tools else {}}
        asker = self._asker(capability, "A sampling request")
        try:
            params = sampling.sampling_params(
                messages,
                max_tokens,
                self.request.client_capabilities,
                system_prompt=system_prompt,
                temperature=temperature,
                stop_sequences=stop_sequences,
                model_preferences=model_preferences,
                include_context=include_context,
                metadata=metadata,
                tools=tools,
                tool_choice=tool_choice,
            )
        except ClientRequestError:
            self._undeclared(capability, "A sampling request")
            raise
        result = await self._ask(asker, asker.key(key), "sampling/createMessage", params, timeout)
        return sampling.sampling_result(result)

    async def list_roots(self, *, timeout: float = ROOTS_TIMEOUT, key: str | None = None) -> list[dict[str, Any]]:
        """Ask the client for its roots (roots/list): a list of ``{"uri": "file://...", "name"?: ...}``.

        Raises ``ClientRequestError`` if the client did not declare the ``roots`` capability (in a 2026-07-28 request:
        -32021) or answers badly.
        """
        asker = self._asker({"roots": {}}, "A roots request")
        if not isinstance(self.request.client_capabilities.get("roots"), dict):
            self._undeclared({"roots": {}}, "A roots request")
            raise ClientRequestError("the client does not support roots (it did not declare the capability)")
        result = await self._ask(asker, asker.key(key), "roots/list", {}, timeout)
        roots = result.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            raise ClientRequestError('the client\'s roots result has no "roots" array of {"uri": ...} objects')
        return roots

    async def continue_as_task(self) -> None:
        """Go on as a task from here, where the call can become one: in a 2026-07-28 request that declared the tasks
        extension, for a tool registered with ``ask_before_task=True``, the request is answered now with the task
        (a CreateTaskResult) and the rest of the function runs as that task; the questions asked before this point
        were answered by input-required rounds, those asked after it wait in the task's ``inputRequests``.
        Anywhere else it does nothing: the call already is a task (a 2025 task-augmented call), or it goes on in
        its request."""
        if self.task is not None:
            return
        rounds: Any = getattr(self.request, "rounds", None)
        if rounds is not None and rounds.escalate is not None:
            escalate, rounds.escalate = rounds.escalate, None
            self.task = await escalate()

    def _asker(self, capability: dict[str, Any], what: str) -> Asker:
        """Where this question goes (server/asking.py): in a 2025 request a request to the client; in a 2026-07-28
        request its rounds (server/rounds.py), in a 2026-07-28 task its inputs (server/task_inputs.py), or -32021
        where the request may not ask (see server/stateless.py). Chosen per question: ``continue_as_task`` may
        have made the call a task since the last one."""
        request = self.request
        if not versions.is_modern(request.revision):
            return ClientRequests(cast("Requester", request.peer), request.request_id, self.task)  # its session
        if self.task is not None:
            manager, task_id = self.task
            return manager.questions(task_id)
        rounds: Asker | None = getattr(request, "rounds", None)
        if rounds is None:
            from .stateless import missing

            raise missing(request, capability, what)
        return rounds

    def _undeclared(self, capability: dict[str, Any], what: str) -> None:
        """A 2026-07-28 request that did not declare what the question needs: -32021 (never ask for it)."""
        if versions.is_modern(self.request.revision):
            from .stateless import missing

            raise missing(self.request, capability, what) from None

    async def _ask(self, asker: Asker, key: str, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self._sanitise is not None:  # the user (or the model) reads it: no escape sequences, no hidden text
            params = self._sanitise(method, params)
        return await asker.ask(key, method, params, timeout)

    # --- transport hints ----------------------------------------------------------------------------------------

    def close_sse_stream(self) -> None:
        """Over HTTP, end this request's SSE connection now; the client reconnects with ``Last-Event-ID`` and gets
        the rest (SEP-1699 polling), so a long call need not hold a connection open. Elsewhere it does nothing."""
        if self.finished or (self.task is not None and versions.is_modern(self.request.revision)):
            return  # a 2026-07-28 task has no stream: its request was answered with the task
        peer = self.request.peer
        if threading.get_ident() == self._loop_thread:
            peer.close_stream(self.request_id)
        else:
            self._loop.call_soon_threadsafe(peer.close_stream, self.request_id)

    def _emit(self, message: dict[str, Any]) -> None:
        if self.task is not None and versions.is_modern(self.request.revision):
            return  # a task of the 2026-07-28 tasks extension has no channel for progress or logs (SEP-2663)
        if threading.get_ident() == self._loop_thread:
            self.request.peer.send(message, self.request.request_id)
        else:
            self._loop.call_soon_threadsafe(self._send_unless_finished, message)

    def _send_unless_finished(self, message: dict[str, Any]) -> None:
        # A worker thread may report progress just as the call ends; nothing may follow the response.
        if not self.finished and not self.request.cancelled:
            self.request.peer.send(message, self.request.request_id)
