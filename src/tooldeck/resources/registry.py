"""The resource and resource template registries: unique keys, registration order, change events, pagination."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model.catalog import Catalog

if TYPE_CHECKING:  # the records' module loads with the first registration, not with every server
    from .resource import Resource, ResourceTemplate  # noqa: F401 - named in the Catalog[...] strings


class ResourceRegistry(Catalog["Resource"]):
    """Resources by URI."""

    def __init__(self) -> None:
        super().__init__("resources", lambda resource: resource.wire, key=lambda resource: resource.uri,
                         identity="resource with URI", alternative="URI")  # fmt: skip


class TemplateRegistry(Catalog["ResourceTemplate"]):
    """Resource templates by template text; ``match`` finds the template a URI belongs to."""

    def __init__(self) -> None:
        super().__init__("resourceTemplates", lambda template: template.wire,
                         key=lambda template: template.uri_template.text, identity="resource template",
                         alternative="template")  # fmt: skip

    def match(self, uri: str) -> tuple[ResourceTemplate, dict[str, Any]] | None:
        """The first template (in registration order) that ``uri`` names a resource of, with its arguments."""
        for template in self:
            arguments = template.match(uri)
            if arguments is not None:
                return template, arguments
        return None
