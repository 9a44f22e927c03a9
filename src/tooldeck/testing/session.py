"""The async testing client: one in-process MCP session with a Deck, every message crossing as encoded JSON
(``transports.memory``), with the deck's progress, logs and notifications captured and its requests to the client
(elicitation, sampling) answered by the test's callbacks.

``Client(deck)`` (``testing/__init__.py``) makes one with ``async with``; the sync client drives one on a loop of its
own.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from ..protocol import versions
from ..server.elicitation import ElicitResult
from ..transports.memory import MemoryClient
from .results import (
    Completion,
    Elicitation,
    LogMessage,
    Progress,
    PromptResult,
    RequestError,
    ResourceResult,
    SamplingRequest,
    TaskInfo,
    ToolCallError,
    ToolResult,
)

if TYPE_CHECKING:
    from ..deck import Deck

ElicitAnswer = dict[str, Any] | ElicitResult | str
ElicitationHandler = Callable[[Elicitation], ElicitAnswer | Awaitable[ElicitAnswer]]
SamplingAnswer = str | dict[str, Any]
SamplingHandler = Callable[[SamplingRequest], SamplingAnswer | Awaitable[SamplingAnswer]]
ProgressHandler = Callable[[Progress], Awaitable[None] | None]

_ACTIONS = ("accept", "decline", "cancel")
_open_clients: dict[int, int] = {}  # id(deck) -> clients open on it: the last one to close stops its services
_open_lock = threading.Lock()


class _Local:
    def __repr__(self) -> str:
        return "LOCAL"


LOCAL: Any = _Local()  # the default principal: the deck's local one, as on stdio


@dataclass
class Options:
    """How a Client connects (the keyword arguments of ``Client``)."""

    elicitation: ElicitationHandler | None = None
    sampling: SamplingHandler | None = None
    principal: Any = LOCAL
    log_level: str | None = None
    protocol_version: str = versions.LATEST
    capabilities: dict[str, Any] | None = None
    timeout: float = 30.0


@dataclass
class _Capture:
    """What arrives for one call while it runs."""

    on_progress: ProgressHandler | None = None
    progress: list[Progress] = field(default_factory=list)
    logs: list[LogMessage] = field(default_factory=list)
    pending: list[asyncio.Task[Any]] = field(default_factory=list)  # async progress callbacks still running
    routes: tuple[Any, ...] = ()  # (request id, progress token)
    name: str = ""


class _Wire(MemoryClient):
    """The memory transport's client, telling the AsyncClient which request each server message belongs to."""

    def __init__(self, deck: Deck, on_message: Callable[[dict[str, Any], Any], None]) -> None:
        super().__init__(deck, observer=self._observe)
        self._on_message = on_message
        self._related: Any = None

    def _from_server(self, message: Any, related: Any = None) -> None:
        self._related = related  # the request a notification belongs to (a log line during a call, say)
        super()._from_server(message, related)

    def _observe(self, data: bytes, message: Any) -> None:
        if isinstance(message, dict):
            self._on_message(message, self._related)


