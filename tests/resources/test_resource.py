"""Resources and resource templates built from functions and values: wire forms, checks, argument matching."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pytest

from mcp_schema import check
from tooldeck.model.arguments import ArgumentError
from tooldeck.model.completion import Completer, complete
from tooldeck.model.content import Annotations
from tooldeck.protocol.errors import RegistrationError
from tooldeck.resources.resource import (
    Resource,
    ResourceTemplate,
    check_uri,
    resource_from_function,
    resource_from_value,
    template_from_function,
)
from tooldeck.resources.template import UriTemplate

VERSION = "2025-11-25"
ICON = {"src": "https://example.com/icon.png", "mime_type": "image/png", "sizes": ["48x48"]}


class Context:
    """Stands for the server's injected context class."""


def readme() -> str:
    """The project README."""
    return "# hello"


async def status(ctx: Context, verbose: bool = False) -> str:
    return "ok"


# -- resources ------------------------------------------------------------------------------------------------------


def test_resource_from_function_defaults() -> None:
    resource = resource_from_function(readme, "file:///README.md")
    assert resource.wire == {"uri": "file:///README.md", "name": "readme", "description": "The project README."}
    assert resource.fn is readme and resource.is_async is False and resource.value is None
    check(VERSION, "Resource", resource.wire)


def test_resource_wire_form_carries_every_field() -> None:
    resource = resource_from_function(
        readme,
        "file:///README.md",
        name="readme.md",
        title="README",
        description="Read me first.",
        mime_type="text/markdown",
        size=7,
        annotations={"audience": ["user"], "priority": 0.5, "last_modified": datetime(2025, 1, 2, tzinfo=UTC)},
        icons=[ICON],
        meta={"com.example/owner": "docs"},
    )
    assert resource.wire == {
        "uri": "file:///README.md",
        "name": "readme.md",
        "title": "README",
        "description": "Read me first.",
        "mimeType": "text/markdown",
        "size": 7,
        "annotations": {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-02T00:00:00+00:00"},
        "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}],
        "_meta": {"com.example/owner": "docs"},
    }
    check(VERSION, "Resource", resource.wire)


def test_annotations_accept_the_helper_and_drop_when_empty() -> None:
    with_helper = resource_from_function(readme, "file:///a", annotations=Annotations(priority=1))
    assert with_helper.annotations == {"priority": 1} and with_helper.wire["annotations"] == {"priority": 1}
    empty = resource_from_function(readme, "file:///a", annotations={})
    assert empty.annotations is None and "annotations" not in empty.wire


def test_injected_and_optional_parameters_are_allowed() -> None:
    resource = resource_from_function(status, "app://status", injectable=(Context,))
    assert resource.injected == {"ctx": Context}
    assert resource.is_async is True
    assert resource.wire == {"uri": "app://status", "name": "status"}


def test_required_parameters_are_refused_with_the_fix() -> None:
    def user(user_id: int, verbose: bool = False) -> str:
        return ""

    with pytest.raises(RegistrationError) as info:
        resource_from_function(user, "users://me")
    assert str(info.value) == (
        "resource 'users://me': parameter(s) 'user_id' have no default, but a resource is read without arguments; "
        "give them defaults, or register a resource template with a variable for each (e.g. 'users://me/{user_id}')"
    )


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("README.md", "resource URI 'README.md' is not absolute: it must start with a scheme, as in 'file:///'"),
        ("/etc/hosts", "is not absolute"),
        ("3d://model", "is not absolute"),
        ("file:///read me.md", "is not a valid URI (RFC 3986): ' ' at column 13 must be percent-encoded"),
        ("file:///café", "is not a valid URI (RFC 3986): 'é' at column 12 must be percent-encoded"),
        ("file:///50%", "'%' at column 11 must start a percent-encoded byte such as %20"),
        ("users://{id}", "resource URI 'users://{id}' looks like a URI template; register a resource template"),
        (42, "a resource URI must be a string, got int"),
    ],
)
def test_uris_must_be_absolute_rfc_3986(uri: Any, message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        check_uri(uri)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "uri",
    ["file:///README.md", "https://example.com/a?b=c#d", "git://repo/x", "custom+v1.x-y:opaque", "x:%20%E2%82%AC"],
)
def test_valid_uris(uri: str) -> None:
    assert check_uri(uri) == uri


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mime_type": "markdown"}, "mime_type must be a MIME type such as 'text/markdown', got 'markdown'"),
        ({"size": -1}, "size must be a byte count (an int >= 0), got -1"),
        ({"size": True}, "size must be a byte count (an int >= 0), got True"),
        ({"annotations": {"priority": 2}}, "annotations.priority: 2 is outside 0..1"),
        ({"annotations": {"audience": "robot"}}, "annotations.audience: 'robot' is not 'user' or 'assistant'"),
        ({"icons": [{"src": "ftp://x/icon.png"}]}, "icons[0].src must be an https:, http: or data: URI"),
        ({"meta": ["x"]}, "meta must be a dict with string keys"),
        ({"title": 3}, "title must be a string, got int"),
        ({"name": ""}, "name must be a non-empty string, got ''"),
    ],
)
def test_bad_options_are_refused_naming_the_resource(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        resource_from_function(readme, "file:///README.md", **options)
    assert str(info.value).startswith("resource 'file:///README.md': ")
    assert message in str(info.value)


def test_lambdas_need_a_name() -> None:
    with pytest.raises(RegistrationError, match="the function has no usable name; pass name="):
        resource_from_function(lambda: "x", "file:///x")
    assert resource_from_function(lambda: "x", "file:///x", name="x").name == "x"


def test_non_callables_are_refused() -> None:
    with pytest.raises(RegistrationError, match="a resource function must be callable, got str"):
        resource_from_function("text", "file:///x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("héllo", {"uri": "config://app", "name": "config://app", "mimeType": "text/plain", "size": 6}),
        (
            b"\x00\x01",
            {"uri": "config://app", "name": "config://app", "mimeType": "application/octet-stream", "size": 2},
        ),
        (
            bytearray(b"abc"),
            {"uri": "config://app", "name": "config://app", "mimeType": "application/octet-stream", "size": 3},
        ),
    ],
)
def test_resource_from_value(value: Any, wire: dict[str, Any]) -> None:
    resource = resource_from_value("config://app", value)
    assert resource.wire == wire
    assert resource.fn is None and resource.value == value and type(resource.value) in (str, bytes)
    check(VERSION, "Resource", resource.wire)


