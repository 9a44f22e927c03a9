"""Resources and resource templates: records built once at registration, with their wire forms precomputed.

A ``Resource`` has a fixed URI and is read by calling its function (no arguments) or from a static value. A
``ResourceTemplate`` has an RFC 6570 URI template whose variables are its function's parameters; a URI that matches
gives the arguments, converted from text to the parameters' types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ..model.arguments import ArgumentError, StringConverter, choices, string_converters
from ..model.completion import Completer, make_completers
from ..model.content import AnnotationsLike, ContentError, annotations_from
from ..model.metadata import check_scopes, check_security_level, is_async, normalize_icons
from ..protocol.errors import RegistrationError, SchemaError
from ..protocol.record import Record
from ..schema.generate import FunctionShape, inspect_function
from .template import UriTemplate

# RFC 3986: a scheme and ":", then only unreserved and reserved characters and percent-encoded bytes.
# Patterns are compiled on first use (re caches them), not at import: start-up pays for none of them.
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*:"
_PERCENT = r"%[0-9A-Fa-f]{2}"
_URI_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~" + ":/?#[]@" + "!$&'()*+,;=" + "%"
)
_MIME_TYPE = r"[A-Za-z0-9][\w!#$&^.+\-]*/[A-Za-z0-9][\w!#$&^.+\-]*(?:\s*;.*)?"


class Resource(Record):
    """A resource with a fixed URI. Reading it calls ``fn`` (when not None) or returns ``value``."""

    __slots__ = (
        "uri", "name", "title", "description", "mime_type", "size", "annotations", "icons", "meta", "fn", "is_async",
        "value", "injected", "wire", "security_level", "scopes",
    )  # fmt: skip

    def __init__(
        self,
        *,
        uri: str,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: tuple[dict[str, Any], ...] | None = None,
        meta: dict[str, Any] | None = None,
        fn: Callable[..., Any] | None = None,
        is_async: bool = False,
        value: str | bytes | None = None,
        injected: dict[str, type] | None = None,
    ) -> None:
        self.uri = uri
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.size = size
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        self.fn = fn
        self.is_async = is_async
        self.value = value
        self.injected = injected or {}
        self.wire = _wire({"uri": uri, "name": name}, self, size=size)
        self.security_level: int | None = None  # set by the factory: None, the policy's default level
        self.scopes: tuple[str, ...] = ()


class ResourceTemplate(Record):
    """A family of resources named by a URI template; ``match(uri)`` gives the arguments for ``fn``."""

    __slots__ = (
        "uri_template", "name", "title", "description", "mime_type", "annotations", "icons", "meta", "fn", "is_async",
        "converters", "completers", "injected", "required", "wire", "security_level", "scopes",
    )  # fmt: skip

    def __init__(
        self,
        *,
        uri_template: UriTemplate,
        name: str,
        fn: Callable[..., Any],
        is_async: bool,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: tuple[dict[str, Any], ...] | None = None,
        meta: dict[str, Any] | None = None,
        converters: dict[str, StringConverter] | None = None,
        completers: dict[str, Completer] | None = None,
        injected: dict[str, type] | None = None,
        required: tuple[str, ...] = (),
    ) -> None:
        self.uri_template = uri_template
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        self.fn = fn
        self.is_async = is_async
        self.converters = converters or {}
        self.completers = completers or {}
        self.injected = injected or {}
        self.required = required
        self.wire = _wire({"uriTemplate": uri_template.text, "name": name}, self)
        self.security_level: int | None = None  # set by the factory: None, the policy's default level
        self.scopes: tuple[str, ...] = ()

    def match(self, uri: str) -> dict[str, Any] | None:
        """The arguments for ``fn`` if ``uri`` names one of this template's resources, else None.

        A URI that fits the template's shape but leaves a required parameter out, or whose value does not convert
        (``users/abc`` for ``id: int``), names none of them.
        """
        values = self.uri_template.match(uri)
        if values is None:
            return None
        try:
            return self.arguments(values)
        except ArgumentError:
            return None

    def arguments(self, values: dict[str, str]) -> dict[str, Any]:
        """Template variable values converted to the parameters' types; raises ArgumentError naming the variable."""
        for name in self.required:
            if name not in values:
                raise ArgumentError(f"$.{name}: missing required value")
        converters = self.converters
        return {name: converters[name](text) if name in converters else text for name, text in values.items()}


# -- building ---------------------------------------------------------------------------------------------------------