class AsyncClient:
    """An initialized MCP session with a deck, for ``async`` tests: ``async with Client(deck) as client``.

    Every method is a coroutine. ``notifications`` and ``logs`` hold everything the deck sent so far;
    ``wait_for_notification(method)`` waits for one. Requests time out after ``Client(timeout=...)`` seconds
    (``TimeoutError``; the deck is sent ``notifications/cancelled``).
    """

    def __init__(self, deck: Deck, options: Options) -> None:
        self.deck = deck
        self.options = options
        self.notifications: list[dict[str, Any]] = []
        self.logs: list[LogMessage] = []
        self.initialize_result: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._captures: dict[Any, _Capture] = {}  # by request id and by progress token
        self._task_captures: dict[str, _Capture] = {}
        self._callback_errors: list[BaseException] = []
        self._wire: _Wire | None = None

    # --- the session --------------------------------------------------------------------------------------------

    @property
    def session(self) -> Any:
        """The deck's side of the session (``tooldeck.server.session.Session``): its principal, state, phase."""
        return self.wire.session

    @property
    def wire(self) -> _Wire:
        if self._wire is None:
            raise RuntimeError("the client is not connected: use it inside `with Client(deck)` / `async with`")
        return self._wire

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self.initialize_result.get("serverInfo", {}))

    @property
    def capabilities(self) -> dict[str, Any]:
        """The capabilities the deck offered in its initialize result."""
        return dict(self.initialize_result.get("capabilities", {}))

    @property
    def instructions(self) -> str | None:
        return self.initialize_result.get("instructions")

    async def start(self) -> None:
        options = self.options
        wire = self._wire = _Wire(self.deck, self._received)
        if options.principal is not LOCAL:
            wire.session.principal = options.principal
        capabilities: dict[str, Any] = {}
        if options.elicitation is not None:
            capabilities["elicitation"] = {"form": {}, "url": {}}
            wire.on_request("elicitation/create", self._elicit)
        if options.sampling is not None:
            capabilities["sampling"] = {}
            wire.on_request("sampling/createMessage", self._sample)
        capabilities.update(options.capabilities or {})
        with _open_lock:
            _open_clients[id(self.deck)] = _open_clients.get(id(self.deck), 0) + 1
        self.deck.bind_loop()  # changes made from the test's thread are announced on this loop
        params = {"protocolVersion": options.protocol_version, "capabilities": capabilities,
                  "clientInfo": {"name": "tooldeck.testing", "version": "1"}}  # fmt: skip
        self.initialize_result = await self.request("initialize", params)
        wire.notify("notifications/initialized")
        if options.log_level is not None:
            await self.set_log_level(options.log_level)

    async def aclose(self) -> None:
        """End the session (its running calls are cancelled); the last client open on a deck stops the deck's
        services (running tasks, the task store, the workers), as a transport does when it stops serving."""
        wire, self._wire = self._wire, None
        if wire is None:
            return
        await wire.aclose()
        with _open_lock:
            left = _open_clients[id(self.deck)] = _open_clients[id(self.deck)] - 1
            if not left:
                del _open_clients[id(self.deck)]
        if not left:
            await self.deck.aclose()

    # --- what the deck sends ------------------------------------------------------------------------------------

    def _received(self, message: dict[str, Any], related: Any) -> None:
        method = message.get("method")
        if method is None or "id" in message:
            return
        self.notifications.append(message)
        params = message.get("params") or {}
        if method == "notifications/progress":
            capture = self._captures.get(("token", params.get("progressToken")))
            if capture is not None:
                self._progress(capture, Progress(params["progress"], params.get("total"), params.get("message")))
        elif method == "notifications/message":
            record = LogMessage(params.get("level", ""), params.get("data"), params.get("logger"))
            self.logs.append(record)
            capture = self._captures.get(("id", related))
            if capture is not None:
                capture.logs.append(record)

    def _progress(self, capture: _Capture, progress: Progress) -> None:
        capture.progress.append(progress)
        if capture.on_progress is None:
            return
        try:
            done = capture.on_progress(progress)
            if inspect.isawaitable(done):
                capture.pending.append(asyncio.ensure_future(done))
        except Exception as exc:  # raised in the test when the call returns
            self._callback_errors.append(exc)

    async def wait_for_notification(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """The next notification with ``method`` (one not returned by an earlier wait), waiting for it to arrive."""
        limit = self.options.timeout if timeout is None else timeout
        try:
            return await self.wire.wait_for_notification(method, limit)
        except TimeoutError:
            seen = sorted({n["method"] for n in self.wire.notifications}) or "none"
            raise TimeoutError(f"no {method} within {limit:g} s (notifications not waited for: {seen})") from None

    # --- the deck's requests to the client ----------------------------------------------------------------------

    async def _elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        assert self.options.elicitation is not None
        asked = Elicitation(params.get("message", ""), params.get("mode", "form"), params.get("requestedSchema"),
                            params.get("url"), params)  # fmt: skip
        answer = await self._callback(self.options.elicitation, asked)
        if isinstance(answer, ElicitResult):
            action, content = answer.action, answer.content
        elif isinstance(answer, str):
            action, content = answer, None
        elif isinstance(answer, dict):
            action, content = "accept", answer
        else:
            self._bad_answer(TypeError(f"the elicitation callback returned {answer!r}: return the content "
                                              'dict (accept), "decline", "cancel", or an ElicitResult'))  # fmt: skip
        if action not in _ACTIONS:
            self._bad_answer(ValueError(f"the elicitation callback returned the action {action!r}: "
                                               'use "accept", "decline" or "cancel"'))  # fmt: skip
        return {"action": action} if content is None else {"action": action, "content": content}

    async def _sample(self, params: dict[str, Any]) -> dict[str, Any]:
        assert self.options.sampling is not None
        asked = SamplingRequest(params.get("messages", []), params.get("maxTokens", 0), params.get("systemPrompt"),
                                params)  # fmt: skip
        answer = await self._callback(self.options.sampling, asked)
        reply: dict[str, Any] = {"role": "assistant", "model": "tooldeck.testing"}
        if isinstance(answer, str):
            return reply | {"content": {"type": "text", "text": answer}, "stopReason": "endTurn"}
        if isinstance(answer, dict):
            return reply | answer
        self._bad_answer(TypeError(f"the sampling callback returned {answer!r}: return the reply's text or "
                                          "a CreateMessageResult dict"))  # fmt: skip

    async def _callback(self, callback: Callable[[Any], Any], argument: Any) -> Any:
        try:
            answer = callback(argument)
            if inspect.isawaitable(answer):
                answer = await answer
            return answer
        except RequestError:
            raise  # the answer is that error
        except Exception as exc:  # an assertion in the callback, say: answered as an error, raised in the test
            self._callback_errors.append(exc)
            raise RequestError(-32603, f"the test's callback failed: {type(exc).__name__}: {exc}") from None

    def _bad_answer(self, problem: Exception) -> NoReturn:
        self._callback_errors.append(problem)
        raise RequestError(-32603, str(problem))

    # --- requests -----------------------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None,
                      request_id: Any = None) -> dict[str, Any]:  # fmt: skip
        """Send any request and return its result; a JSON-RPC error raises ``RequestError`` (code, message, data)."""
        request_id = next(self._ids) if request_id is None else request_id
        limit = self.options.timeout if timeout is None else timeout
        waiting = asyncio.ensure_future(self.wire.request_raw(method, params, id=request_id))
        try:
            async with asyncio.timeout(limit):
                response = await waiting
        except TimeoutError:
            self.wire.notify("notifications/cancelled", {"requestId": request_id, "reason": "the test timed out"})
            raise TimeoutError(f"{method} got no answer within {limit:g} s (the request was cancelled; "
                               "Client(timeout=...) sets the limit)") from None  # fmt: skip
        self._raise_callback_error()
        if "error" in response:
            raise RequestError.from_wire(response["error"], method)
        return dict(response["result"])

    def _raise_callback_error(self) -> None:
        if self._callback_errors:
            error, self._callback_errors = self._callback_errors[0], []
            raise error

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification to the deck."""
        self.wire.notify(method, params)

    async def ping(self) -> None:
        await self.request("ping")

    async def set_log_level(self, level: str) -> None:
        """``logging/setLevel``: the deck sends log messages at ``level`` and above from now on."""
        await self.request("logging/setLevel", {"level": level})

    async def _all_pages(self, method: str, key: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = dict(params or {})
        while True:
            result = await self.request(method, page)
            items.extend(result[key])
            if not result.get("nextCursor"):
                return items
            page["cursor"] = result["nextCursor"]

    # --- tools --------------------------------------------------------------------------------------------------

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool, as the deck lists them (all pages)."""
        return await self._all_pages("tools/list", "tools")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressHandler | bool = True,
        task: bool = False,
        ttl: int | None = None,
        raise_on_error: bool = True,
        timeout: float | None = None,
    ) -> ToolResult:
        """Call a tool and return its ``ToolResult``; an ``isError`` result raises ``ToolCallError`` unless
        ``raise_on_error=False``, a JSON-RPC error raises ``RequestError``.

        The call carries a progressToken (unless ``progress=False``), so ``result.progress`` holds what the tool
        reported; ``progress=callback`` also calls ``callback(Progress)`` as each arrives. ``task=True`` runs it as
        a task (``ttl`` in ms) and waits for the task's result (``result.task`` is the task as created).
        """
        capture, result = await self._send_call(name, arguments, progress, task, ttl, timeout)
        try:
            info = None
            if task:
                info = TaskInfo.from_wire(result["task"])
                result = await self.request("tasks/result", {"taskId": info.task_id}, timeout=timeout)
            return await self._tool_result(capture, result, info, raise_on_error)
        finally:
            self._forget(capture)

    async def start_task(
        self, name: str, arguments: dict[str, Any] | None = None, *, ttl: int | None = None,
        progress: ProgressHandler | bool = True,
    ) -> TaskInfo:  # fmt: skip
        """Call a tool as a task and return the task as created (``working``); ``task_result`` waits for its end."""
        capture, result = await self._send_call(name, arguments, progress, True, ttl, None)
        info = TaskInfo.from_wire(result["task"])
        self._task_captures[info.task_id] = capture
        return info

    async def task_result(
        self, task_id: str, *, raise_on_error: bool = True, timeout: float | None = None
    ) -> ToolResult:
        """``tasks/result``: wait for the task to end and return its ``ToolResult`` (with the progress and logs of a
        task this client started)."""
        result = await self.request("tasks/result", {"taskId": task_id}, timeout=timeout)
        capture = self._task_captures.pop(task_id, None) or _Capture(name=task_id)
        try:
            return await self._tool_result(capture, result, None, raise_on_error)
        finally:
            self._forget(capture)

    async def get_task(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_wire(await self.request("tasks/get", {"taskId": task_id}))

    async def list_tasks(self) -> list[TaskInfo]:
        return [TaskInfo.from_wire(task) for task in await self._all_pages("tasks/list", "tasks")]

    async def cancel_task(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_wire(await self.request("tasks/cancel", {"taskId": task_id}))

    async def _send_call(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressHandler | bool, task: bool,
        ttl: int | None, timeout: float | None,
    ) -> tuple[_Capture, dict[str, Any]]:  # fmt: skip
        """Send ``tools/call`` (as a task when asked, checking the deck made one) with what arrives for it captured;
        the capture is forgotten if the call fails."""
        request_id = next(self._ids)
        capture = self._capture(name, request_id, progress)
        params: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
        token = dict(capture.routes).get("token")
        if token is not None:
            params["_meta"] = {"progressToken": token}
        if task:
            params["task"] = {} if ttl is None else {"ttl": ttl}
        try:
            result = await self.request("tools/call", params, timeout=timeout, request_id=request_id)
            if task and "task" not in result:
                raise RequestError(-32600, f"the deck ran {name!r} without a task (it sent no CreateTaskResult)")
        except BaseException:
            self._forget(capture)
            raise
        return capture, result

    def _capture(self, name: str, request_id: Any, progress: ProgressHandler | bool) -> _Capture:
        capture = _Capture(on_progress=None if isinstance(progress, bool) else progress, name=name)
        routes: list[Any] = [("id", request_id)]
        if progress is not False:
            routes.append(("token", f"tooldeck.testing-{request_id}"))
        capture.routes = tuple(routes)
        for route in routes:
            self._captures[route] = capture
        return capture

    def _forget(self, capture: _Capture) -> None:
        for route in capture.routes:
            self._captures.pop(route, None)

    async def _tool_result(
        self, capture: _Capture, result: dict[str, Any], info: TaskInfo | None, raise_on_error: bool
    ) -> ToolResult:
        if capture.pending:
            await asyncio.gather(*capture.pending, return_exceptions=False)
        self._raise_callback_error()
        structured = result.get("structuredContent")
        tool = self.deck.tools.get(capture.name)
        if tool is not None and tool.wraps_output and isinstance(structured, dict) and "result" in structured:
            structured = structured["result"]
        done = ToolResult(result, structured, list(capture.progress), list(capture.logs), info)
        if done.is_error and raise_on_error:
            raise ToolCallError(capture.name, done)
        return done

    # --- resources, prompts, completion -------------------------------------------------------------------------

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._all_pages("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._all_pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> ResourceResult:
        return ResourceResult(await self.request("resources/read", {"uri": uri}))

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._all_pages("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> PromptResult:
        """``prompts/get`` (argument values are strings on the wire; they are sent as given)."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return PromptResult(await self.request("prompts/get", params))

    async def complete(
        self, argument: str, value: str = "", *, prompt: str | None = None, resource: str | None = None,
        context: dict[str, str] | None = None,
    ) -> Completion:  # fmt: skip
        """``completion/complete`` for an argument of a prompt (``prompt=name``) or a resource template
        (``resource=uri_template``), with the arguments already given in ``context``."""
        if (prompt is None) == (resource is None):
            raise TypeError("complete() takes exactly one of prompt=<name> or resource=<uri template>")
        ref = (
            {"type": "ref/prompt", "name": prompt} if prompt is not None else {"type": "ref/resource", "uri": resource}
        )
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context is not None:
            params["context"] = {"arguments": context}
        result = await self.request("completion/complete", params)
        found = result["completion"]
        return Completion(list(found["values"]), found.get("total"), bool(found.get("hasMore")), result)