def test_resource_from_value_options_override_the_defaults() -> None:
    resource = resource_from_value("config://app", "{}", name="app", mime_type="application/json", size=99)
    assert resource.wire == {"uri": "config://app", "name": "app", "mimeType": "application/json", "size": 99}


def test_resource_from_value_refuses_other_values() -> None:
    with pytest.raises(
        RegistrationError, match="resource 'config://app': static content must be str or bytes, got dict"
    ):
        resource_from_value("config://app", {"a": 1})  # type: ignore[arg-type]


def test_resources_compare_by_value() -> None:
    assert resource_from_value("a://b", "x") == resource_from_value("a://b", "x")
    assert resource_from_value("a://b", "x") != resource_from_value("a://b", "y")
    assert isinstance(resource_from_value("a://b", "x"), Resource)


# -- templates ------------------------------------------------------------------------------------------------------


class Format(enum.Enum):
    JSON = "json"
    TEXT = "text"


def user_profile(user_id: int, fmt: Format = Format.JSON, lang: str = "en") -> str:
    """A user's profile.

    Args:
        user_id: The user's numeric id.
    """
    return f"{user_id}"


def test_template_wire_form_defaults() -> None:
    template = template_from_function(user_profile, "users://{user_id}/profile{?fmt,lang}")
    assert template.wire == {
        "uriTemplate": "users://{user_id}/profile{?fmt,lang}",
        "name": "user_profile",
        "description": "A user's profile.",
    }
    assert template.uri_template == UriTemplate("users://{user_id}/profile{?fmt,lang}")
    assert template.required == ("user_id",) and template.is_async is False
    check(VERSION, "ResourceTemplate", template.wire)


def test_template_wire_form_carries_every_field() -> None:
    template = template_from_function(
        user_profile,
        UriTemplate("users://{user_id}"),
        name="profile",
        title="User profile",
        description="Profiles.",
        mime_type="application/json",
        annotations={"audience": "assistant"},
        icons=[ICON],
        meta={"k": 1},
    )
    assert template.wire == {
        "uriTemplate": "users://{user_id}",
        "name": "profile",
        "title": "User profile",
        "description": "Profiles.",
        "mimeType": "application/json",
        "annotations": {"audience": ["assistant"]},
        "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}],
        "_meta": {"k": 1},
    }
    check(VERSION, "ResourceTemplate", template.wire)