def resource_from_function(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: AnnotationsLike = None,
    icons: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    security_level: int | None = None,
    scopes: list[str] | None = None,
    injectable: tuple[type, ...] = (),
) -> Resource:
    """A resource read by calling ``fn`` with no arguments (parameters with defaults, or injected ones, are fine).

    ``name`` defaults to the function's name and ``description`` to its docstring.
    """
    uri = check_uri(uri)
    owner = f"resource {uri!r}"
    if not callable(fn):
        raise RegistrationError(f"{owner}: a resource function must be callable, got {type(fn).__name__}")
    shape = _inspect(fn, injectable, owner)
    required = shape.input_schema.get("required", [])
    if required:
        names = ", ".join(repr(n) for n in required)
        raise RegistrationError(
            f"{owner}: parameter(s) {names} have no default, but a resource is read without arguments; give them "
            f"defaults, or register a resource template with a variable for each (e.g. '{uri}/{{{required[0]}}}')"
        )
    if description is None:
        description = shape.description
    fields = _metadata(owner, title, description, mime_type, size, annotations, icons, meta)
    resource = Resource(
        uri=uri, name=_name(name, fn, owner), fn=fn, is_async=is_async(fn), injected=dict(shape.injected), **fields
    )
    return secured(resource, security_level, scopes, owner)


def resource_from_value(
    uri: str,
    value: str | bytes,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: AnnotationsLike = None,
    icons: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    security_level: int | None = None,
    scopes: list[str] | None = None,
) -> Resource:
    """A resource with fixed content: text (``text/plain`` unless told) or bytes (``application/octet-stream``).

    ``name`` defaults to the URI; ``size`` to the content's byte count (UTF-8 for text).
    """
    uri = check_uri(uri)
    owner = f"resource {uri!r}"
    if isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if isinstance(value, str):
        default_mime, byte_count = "text/plain", len(value.encode("utf-8"))
    elif isinstance(value, bytes):
        default_mime, byte_count = "application/octet-stream", len(value)
    else:
        raise RegistrationError(f"{owner}: static content must be str or bytes, got {type(value).__name__}")
    if size is None:
        size = byte_count
    fields = _metadata(owner, title, description, mime_type or default_mime, size, annotations, icons, meta)
    resource = Resource(uri=uri, name=uri if name is None else _name(name, None, owner), value=value, **fields)
    return secured(resource, security_level, scopes, owner)


def template_from_function(
    fn: Callable[..., Any],
    uri_template: str | UriTemplate,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    annotations: AnnotationsLike = None,
    icons: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    security_level: int | None = None,
    scopes: list[str] | None = None,
    complete: dict[str, Any] | None = None,
    injectable: tuple[type, ...] = (),
) -> ResourceTemplate:
    """A resource template whose variables are ``fn``'s parameters: every variable must be a parameter, and every
    parameter without a default a variable. ``complete`` gives completers by variable name (see completion.py);
    variables typed as an Enum, a Literal or a bool complete to their values unless told otherwise.
    """
    template = uri_template if isinstance(uri_template, UriTemplate) else UriTemplate(uri_template)
    owner = f"resource template {template.text!r}"
    if not template.is_absolute:
        raise RegistrationError(f"{owner}: the template must start with a URI scheme, such as 'file:///{{path}}'")
    if not template.variables:
        raise RegistrationError(f"{owner}: the template has no variables; register it as a resource instead")
    if not callable(fn):
        raise RegistrationError(f"{owner}: a resource template function must be callable, got {type(fn).__name__}")
    shape = _inspect(fn, injectable, owner)
    variables = template.variables
    strangers = [v for v in variables if v not in shape.parameters]
    if strangers:
        raise RegistrationError(
            f"{owner}: variable(s) {_names(strangers)} are not parameters of {_label(fn)} "
            f"(its parameters: {_names(shape.parameters) or 'none'})"
        )
    required = tuple(shape.input_schema.get("required", []))
    unfilled = [p for p in required if p not in variables]
    if unfilled:
        raise RegistrationError(
            f"{owner}: parameter(s) {_names(unfilled)} of {_label(fn)} have no default and are not template "
            "variables; add them to the template (e.g. as {?name}) or give them defaults"
        )
    converters = {n: convert for n, convert in string_converters(shape).items() if n in variables}
    completers = _default_completers(shape, variables, owner)
    completers.update(make_completers(complete, variables, owner))
    if description is None:
        description = shape.description
    fields = _metadata(owner, title, description, mime_type, None, annotations, icons, meta)
    made = ResourceTemplate(
        uri_template=template,
        name=_name(name, fn, owner),
        fn=fn,
        is_async=is_async(fn),
        converters=converters,
        completers=completers,
        injected=dict(shape.injected),
        required=required,
        **fields,
    )
    return secured(made, security_level, scopes, owner)


