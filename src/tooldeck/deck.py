"""The Deck: the public face of a tooldeck server — decorators to register tools, resources and prompts, and the
ways to serve them (``run`` over stdio or HTTP, ``http_app`` as an ASGI app).

A ``Deck`` is a ``server.core.Server`` (registries, options, method table, pipeline) with the facade on top; it sits
above the transports, which serve any ``Server``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload

from .server.context import Context
from .server.core import Server
from .server.options import ServerSettings, split_settings
from .tools.function import tool_from_function
from .tools.options import ToolOptions

if TYPE_CHECKING:
    import os

    from .manifest.manager import Applied, ToolManager
    from .prompts.prompt import Prompt
    from .resources.resource import Resource
    from .tools.tool import Tool

F = TypeVar("F", bound=Callable[..., Any])


class Deck(Server):
    """A named set of tools served over MCP: ``Deck("weather", version="1.0.0", instructions=..., page_size=...)``.

    ``title``, ``description``, ``instructions``, ``website_url`` and ``icons`` say what the server is; the other
    options (``page_size``, ``mask_errors``, ``max_threads``, ``log_level``, ``tool_timeout``, ...) are listed and
    explained once, in ``server/options.py`` (``ServerSettings``, ``ServerOptions``).
    """

    def __init__(self, name: str, version: str = "0.1.0", **options: Unpack[ServerSettings]) -> None:
        info, checked = split_settings(dict(options))
        super().__init__(name, version, info, checked)
        self._manager: ToolManager | None = None
        self._policy_listeners: list[Callable[[], None]] = []  # told when reload_policy swapped the policy

    # --- tools --------------------------------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(self, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, /, **options: Any) -> Any:  # type: ignore[misc]
        """Register a function as a tool: ``@deck.tool`` or ``@deck.tool(name=..., title=...)`` (the options of
        ``tools/options.py``). The function is returned unchanged, so it stays an ordinary, testable function."""
        return _decorator(self.add_tool, fn, options)

    def add_tool(self, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool:
        """Register ``fn`` as a tool and return its record; connected clients are told the list changed.

        ``input_schema`` / ``output_schema`` replace the schemas built from the signature (see the README).
        """
        return self.tools.register(tool_from_function(fn, injectable=(Context,), **options))

    def remove_tool(self, name: str) -> None:
        """Unregister a tool; connected clients get notifications/tools/list_changed."""
        self.tools.unregister(name)

    # --- tool definitions (seed 002) -----------------------------------------------------------------------------

    def use_console(self, *, path: str = "/console", operator_scope: str = "operator") -> Any:
        """Serve the operator console at ``path`` of the deck's HTTP app (``tooldeck serve --http --console``): for
        principals holding ``operator_scope``, or, when nobody authenticates, for loopback clients only. Returns the
        ``Console`` (console/app.py), made once."""
        if self.console is None:
            from .console import Console

            self.console = Console(self, path=path, operator_scope=operator_scope)
        return self.console

    @property
    def manager(self) -> ToolManager:
        """The tool manager: ``register`` / ``upgrade`` (register a higher version) / ``unregister`` / ``rollback``
        tool definitions while the deck serves (see manifest/manager.py for its rules)."""
        if self._manager is None:
            from .manifest.manager import ToolManager  # tool definitions cost nothing until one is used

            self._manager = ToolManager(self.tools, injectable=(Context,))
        return self._manager

    async def open_backends(self) -> None:
        """Make the backends ready (``Server.open_backends``); when they keep the tool definitions (a shared store),
        serve what the fleet serves, offer it what this deck loaded, and follow its changes (manifest/fleet.py)."""
        await super().open_backends()
        store = self.backends.definitions
        if store is not None and (self._manager is None or self._manager.fleet is None):
            manager = self.manager
            await manager.share(store, self.bus)
            if manager.fleet is not None:
                self.services.append(manager.fleet.follow)

    def implements(self, name: str) -> Callable[[F], F]:
        """Bind a function to a capability of a tool definition: ``@deck.implements("calculator.add")`` (or to every
        capability of a tool: ``@deck.implements("calculator")``, called with ``capability=<name>``). Bind before
        ``load_manifest``; the function is returned unchanged."""
        return self.manager.implements(name)

    def load_manifest(self, path: str | os.PathLike[str]) -> list[Applied]:
        """Serve the tool definitions in a JSON or YAML file (or every such file in a directory), through the
        manager: registered, or upgraded under its version rules. DefinitionError lists every problem."""
        return self.manager.load(path)

    # --- security -----------------------------------------------------------------------------------------------

    def apply_policy(self, policy: Any) -> None:
        """Serve under a policy: a TOML file's path, or a ``tooldeck.security.policy.Policy``. It sets who may
        authenticate over HTTP, what security levels need, rate limits, the sanitiser and the audit trail (see the
        README's security section); PolicyError names the file, line and problem."""
        from .security.apply import apply_policy
        from .security.policy import Policy, load_policy

        apply_policy(self, policy if isinstance(policy, Policy) else load_policy(policy))

    def reload_policy(self) -> str:
        """Read the policy file the deck serves under again and serve under it from now on (SIGHUP does this for
        ``tooldeck serve``): tokens, roles, scopes, limits, levels, the audit trail. Sessions stay open; a request's
        credentials are checked against the new policy from its next request on. A policy that cannot be read or
        used raises PolicyError (``file:line: what``) and the one before keeps serving. Returns the file's path."""
        from .security.apply import apply_policy
        from .security.policy import PolicyError, load_policy

        source = getattr(self.policy, "source", None)
        if not source:
            raise PolicyError("the deck serves under no policy file: nothing to reload")
        before = self.policy
        new = load_policy(source)  # a file that cannot be read or used: nothing changes
        try:
            apply_policy(self, new)
        except Exception:
            apply_policy(self, before)  # what it had installed is put back, the old policy serves on
            raise
        if self._loop is not None and not self._loop.is_closed():
            self.start_services(self._loop)  # the new audit trail's closer; the old one's closed the old trail
        for listener in self._policy_listeners:
            listener()
        return str(source)

    def on_policy_reload(self, listener: Callable[[], None]) -> None:
        """Have ``listener()`` called after ``reload_policy`` swapped the policy (an HTTP app rebuilds its layers)."""
        self._policy_listeners.append(listener)

    # --- resources ----------------------------------------------------------------------------------------------

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Register a function as the resource at ``uri``: ``@deck.resource("config://app")``.

        Options: ``name``, ``title``, ``description``, ``mime_type``, ``size``, ``annotations``, ``icons``,
        ``meta``. The function returns str (text), bytes (a blob), a JSON-able value, or EmbeddedResources.
        """

        from .resources.resource import resource_from_function

        def register(fn: F) -> F:
            self.resources.register(resource_from_function(fn, uri, injectable=(Context,), **options))
            return fn

        return register

    def add_resource(self, uri: str, value: str | bytes, **options: Any) -> Resource:
        """Register static content (text or bytes) as the resource at ``uri``."""
        from .resources.resource import resource_from_value

        return self.resources.register(resource_from_value(uri, value, **options))

    def resource_template(self, uri_template: str, **options: Any) -> Callable[[F], F]:
        """Register a function for every URI matching an RFC 6570 template: ``@deck.resource_template(
        "users://{user_id}/profile")``; the variables are the function's parameters (converted to their types).

        ``complete={"user_id": [...] or fn}`` offers completions for a variable (completion/complete).
        """

        from .resources.resource import template_from_function

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

    # --- prompts ------------------------------------------------------------------------------------------------

    def prompt(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function as a prompt: ``@deck.prompt`` or ``@deck.prompt(name=..., complete={...})``.

        Its parameters are the prompt's arguments (required when they have no default); it returns a str (one
        user message), Messages, or a list of them.
        """
        return _decorator(self.add_prompt, fn, options)

    def add_prompt(self, fn: Callable[..., Any], **options: Any) -> Prompt:
        from .prompts.prompt import prompt_from_function

        return self.prompts.register(prompt_from_function(fn, injectable=(Context,), **options))

    def remove_prompt(self, name: str) -> None:
        self.prompts.unregister(name)

    # --- running ------------------------------------------------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until the client goes away (stdio: EOF on stdin) or SIGTERM/SIGINT arrives.

        ``transport="http"`` serves Streamable HTTP at ``http://host:port/mcp`` (``host="127.0.0.1"``,
        ``port=8000``, and the options of ``http_app``).
        """
        # Transports sit above the server layer: they are imported on demand.
        if transport == "stdio":
            from .transports.stdio import run_stdio

            run_stdio(self, **options)
        elif transport == "http":
            from .transports.http.server import run_http

            run_http(self, **options)
        else:
            raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'http'")

    def http_app(self, **options: Any) -> Any:
        """The deck as an ASGI application (Streamable HTTP, endpoint ``/mcp``), mountable in Starlette/FastAPI.

        Options: ``path``, ``json_response``, ``stateless``, ``allowed_hosts``, ``allowed_origins``,
        ``session_idle_timeout``, ``max_sessions``, ``max_body_bytes``, ``retry_ms``, ``max_backlog``; where its
        sessions and events are kept is the deck's ``backends``.
        """
        from .transports.http.app import HttpApp

        return HttpApp(self, **options)


def _decorator(add: Callable[..., Any], fn: Any, options: dict[str, Any]) -> Any:
    """``@deck.x`` and ``@deck.x(...)`` alike: register with ``add`` and hand the function back unchanged."""

    def register(func: F) -> F:
        add(func, **options)
        return func

    return register if fn is None else register(fn)
