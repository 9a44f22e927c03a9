"""The prompt registry: unique names, registration order, change events, paginated listing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import RegistrationError
from ..protocol.pagination import Catalog

if TYPE_CHECKING:  # the records' module loads with the first registration, not with every server
    from .prompt import Prompt


class PromptRegistry(Catalog["Prompt"]):
    def __init__(self) -> None:
        super().__init__("prompts", lambda prompt: prompt.wire)

    def register(self, prompt: Prompt) -> Prompt:
        if prompt.name in self:
            raise RegistrationError(
                f"a prompt named {prompt.name!r} is already registered; remove it first or choose another name"
            )
        self.add(prompt.name, prompt)
        return prompt

    def unregister(self, name: str) -> Prompt:
        if name not in self:
            raise RegistrationError(f"no prompt named {name!r} is registered")
        return self.remove(name)