R = TypeVar("R", Resource, ResourceTemplate)


def secured(item: R, security_level: Any, scopes: Any, owner: str) -> R:
    """``item`` with its security level (seed 002's 0-10; None: the policy's default) and the scopes reading it needs."""
    item.security_level = check_security_level(security_level, owner)
    item.scopes = check_scopes(scopes, owner)
    return item


def check_uri(uri: Any) -> str:
    """``uri`` if it is an absolute URI (RFC 3986: a scheme, then only characters a URI may hold), else
    RegistrationError."""
    if not isinstance(uri, str):
        raise RegistrationError(f"a resource URI must be a string, got {type(uri).__name__}")
    if "{" in uri or "}" in uri:
        raise RegistrationError(f"resource URI {uri!r} looks like a URI template; register a resource template")
    if not re.match(_SCHEME, uri):
        raise RegistrationError(f"resource URI {uri!r} is not absolute: it must start with a scheme, as in 'file:///'")
    for index, char in enumerate(uri):
        if char == "%" and not re.match(_PERCENT, uri[index : index + 3]):
            problem = f"'%' at column {index + 1} must start a percent-encoded byte such as %20"
        elif char not in _URI_CHARACTERS:
            problem = f"{char!r} at column {index + 1} must be percent-encoded"
        else:
            continue
        raise RegistrationError(f"resource URI {uri!r} is not a valid URI (RFC 3986): {problem}")
    return uri


def _inspect(fn: Callable[..., Any], injectable: tuple[type, ...], owner: str) -> FunctionShape:
    try:
        return inspect_function(fn, injectable=injectable, output=False)
    except SchemaError as exc:
        raise RegistrationError(f"{owner}: {exc}") from None


def _default_completers(shape: FunctionShape, variables: tuple[str, ...], owner: str) -> dict[str, Completer]:
    properties = shape.input_schema.get("properties", {})
    defs = shape.input_schema.get("$defs", {})
    out: dict[str, Completer] = {}
    for name in variables:
        values = choices(properties[name], defs)
        if values is not None:
            out[name] = Completer(choices=values, label=f"{owner}, argument {name!r}")
    return out


def _name(name: str | None, fn: Callable[..., Any] | None, owner: str) -> str:
    if name is None:
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str) or name == "<lambda>":
            raise RegistrationError(f"{owner}: the function has no usable name; pass name=")
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{owner}: name must be a non-empty string, got {name!r}")
    return name


def _metadata(
    owner: str,
    title: Any,
    description: Any,
    mime_type: Any,
    size: Any,
    annotations: AnnotationsLike,
    icons: Any,
    meta: Any,
) -> dict[str, Any]:
    """The optional fields shared by resources and templates, checked and in wire-ready form."""
    for field, value in (("title", title), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise RegistrationError(f"{owner}: {field} must be a string, got {type(value).__name__}")
    if mime_type is not None and (not isinstance(mime_type, str) or not re.fullmatch(_MIME_TYPE, mime_type)):
        raise RegistrationError(f"{owner}: mime_type must be a MIME type such as 'text/markdown', got {mime_type!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise RegistrationError(f"{owner}: size must be a byte count (an int >= 0), got {size!r}")
    try:
        parsed = annotations_from(annotations)
    except ContentError as exc:
        raise RegistrationError(f"{owner}: {exc}") from None
    if meta is not None and (not isinstance(meta, dict) or not all(isinstance(key, str) for key in meta)):
        raise RegistrationError(f"{owner}: meta must be a dict with string keys")
    fields: dict[str, Any] = {
        "title": title,
        "description": description,
        "mime_type": mime_type,
        "annotations": (parsed.to_wire() or None) if parsed is not None else None,
        "icons": normalize_icons(icons, owner),
        "meta": meta or None,
    }
    if size is not None:
        fields["size"] = size
    return fields


def _wire(wire: dict[str, Any], item: Resource | ResourceTemplate, *, size: int | None = None) -> dict[str, Any]:
    for key, value in (
        ("title", item.title),
        ("description", item.description),
        ("mimeType", item.mime_type),
        ("size", size),
        ("annotations", item.annotations),
        ("icons", list(item.icons) if item.icons else None),
        ("_meta", item.meta),
    ):
        if value is not None:
            wire[key] = value
    return wire


def _names(names: Any) -> str:
    return ", ".join(repr(name) for name in names)


def _label(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
