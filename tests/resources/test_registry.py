"""Resource and template registries: unique keys, order, change events, pagination, matching a URI."""

from __future__ import annotations

import pytest

from mcp_schema import check
from tooldeck.protocol.cursor import CursorCodec
from tooldeck.protocol.errors import RegistrationError
from tooldeck.resources.registry import ResourceRegistry, TemplateRegistry
from tooldeck.resources.resource import resource_from_value, template_from_function


def by_id(item_id: int) -> str:
    return f"item {item_id}"


def by_name(name: str) -> str:
    return f"named {name}"


def file(path: str) -> str:
    return path


def test_resources_are_listed_in_registration_order() -> None:
    registry = ResourceRegistry()
    for uri in ("config://b", "config://a", "config://c"):
        registry.register(resource_from_value(uri, "x"))
    assert [item["uri"] for item in registry.listing()] == ["config://b", "config://a", "config://c"]
    check("2025-11-25", "ListResourcesResult", {"resources": registry.listing()})
    assert registry.get("config://a") is not None and "config://a" in registry and len(registry) == 3


def test_duplicate_uris_are_refused() -> None:
    registry = ResourceRegistry()
    registry.register(resource_from_value("config://a", "x"))
    with pytest.raises(RegistrationError) as info:
        registry.register(resource_from_value("config://a", "y"))
    assert str(info.value) == (
        "a resource with URI 'config://a' is already registered; remove it first or choose another URI"
    )


def test_unregister() -> None:
    registry = ResourceRegistry()
    resource = registry.register(resource_from_value("config://a", "x"))
    changes: list[None] = []
    registry.subscribe(lambda: changes.append(None))
    assert registry.unregister("config://a") is resource
    assert len(registry) == 0 and changes == [None]
    with pytest.raises(RegistrationError, match="no resource with URI 'config://a' is registered"):
        registry.unregister("config://a")


def test_resources_paginate() -> None:
    registry = ResourceRegistry()
    for index in range(5):
        registry.register(resource_from_value(f"config://{index}", "x"))
    codec = CursorCodec(b"k" * 32)
    first, cursor = registry.page(None, 2, codec)
    second, cursor2 = registry.page(cursor, 2, codec)
    assert [r["uri"] for r in first] == ["config://0", "config://1"]  # type: ignore[index]
    assert [r["uri"] for r in second] == ["config://2", "config://3"]  # type: ignore[index]
    assert cursor2 is not None


def test_templates_are_keyed_by_their_text() -> None:
    registry = TemplateRegistry()
    template = registry.register(template_from_function(by_id, "items://{item_id}"))
    assert registry.get("items://{item_id}") is template
    check("2025-11-25", "ListResourceTemplatesResult", {"resourceTemplates": registry.listing()})
    with pytest.raises(RegistrationError) as info:
        registry.register(template_from_function(by_id, "items://{item_id}", name="other"))
    assert str(info.value) == (
        "a resource template 'items://{item_id}' is already registered; remove it first or choose another template"
    )
    assert registry.unregister("items://{item_id}") is template
    with pytest.raises(RegistrationError, match="no resource template 'items://{item_id}' is registered"):
        registry.unregister("items://{item_id}")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("items://42", ("items://{item_id}", {"item_id": 42})),
        ("items://pencil", ("items://{name}", {"name": "pencil"})),  # not an int: the next template gets it
        ("file:///a/b.txt", ("file:///{+path}", {"path": "a/b.txt"})),
        ("other://x", None),
    ],
)
def test_match_finds_the_first_template_that_takes_the_uri(
    uri: str, expected: tuple[str, dict[str, object]] | None
) -> None:
    registry = TemplateRegistry()
    registry.register(template_from_function(by_id, "items://{item_id}"))
    registry.register(template_from_function(by_name, "items://{name}"))
    registry.register(template_from_function(file, "file:///{+path}"))
    found = registry.match(uri)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        template, arguments = found
        assert (template.uri_template.text, arguments) == expected
