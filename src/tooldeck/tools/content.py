"""Content blocks a tool can return: text, image, audio, resource links and embedded resources.

Each helper is a small frozen record with ``to_wire()``; binary data is base64-encoded there, once, when the result
is built. ``annotations`` takes an ``Annotations`` or a dict with ``audience``, ``priority`` and ``last_modified``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from ..protocol.errors import TooldeckError

_AUDIENCES = frozenset({"user", "assistant"})


class ContentError(TooldeckError, ValueError):
    """A content block built with values the protocol does not allow."""


@dataclass(frozen=True, slots=True)
class Annotations:
    """Hints for the client: who the content is for, how much it matters (0-1), when it last changed."""

    audience: tuple[str, ...] | None = None
    priority: float | None = None
    last_modified: str | None = None

    def __post_init__(self) -> None:
        if self.audience is not None:
            audience = (self.audience,) if isinstance(self.audience, str) else tuple(self.audience)
            unknown = [a for a in audience if a not in _AUDIENCES]
            if unknown:
                raise ContentError(f"annotations.audience: {unknown[0]!r} is not 'user' or 'assistant'")
            object.__setattr__(self, "audience", audience)
        if self.priority is not None:
            if isinstance(self.priority, bool) or not isinstance(self.priority, int | float):
                raise ContentError(f"annotations.priority: expected a number from 0 to 1, got {self.priority!r}")
            if not 0 <= self.priority <= 1:
                raise ContentError(f"annotations.priority: {self.priority} is outside 0..1")
        if isinstance(self.last_modified, datetime | date):
            moment = self.last_modified
            if isinstance(moment, datetime) and moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            object.__setattr__(self, "last_modified", moment.isoformat())
        elif self.last_modified is not None and not isinstance(self.last_modified, str):
            raise ContentError("annotations.last_modified: expected an ISO 8601 string or a datetime")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.audience is not None:
            wire["audience"] = list(self.audience)
        if self.priority is not None:
            wire["priority"] = self.priority
        if self.last_modified is not None:
            wire["lastModified"] = self.last_modified
        return wire


AnnotationsLike = Annotations | dict[str, Any] | None


def annotations_from(value: AnnotationsLike) -> Annotations | None:
    if value is None or isinstance(value, Annotations):
        return value
    if isinstance(value, dict):
        known = {"audience", "priority", "last_modified", "lastModified"}
        extra = sorted(set(value) - known)
        if extra:
            raise ContentError(f"annotations: unknown key {extra[0]!r} (use audience, priority, last_modified)")
        return Annotations(
            audience=value.get("audience"),
            priority=value.get("priority"),
            last_modified=value.get("last_modified", value.get("lastModified")),
        )
    raise ContentError(f"annotations: expected Annotations or a dict, got {type(value).__name__}")


def _finish(wire: dict[str, Any], annotations: Annotations | None, meta: dict[str, Any] | None) -> dict[str, Any]:
    if annotations is not None:
        wire["annotations"] = annotations.to_wire()
    if meta:
        wire["_meta"] = meta
    return wire


def _b64(data: bytes) -> str:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ContentError(f"expected bytes, got {type(data).__name__}")
    return base64.b64encode(data).decode("ascii")


def _check_mime(mime_type: str, family: str | None = None) -> None:
    if not isinstance(mime_type, str) or "/" not in mime_type:
        raise ContentError(f"mime_type: expected a MIME type like 'image/png', got {mime_type!r}")
    if family is not None and not mime_type.startswith(family + "/"):
        raise ContentError(f"mime_type: expected a {family}/* type, got {mime_type!r}")


@dataclass(frozen=True, slots=True)
class Text:
    """Text content with annotations; a plain ``str`` is text content without them."""

    text: str
    annotations: Any = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "annotations", annotations_from(self.annotations))

    def to_wire(self) -> dict[str, Any]:
        return _finish({"type": "text", "text": self.text}, self.annotations, self.meta)


@dataclass(frozen=True, slots=True)
class Image:
    data: bytes
    mime_type: str
    annotations: Any = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_mime(self.mime_type, "image")
        object.__setattr__(self, "annotations", annotations_from(self.annotations))

    def to_wire(self) -> dict[str, Any]:
        wire = {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}
        return _finish(wire, self.annotations, self.meta)


@dataclass(frozen=True, slots=True)
class Audio:
    data: bytes
    mime_type: str
    annotations: Any = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_mime(self.mime_type, "audio")
        object.__setattr__(self, "annotations", annotations_from(self.annotations))

    def to_wire(self) -> dict[str, Any]:
        wire = {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}
        return _finish(wire, self.annotations, self.meta)


@dataclass(frozen=True, slots=True)
class ResourceLink:
    """A pointer to a resource the client may read; it need not appear in resources/list."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Any = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or ":" not in self.uri:
            raise ContentError(f"uri: expected an absolute URI, got {self.uri!r}")
        if self.mime_type is not None:
            _check_mime(self.mime_type)
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0):
            raise ContentError(f"size: expected a byte count, got {self.size!r}")
        object.__setattr__(self, "annotations", annotations_from(self.annotations))

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("size", self.size),
            ("icons", self.icons),
        ):
            if value is not None:
                wire[key] = value
        return _finish(wire, self.annotations, self.meta)


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """A resource's contents inline: exactly one of ``text`` or ``blob`` (bytes)."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None
    annotations: Any = None
    meta: dict[str, Any] | None = None
    resource_meta: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or ":" not in self.uri:
            raise ContentError(f"uri: expected an absolute URI, got {self.uri!r}")
        if (self.text is None) == (self.blob is None):
            raise ContentError("EmbeddedResource needs exactly one of text= or blob=")
        if self.mime_type is not None:
            _check_mime(self.mime_type)
        object.__setattr__(self, "annotations", annotations_from(self.annotations))

    def to_wire(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            resource["mimeType"] = self.mime_type
        if self.text is not None:
            resource["text"] = self.text
        else:
            resource["blob"] = _b64(self.blob)  # type: ignore[arg-type]
        if self.resource_meta:
            resource["_meta"] = self.resource_meta
        return _finish({"type": "resource", "resource": resource}, self.annotations, self.meta)


ContentBlock = Text | Image | Audio | ResourceLink | EmbeddedResource
CONTENT_TYPES: tuple[type, ...] = (Text, Image, Audio, ResourceLink, EmbeddedResource)
