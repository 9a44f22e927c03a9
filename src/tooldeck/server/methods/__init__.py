"""The method table: which handler answers each MCP request, and whether it answers at once or later.

A handler takes the ``RequestContext`` and returns the result dict (``NOW`` methods: answered without an event loop,
so the stdio handshake can serve them before asyncio is even imported) or a ``Work`` for the runner (``LATER``
methods: they run user code or wait on a store). Handlers live in one module per feature and are imported on first
use, so the features a deck never serves cost nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NOW = "now"
LATER = "later"

Handler = Callable[[Any], Any]

# method -> (module of this package, function, when it answers)
TABLE: dict[str, tuple[str, str, str]] = {
    "initialize": ("lifecycle", "initialize", NOW),
    "ping": ("lifecycle", "ping", NOW),
    "logging/setLevel": ("logging", "set_level", NOW),
    "tools/list": ("tools", "list_tools", NOW),
    "tools/call": ("tools", "call_tool", LATER),
    "resources/list": ("resources", "list_resources", NOW),
    "resources/templates/list": ("resources", "list_templates", NOW),
    "resources/read": ("resources", "read_resource", LATER),
    "resources/subscribe": ("resources", "subscribe", LATER),  # admitted by the pipeline, which may await
    "resources/unsubscribe": ("resources", "unsubscribe", NOW),
    "prompts/list": ("prompts", "list_prompts", NOW),
    "prompts/get": ("prompts", "get_prompt", LATER),
    "completion/complete": ("completion", "complete", LATER),
    "tasks/get": ("tasks", "get", LATER),
    "tasks/result": ("tasks", "result", LATER),
    "tasks/list": ("tasks", "list_tasks", LATER),
    "tasks/cancel": ("tasks", "cancel", LATER),
}


class Method:
    """One row of the table: the handler (imported when first used, by ``resolve``) and when it answers."""

    __slots__ = ("_where", "handler", "later", "name")

    def __init__(self, name: str, handler: Handler | tuple[str, str], when: str = NOW) -> None:
        self.name = name
        self.later = when == LATER
        self.handler: Handler | None = handler if callable(handler) else None
        self._where = None if callable(handler) else handler

    def resolve(self) -> Handler:
        """The handler, imported now if it was not yet."""
        if self.handler is None:
            import importlib

            module, name = self._where  # type: ignore[misc]
            self.handler = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        return self.handler


def method_table() -> dict[str, Method]:
    """A fresh table for one server (a server may add or replace methods of its own)."""
    return {name: Method(name, (module, function), when) for name, (module, function, when) in TABLE.items()}
