"""Context: what a running tool can do with its request: report progress, log to the client, see cancellation.

Declare a parameter annotated ``Context`` and tooldeck passes it in; it never appears in the inputSchema. Its
methods work from async tools (``await ctx.report_progress(1, 3)``) and from sync tools running in a worker thread
(``ctx.report_progress(1, 3)``, no await): the message is handed to the event loop's thread either way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ..protocol import jsonrpc

RELATED_TASK = "io.modelcontextprotocol/related-task"

ELICIT_TIMEOUT = 600.0  # a person is answering
SAMPLE_TIMEOUT = 300.0  # a model is answering (and maybe a person approving)

if TYPE_CHECKING:
    from .requests import ElicitResult
    from .session import Session

log = logging.getLogger("tooldeck.context")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}


class _Done:
    """An awaitable that is already complete: lets sync tools call the methods without ``await``."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


DONE = _Done()


class Context:
    """Passed to a tool that asks for it; valid while the call runs (calls after it ends are ignored)."""

    __slots__ = (
        "_last_progress",
        "_loop",
        "_loop_thread",
        "_session",
        "cancelled",
        "finished",
        "progress_token",
        "request_id",
        "task",
        "tool_name",
    )

    def __init__(
        self,
        session: Session,
        request_id: jsonrpc.RequestId,
        tool_name: str,
        progress_token: str | int | None,
    ) -> None:
        self._session = session
        self.request_id = request_id
        self.tool_name = tool_name
        self.progress_token = progress_token
        self._loop = session.loop()  # where messages go from a sync tool's worker thread
        self._loop_thread = threading.get_ident()
        self._last_progress: float | None = None
        self.cancelled = False
        self.finished = False
        self.task: tuple[Any, str] | None = None  # (TaskManager, task id) when the call runs as a task

    # --- what the tool can read ---------------------------------------------------------------------------------

    @property
    def is_cancelled(self) -> bool:
        """True once the client cancelled the request; sync tools should poll it in long loops."""
        return self.cancelled

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self._session.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._session.client_capabilities

    @property
    def protocol_version(self) -> str | None:
        return self._session.protocol_version

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
        self._emit(jsonrpc.notification("notifications/progress", params))
        return DONE

    def log(self, level: str, message: Any, *, logger: str | None = None) -> _Done:
        """Send notifications/message at ``level`` (debug ... emergency) if the client's log level lets it through.

        ``message`` may be a string or any JSON value (the spec's ``data``).
        """
        if level not in LOG_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self.finished or LOG_RANK[level] < self._session.log_rank:
            return DONE
        params: dict[str, Any] = {"level": level, "data": message}
        if logger is not None:
            params["logger"] = logger
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

    async def elicit(self, message: str, schema: dict[str, Any], *, timeout: float = ELICIT_TIMEOUT
                     ) -> ElicitResult:  # fmt: skip
        """Ask the user to fill in a form (elicitation/create, form mode) and return their answer.

        ``schema`` is a flat JSON Schema object (strings, numbers, booleans, enums). An accepted answer is checked
        against it. Raises ``ClientRequestError`` if the client cannot elicit, refuses, answers badly or not in time.
        """
        from . import requests  # loaded by the first tool that asks the client something

        params, validator = requests.form_params(message, schema, self._session.client_capabilities)
        result = await self._ask("elicitation/create", params, timeout)
        return requests.elicit_result(result, validator)

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                         timeout: float = ELICIT_TIMEOUT) -> ElicitResult:  # fmt: skip
        """Ask the user to open ``url`` (elicitation/create, URL mode). "accept" means they agreed to open it."""
        from . import requests

        params = requests.url_params(message, url, elicitation_id, self._session.client_capabilities)
        result = await self._ask("elicitation/create", params, timeout)
        return requests.elicit_result(result, None)

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
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (sampling/createMessage); returns the CreateMessageResult.

        ``messages``: a string (one user message) or a list of ``{"role", "content"}`` dicts / prompt Messages.
        """
        from . import requests

        params = requests.sampling_params(
            messages,
            max_tokens,
            self._session.client_capabilities,
            system_prompt=system_prompt,
            temperature=temperature,
            stop_sequences=stop_sequences,
            model_preferences=model_preferences,
            include_context=include_context,
            metadata=metadata,
            tools=tools,
            tool_choice=tool_choice,
        )
        result = await self._ask("sampling/createMessage", params, timeout)
        return requests.sampling_result(result)

    async def _ask(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        from . import requests

        if self.task is None:
            return await requests.ask(self._session, method, params, self.request_id, timeout)
        # In a task: the request names the task, and the task waits in "input_required" until it is answered.
        manager, task_id = self.task
        params["_meta"] = {RELATED_TASK: {"taskId": task_id}}
        await manager.settle(task_id, "input_required")
        try:
            return await requests.ask(self._session, method, params, self.request_id, timeout)
        finally:
            await manager.settle(task_id, "working")

    # --- transport hints ----------------------------------------------------------------------------------------

    def close_sse_stream(self) -> None:
        """Over HTTP, end this request's SSE connection now; the client reconnects with ``Last-Event-ID`` and gets
        the rest (SEP-1699 polling), so a long call need not hold a connection open. Elsewhere it does nothing."""
        hook = self._session.close_stream
        if hook is None or self.finished:
            return
        if threading.get_ident() == self._loop_thread:
            hook(self.request_id)
        else:
            self._loop.call_soon_threadsafe(hook, self.request_id)

    def _emit(self, message: dict[str, Any]) -> None:
        if threading.get_ident() == self._loop_thread:
            self._session.send(message, self.request_id)
        else:
            self._loop.call_soon_threadsafe(self._send_unless_finished, message)

    def _send_unless_finished(self, message: dict[str, Any]) -> None:
        # A worker thread may report progress just as the call ends; nothing may follow the response.
        if not self.finished:
            self._session.send(message, self.request_id)
