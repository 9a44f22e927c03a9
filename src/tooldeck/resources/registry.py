"""The resource and resource template registries: unique keys, registration order, change events, pagination."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import RegistrationError
from ..protocol.pagination import Catalog

if TYPE_CHECKING:  # the records' module loads with the first registration, not with every server
    from .resource import Resource, ResourceTemplate


class ResourceRegistry(Catalog["Resource"]):
    """Resources by URI."""

    def __init__(self) -> None:
        super().__init__("resources", lambda resource: resource.wire)

    def register(self, resource: Resource) -> Resource:
        if resource.uri in self:
            raise RegistrationError(
                f"a resource with URI {resource.uri!r} is already registered; remove it first or choose another URI"
            )
        self.add(resource.uri, resource)
        return resource

    def unregister(self, uri: str) -> Resource:
        if uri not in self:
            raise RegistrationError(f"no resource with URI {uri!r} is registered")
        return self.remove(uri)


class TemplateRegistry(Catalog["ResourceTemplate"]):
    """Resource templates by template text; ``match`` finds the template a URI belongs to."""

    def __init__(self) -> None:
        super().__init__("resourceTemplates", lambda template: template.wire)

    def register(self, template: ResourceTemplate) -> ResourceTemplate:
        text = template.uri_template.text
        if text in self:
            raise RegistrationError(
                f"a resource template {text!r} is already registered; remove it first or choose another template"
            )
        self.add(text, template)
        return template

    def unregister(self, uri_template: str) -> ResourceTemplate:
        if uri_template not in self:
            raise RegistrationError(f"no resource template {uri_template!r} is registered")
        return self.remove(uri_template)

    def match(self, uri: str) -> tuple[ResourceTemplate, dict[str, Any]] | None:
        """The first template (in registration order) that ``uri`` names a resource of, with its arguments."""
        for template in self:
            arguments = template.match(uri)
            if arguments is not None:
                return template, arguments
        return None
