"""The blocking testing client, for plain synchronous tests: ``with Client(deck) as client``.

It runs an ``AsyncClient`` on a private event loop in a background thread and waits for each call there, so a test
needs no async runner or plugin. The deck's exceptions reach the test as they are raised; the loop is shut down on
exit (running calls cancelled), and an unhandled error the loop reported fails the ``with`` block.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .session import AsyncClient, Options, ProgressHandler

if TYPE_CHECKING:
    from ..deck import Deck
    from .results import Completion, LogMessage, PromptResult, ResourceResult, TaskInfo, ToolResult

T = TypeVar("T")


class SyncClient:
    """An initialized MCP session with a deck whose methods block: the same methods as ``AsyncClient``, without
    ``await``. Callbacks (elicitation, sampling, progress) run on the client's own thread: they must not call the
    client themselves."""

    def __init__(self, deck: Deck, options: Options) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        self._loop_errors: list[str] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="tooldeck.testing", daemon=True)
        self._client = AsyncClient(deck, options)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exception = context.get("exception")
        detail = f": {type(exception).__name__}: {exception}" if exception is not None else ""
        self._loop_errors.append(f"{context.get('message', 'unhandled error')}{detail}")
        loop.default_exception_handler(context)  # the traceback still goes to the log

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a callback called the sync testing client it runs on: it would wait for itself")
        if self._loop.is_closed():
            coroutine.close()
            raise RuntimeError("the client is closed: use it inside `with Client(deck) as client:`")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def start(self) -> None:
        self._thread.start()
        try:
            self._run(self._client.start())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the session and shut the loop down; raises if the loop reported an unhandled error meanwhile."""
        if self._loop.is_closed():
            return
        try:
            if self._thread.is_alive():
                self._run(self._client.aclose())
                self._run(self._cancel_the_rest())
                self._run(self._loop.shutdown_asyncgens())
                self._run(self._loop.shutdown_default_executor())
        finally:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
            self._loop.close()
        if self._loop_errors:
            raise RuntimeError("the deck's event loop reported: " + "; ".join(self._loop_errors))

    async def _cancel_the_rest(self) -> None:
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    # --- what the session holds ---------------------------------------------------------------------------------

    @property
    def notifications(self) -> list[dict[str, Any]]:
        """Every notification the deck sent so far."""
        return self._client.notifications

    @property
    def logs(self) -> list[LogMessage]:
        """Every log message the deck sent so far."""
        return self._client.logs

    @property
    def session(self) -> Any:
        return self._client.session

    @property
    def initialize_result(self) -> dict[str, Any]:
        return self._client.initialize_result

    @property
    def server_info(self) -> dict[str, Any]:
        return self._client.server_info

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._client.capabilities

    @property
    def instructions(self) -> str | None:
        return self._client.instructions

    # --- the methods, blocking ----------------------------------------------------------------------------------

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        return self._run(self._client.request(method, params, timeout=timeout))

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._loop.call_soon_threadsafe(self._client.notify, method, params)

    def wait_for_notification(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        return self._run(self._client.wait_for_notification(method, timeout))

    def ping(self) -> None:
        self._run(self._client.ping())

    def set_log_level(self, level: str) -> None:
        self._run(self._client.set_log_level(level))

    def list_tools(self) -> list[dict[str, Any]]:
        return self._run(self._client.list_tools())

    def call_tool(
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
        return self._run(self._client.call_tool(name, arguments, progress=progress, task=task, ttl=ttl,
                                                raise_on_error=raise_on_error, timeout=timeout))  # fmt: skip

    def start_task(
        self, name: str, arguments: dict[str, Any] | None = None, *, ttl: int | None = None,
        progress: ProgressHandler | bool = True,
    ) -> TaskInfo:  # fmt: skip
        return self._run(self._client.start_task(name, arguments, ttl=ttl, progress=progress))

    def task_result(self, task_id: str, *, raise_on_error: bool = True, timeout: float | None = None) -> ToolResult:
        return self._run(self._client.task_result(task_id, raise_on_error=raise_on_error, timeout=timeout))

    def get_task(self, task_id: str) -> TaskInfo:
        return self._run(self._client.get_task(task_id))

    def list_tasks(self) -> list[TaskInfo]:
        return self._run(self._client.list_tasks())

    def cancel_task(self, task_id: str) -> TaskInfo:
        return self._run(self._client.cancel_task(task_id))

    def list_resources(self) -> list[dict[str, Any]]:
        return self._run(self._client.list_resources())

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return self._run(self._client.list_resource_templates())

    def read_resource(self, uri: str) -> ResourceResult:
        return self._run(self._client.read_resource(uri))

    def list_prompts(self) -> list[dict[str, Any]]:
        return self._run(self._client.list_prompts())

    def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> PromptResult:
        return self._run(self._client.get_prompt(name, arguments))

    def complete(
        self, argument: str, value: str = "", *, prompt: str | None = None, resource: str | None = None,
        context: dict[str, str] | None = None,
    ) -> Completion:  # fmt: skip
        return self._run(self._client.complete(argument, value, prompt=prompt, resource=resource, context=context))
