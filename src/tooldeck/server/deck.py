"""The Deck: a server's registries and options, and the public way to add tools and run the server."""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..prompts.registry import PromptRegistry
from ..protocol.cursor import CursorCodec
from ..protocol.errors import RegistrationError
from ..resources.registry import ResourceRegistry, TemplateRegistry
from ..tools.function import tool_from_function
from ..tools.registry import ToolRegistry
from ..tools.tool import Tool, normalize_icons
from .context import LOG_RANK, Context
from .handlers import DEFERRED, HANDLERS

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from ..prompts.prompt import Prompt
    from ..resources.resource import Resource
    from .session import Session

F = TypeVar("F", bound=Callable[..., Any])
Policy = Callable[["Session", Tool, dict[str, Any]], None]


class Deck:
    """A named set of tools served over MCP.

    ``page_size``: tools per tools/list page (None: one page). ``mask_errors``: hide the text of unexpected tool
    exceptions from clients. ``max_threads``: worker threads for sync tools. ``log_level``: the lowest level sent
    as notifications/message before the client picks one with logging/setLevel.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        page_size: int | None = None,
        mask_errors: bool = True,
        max_threads: int = 40,
        log_level: str = "info",
        max_message_bytes: int = 4 * 1024 * 1024,
        cursor_secret: bytes | None = None,
        task_store: Any = None,
        task_ttl: float = 3600.0,
        max_task_ttl: float = 86400.0,
        max_tasks_per_requestor: int = 100,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise RegistrationError("a Deck needs a non-empty name")
        if page_size is not None and (isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1):
            raise RegistrationError(f"page_size must be a positive integer or None, got {page_size!r}")
        if log_level not in LOG_RANK:
            raise RegistrationError(f"log_level must be one of {', '.join(LOG_RANK)}, got {log_level!r}")
        if max_threads < 1:
            raise RegistrationError("max_threads must be at least 1")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.page_size = page_size
        self.mask_errors = mask_errors
        self.max_threads = max_threads
        self.log_level = log_level
        self.max_message_bytes = max_message_bytes
        self.cursors = CursorCodec(cursor_secret)
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        for key, value in (("title", title), ("description", description), ("websiteUrl", website_url)):
            if value is not None:
                self.server_info[key] = value
        server_icons = normalize_icons(icons, f"deck {name!r}")
        if server_icons:
            self.server_info["icons"] = list(server_icons)
        self.tools = ToolRegistry()
        self.tools.subscribe(lambda: self._changed("tools"))
        self.resources = ResourceRegistry()
        self.resources.subscribe(lambda: self._changed("resources"))
        self.templates = TemplateRegistry()
        self.templates.subscribe(lambda: self._changed("resources"))
        self.prompts = PromptRegistry()
        self.prompts.subscribe(lambda: self._changed("prompts"))
        self.handlers = dict(HANDLERS)
        self.deferred_methods = set(DEFERRED)  # handlers that run user code: they need the event loop
        self.policies: list[Policy] = []
        self.sessions: set[Session] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._pending_changes: set[str] = set()
        self._init_results: dict[tuple[str, bool], dict[str, Any]] = {}
        self.task_store = task_store  # None: chosen by the transport (memory on stdio, SQLite for `serve --http`)
        self._task_options: dict[str, Any] = {"default_ttl_ms": int(task_ttl * 1000),
                                              "max_ttl_ms": int(max_task_ttl * 1000),
                                              "max_active": max_tasks_per_requestor}  # fmt: skip
        self._tasks: Any = None

    # --- tools --------------------------------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        task: str | None = None,
        meta: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | bool | None = None,
        input_schema: dict[str, Any] | None = None,
        immediate_response: str | None = None,
    ) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, /, **options: Any) -> Any:  # type: ignore[misc]
        """Register a function as a tool: ``@deck.tool`` or ``@deck.tool(name=..., title=...)``.

        The function is returned unchanged, so it stays an ordinary, testable function.
        """
        return _decorator(self.add_tool, fn, options)

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        task: str | None = None,
        meta: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | bool | None = None,
        input_schema: dict[str, Any] | None = None,
        immediate_response: str | None = None,
    ) -> Tool:
        """Register ``fn`` as a tool and return its record; connected clients are told the list changed.

        ``input_schema`` / ``output_schema`` replace the schemas built from the signature (see the README).
        """
        tool = tool_from_function(
            fn,
            name=name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            task=task,
            meta=meta,
            output_schema=output_schema,
            input_schema=input_schema,
            immediate_response=immediate_response,
            injectable=(Context,),
        )
        return self.tools.register(tool)

    def remove_tool(self, name: str) -> None:
        """Unregister a tool; connected clients get notifications/tools/list_changed."""
        self.tools.unregister(name)

    # --- resources ----------------------------------------------------------------------------------------------

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Register a function as the resource at ``uri``: ``@deck.resource("config://app")``.

        Options: ``name``, ``title``, ``description``, ``mime_type``, ``size``, ``annotations``, ``icons``,
        ``meta``. The function returns str (text), bytes (a blob), a JSON-able value, or EmbeddedResources.
        """

        from ..resources.resource import resource_from_function

        def register(fn: F) -> F:
            self.resources.register(resource_from_function(fn, uri, injectable=(Context,), **options))
            return fn

        return register

    def add_resource(self, uri: str, value: str | bytes, **options: Any) -> Resource:
        """Register static content (text or bytes) as the resource at ``uri``."""
        from ..resources.resource import resource_from_value

        return self.resources.register(resource_from_value(uri, value, **options))

    def resource_template(self, uri_template: str, **options: Any) -> Callable[[F], F]:
        """Register a function for every URI matching an RFC 6570 template: ``@deck.resource_template(
        "users://{user_id}/profile")``; the variables are the function's parameters (converted to their types).

        ``complete={"user_id": [...] or fn}`` offers completions for a variable (completion/complete).
        """

        from ..resources.resource import template_from_function

        def register(fn: F) -> F:
            self.templates.register(template_from_function(fn, uri_template, injectable=(Context,), **options))
            return fn

        return register

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource (or a template, by its template text); clients get resources/list_changed."""
        if uri in self.resources:
            self.resources.unregister(uri)
        else:
            self.templates.unregister(uri)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients that subscribed to ``uri`` (or to a resource it is under) that it changed.

        Safe to call from any thread; sends notifications/resources/updated only to subscribers.
        """
        loop = self._loop
        if loop is not None and not loop.is_closed() and _running_loop() is not loop:
            loop.call_soon_threadsafe(self._resource_updated, uri)
        else:
            self._resource_updated(uri)

    def _resource_updated(self, uri: str) -> None:
        for session in list(self.sessions):
            if any(uri == s or uri.startswith(s.rstrip("/") + "/") for s in session.subscriptions):
                session.notify("notifications/resources/updated", {"uri": uri})

    # --- prompts ------------------------------------------------------------------------------------------------

    def prompt(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function as a prompt: ``@deck.prompt`` or ``@deck.prompt(name=..., complete={...})``.

        Its parameters are the prompt's arguments (required when they have no default); it returns a str (one
        user message), Messages, or a list of them.
        """
        return _decorator(self.add_prompt, fn, options)

    def add_prompt(self, fn: Callable[..., Any], **options: Any) -> Prompt:
        from ..prompts.prompt import prompt_from_function

        return self.prompts.register(prompt_from_function(fn, injectable=(Context,), **options))

    def remove_prompt(self, name: str) -> None:
        self.prompts.unregister(name)

    # --- what initialize answers --------------------------------------------------------------------------------

    def capabilities(self, identifies_requestor: bool = True) -> dict[str, Any]:
        """What this deck offers: tools and logging always; resources, prompts, completions and tasks when it has
        them. ``tasks.list`` only where the requestor is known (stdio, or an authenticated principal): otherwise
        listing would show every unbound task to anyone."""
        capabilities: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
        if any(t.task_support != "forbidden" for t in self.tools):
            capabilities["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
            if identifies_requestor:
                capabilities["tasks"]["list"] = {}
        if len(self.resources) or len(self.templates):
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if len(self.prompts):
            capabilities["prompts"] = {"listChanged": True}
        if any(p.completers for p in self.prompts) or any(t.completers for t in self.templates):
            capabilities["completions"] = {}
        return capabilities

    def initialize_result(self, protocol_version: str, identifies_requestor: bool = True) -> dict[str, Any]:
        key = (protocol_version, identifies_requestor)
        cached = self._init_results.get(key)  # emptied whenever a registry changes
        if cached is None:
            cached = {
                "protocolVersion": protocol_version,
                "capabilities": self.capabilities(identifies_requestor),
                "serverInfo": self.server_info,
            }
            if self.instructions is not None:
                cached["instructions"] = self.instructions
            self._init_results[key] = cached
        return cached

    def task_manager(self) -> Any:
        """The TaskManager of this deck (created on first use, with ``task_store`` or an in-memory store)."""
        if self._tasks is None:
            from .tasks import TaskManager

            self._tasks = TaskManager(self, self.task_store, **self._task_options)
        return self._tasks

    # --- running ------------------------------------------------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until the client goes away (stdio: EOF on stdin) or SIGTERM/SIGINT arrives.

        ``transport="http"`` serves Streamable HTTP at ``http://host:port/mcp`` (``host="127.0.0.1"``,
        ``port=8000``, and the options of ``http_app``).
        """
        # Transports sit above the server layer: they are imported on demand.
        if transport == "stdio":
            from ..transports.stdio import run_stdio

            run_stdio(self, **options)
        elif transport == "http":
            from ..transports.http.server import run_http

            run_http(self, **options)
        else:
            raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'http'")

    def http_app(self, **options: Any) -> Any:
        """The deck as an ASGI application (Streamable HTTP, endpoint ``/mcp``), mountable in Starlette/FastAPI.

        Options: ``path``, ``json_response``, ``stateless``, ``allowed_hosts``, ``allowed_origins``,
        ``session_idle_timeout``, ``max_sessions``, ``max_body_bytes``, ``event_store``, ``retry_ms``.
        """
        from ..transports.http.app import HttpApp

        return HttpApp(self, **options)

    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            import asyncio  # asyncio is loaded only once there is work for it

            self._loop = asyncio.get_running_loop()
        return self._loop

    def attach(self, session: Session) -> None:
        """Called by each new session: the deck tells live sessions when its lists change."""
        self.sessions.add(session)
        if self._loop is None or self._loop.is_closed():
            self._loop = _running_loop()  # None for a session driven without a loop: changes are then sent at once

    def run_sync(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """Run a sync tool in the worker pool, with the caller's context variables."""
        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(self.max_threads, thread_name_prefix="tooldeck-tool")
        return self.loop().run_in_executor(self._executor, contextvars.copy_context().run, fn)

    def _changed(self, kind: str) -> None:
        self._init_results.clear()  # capabilities may change with what is registered
        if not self.sessions:
            return
        if self._loop is None or self._loop.is_closed():
            self._pending_changes.add(kind)
            self._announce()
            return
        if kind in self._pending_changes:
            return  # one notification per burst of changes
        self._pending_changes.add(kind)
        if _running_loop() is self._loop:
            self._loop.call_soon(self._announce)
        else:
            self._loop.call_soon_threadsafe(self._announce)

    def _announce(self) -> None:
        kinds, self._pending_changes = self._pending_changes, set()
        for kind in sorted(kinds):
            for session in list(self.sessions):
                if kind in session.server_capabilities:  # only what this client negotiated
                    session.notify(f"notifications/{kind}/list_changed")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    asyncio = sys.modules.get("asyncio")  # no loop can be running if asyncio was never imported
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _decorator(add: Callable[..., Any], fn: Any, options: dict[str, Any]) -> Any:
    """``@deck.x`` and ``@deck.x(...)`` alike: register with ``add`` and hand the function back unchanged."""

    def register(func: F) -> F:
        add(func, **options)
        return func

    return register if fn is None else register(fn)
