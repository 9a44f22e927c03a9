"""The prompt registry: unique names, registration order, change events, paginated listing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.catalog import Catalog

if TYPE_CHECKING:  # the records' module loads with the first registration, not with every server
    from .prompt import Prompt  # noqa: F401 - named in the Catalog[...] string


class PromptRegistry(Catalog["Prompt"]):
    def __init__(self) -> None:
        super().__init__("prompts", lambda prompt: prompt.wire, key=lambda prompt: prompt.name, identity="prompt named")
