"""The tool registry: unique names, registration order, change events, paginated listing."""

from __future__ import annotations

from ..protocol.errors import RegistrationError
from ..protocol.pagination import Catalog
from .tool import Tool


class ToolRegistry(Catalog[Tool]):
    def __init__(self) -> None:
        super().__init__("tools", lambda tool: tool.wire)

    def register(self, tool: Tool) -> Tool:
        if tool.name in self:
            raise RegistrationError(
                f"a tool named {tool.name!r} is already registered; remove it first or choose another name"
            )
        self.add(tool.name, tool)
        return tool

    def unregister(self, name: str) -> Tool:
        if name not in self:
            raise RegistrationError(f"no tool named {name!r} is registered")
        return self.remove(name)
