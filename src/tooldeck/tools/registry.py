"""The tool registry: unique names, registration order, change events, paginated listing."""

from __future__ import annotations

from ..model.catalog import Catalog
from .tool import Tool


class ToolRegistry(Catalog[Tool]):
    def __init__(self) -> None:
        super().__init__("tools", lambda tool: tool.wire, key=lambda tool: tool.name, identity="tool named")