@pytest.mark.parametrize(
    ("uri", "arguments"),
    [
        ("users://42/profile", {"user_id": 42}),
        ("users://42/profile?fmt=text", {"user_id": 42, "fmt": Format.TEXT}),
        ("users://42/profile?lang=fr&fmt=json&utm=1", {"user_id": 42, "fmt": Format.JSON, "lang": "fr"}),
        ("users://-3/profile", {"user_id": -3}),
        ("users://abc/profile", None),  # not an int: names no resource
        ("users://42/profile?fmt=xml", None),  # not a Format
        ("users:///profile", None),  # the required id is missing
        ("users://42/settings", None),
    ],
)
def test_template_match_converts_the_values(uri: str, arguments: dict[str, Any] | None) -> None:
    template = template_from_function(user_profile, "users://{user_id}/profile{?fmt,lang}")
    assert template.match(uri) == arguments


def test_arguments_say_what_is_wrong() -> None:
    template = template_from_function(user_profile, "users://{user_id}/profile{?fmt,lang}")
    with pytest.raises(ArgumentError, match='\\$.user_id: expected integer, got "abc"'):
        template.arguments({"user_id": "abc"})
    with pytest.raises(ArgumentError, match="\\$.user_id: missing required value"):
        template.arguments({"fmt": "json"})


def test_injected_parameters_are_not_variables() -> None:
    async def search(query: str, ctx: Context, limit: int = 10) -> str:
        return ""

    template = template_from_function(search, "search://{query}{?limit}", injectable=(Context,))
    assert template.injected == {"ctx": Context} and template.is_async is True
    assert template.match("search://cats?limit=5") == {"query": "cats", "limit": 5}
    assert list(template.converters) == ["limit"]


@pytest.mark.parametrize(
    ("uri_template", "message"),
    [
        (
            "users://{user_id}/{tab}",
            "resource template 'users://{user_id}/{tab}': variable(s) 'tab' are not parameters of user_profile "
            "(its parameters: 'user_id', 'fmt', 'lang')",
        ),
        (
            "users://me{?fmt}",
            "resource template 'users://me{?fmt}': parameter(s) 'user_id' of user_profile have no default and are "
            "not template variables; add them to the template (e.g. as {?name}) or give them defaults",
        ),
        ("users://me", "resource template 'users://me': the template has no variables; register it as a resource"),
        ("/users/{user_id}", "the template must start with a URI scheme, such as 'file:///{path}'"),
        ("users://{user_id", "invalid URI template 'users://{user_id': the expression opened at column 9"),
        ("users://{user_id*}", "the explode modifier '*' at column 17 is RFC 6570 level 4"),
    ],
)
def test_template_variables_and_parameters_must_agree(uri_template: str, message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        template_from_function(user_profile, uri_template)
    assert message in str(info.value)


class Opaque:
    """A plain class: no JSON form, so it cannot be a parameter type."""


def test_template_functions_must_have_usable_types() -> None:
    def bad(x: Opaque) -> str:
        return ""

    with pytest.raises(
        RegistrationError,
        match="resource template 's://{x}': cannot build a JSON Schema for parameter 'x' \\(type Opaque\\)",
    ):
        template_from_function(bad, "s://{x}")


async def test_template_completers_default_to_enum_values_and_can_be_given() -> None:
    def log(level: Literal["debug", "info"], service: str, day: Annotated[bool, "today?"] = True) -> str:
        return ""

    template = template_from_function(
        log, "logs://{service}/{level}{?day}", complete={"service": ["api", "web", "worker"]}
    )
    assert sorted(template.completers) == ["day", "level", "service"]
    label = "resource template 'logs://{service}/{level}{?day}', argument 'level'"
    assert template.completers["level"] == Completer(choices=("debug", "info"), label=label)
    assert await complete(template.completers["service"], "w", {}) == {
        "values": ["web", "worker"],
        "total": 2,
        "hasMore": False,
    }
    overridden = template_from_function(log, "logs://{service}/{level}", complete={"level": ["warn"]})
    assert overridden.completers["level"].choices == ("warn",)


def test_template_completers_for_unknown_variables_are_refused() -> None:
    with pytest.raises(RegistrationError, match="complete names unknown argument 'lang' \\(arguments: user_id\\)"):
        template_from_function(user_profile, "users://{user_id}", complete={"lang": ["en"]})


def test_templates_are_records() -> None:
    one = template_from_function(user_profile, "users://{user_id}")
    assert isinstance(one, ResourceTemplate)
    assert "uri_template=UriTemplate('users://{user_id}')" in repr(one)
