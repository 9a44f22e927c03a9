"""Content blocks a tool can return: text, image, audio, resource links and embedded resources.

Each helper is a small record with ``to_wire()``; binary data is base64-encoded there, once, when the result is
built. ``annotations`` takes an ``Annotations`` or a dict with ``audience``, ``priority`` and ``last_modified``.
"""

from __future__ import annotations

import base64
from typing import Any

from ..protocol.errors import ContentError
from ..protocol.record import Record

_AUDIENCES = frozenset({"user", "assistant"})


class Annotations(Record):
    """Hints for the client: who the content is for, how much it matters (0-1), when it last changed."""

    __slots__ = ("audience", "priority", "last_modified")

    def __init__(self, audience: Any = None, priority: float | None = None, last_modified: Any = None) -> None:
        if audience is not None:
            audience = (audience,) if isinstance(audience, str) else tuple(audience)
            unknown = [a for a in audience if a not in _AUDIENCES]
            if unknown:
                raise ContentError(f"annotations.audience: {unknown[0]!r} is not 'user' or 'assistant'")
        if priority is not None:
            if isinstance(priority, bool) or not isinstance(priority, int | float):
                raise ContentError(f"annotations.priority: expected a number from 0 to 1, got {priority!r}")
            if not 0 <= priority <= 1:
                raise ContentError(f"annotations.priority: {priority} is outside 0..1")
        if last_modified is not None and not isinstance(last_modified, str):
            if not hasattr(last_modified, "isoformat"):
                raise ContentError("annotations.last_modified: expected an ISO 8601 string or a datetime")
            if getattr(last_modified, "tzinfo", False) is None:  # a naive datetime is taken as UTC
                from datetime import UTC

                last_modified = last_modified.replace(tzinfo=UTC)
            last_modified = last_modified.isoformat()
        self.audience: tuple[str, ...] | None = audience
        self.priority = priority
        self.last_modified: str | None = last_modified

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


def _check_uri(uri: Any) -> None:
    if not isinstance(uri, str) or ":" not in uri:
        raise ContentError(f"uri: expected an absolute URI, got {uri!r}")


def _check_mime(mime_type: str, family: str | None = None) -> None:
    if not isinstance(mime_type, str) or "/" not in mime_type:
        raise ContentError(f"mime_type: expected a MIME type like 'image/png', got {mime_type!r}")
    if family is not None and not mime_type.startswith(family + "/"):
        raise ContentError(f"mime_type: expected a {family}/* type, got {mime_type!r}")


class Text(Record):
    """Text content with annotations; a plain ``str`` is text content without them."""

    __slots__ = ("text", "annotations", "meta")

    def __init__(self, text: str, annotations: AnnotationsLike = None, meta: dict[str, Any] | None = None) -> None:
        self.text = text
        self.annotations = annotations_from(annotations)
        self.meta = meta

    def to_wire(self) -> dict[str, Any]:
        return _finish({"type": "text", "text": self.text}, self.annotations, self.meta)


class Image(Record):
    __slots__ = ("data", "mime_type", "annotations", "meta")

    def __init__(
        self, data: bytes, mime_type: str, annotations: AnnotationsLike = None, meta: dict[str, Any] | None = None
    ) -> None:
        _check_mime(mime_type, "image")
        self.data = data
        self.mime_type = mime_type
        self.annotations = annotations_from(annotations)
        self.meta = meta

    def to_wire(self) -> dict[str, Any]:
        wire = {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}
        return _finish(wire, self.annotations, self.meta)


class Audio(Record):
    __slots__ = ("data", "mime_type", "annotations", "meta")

    def __init__(
        self, data: bytes, mime_type: str, annotations: AnnotationsLike = None, meta: dict[str, Any] | None = None
    ) -> None:
        _check_mime(mime_type, "audio")
        self.data = data
        self.mime_type = mime_type
        self.annotations = annotations_from(annotations)
        self.meta = meta

    def to_wire(self) -> dict[str, Any]:
        wire = {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}
        return _finish(wire, self.annotations, self.meta)


class ResourceLink(Record):
    """A pointer to a resource the client may read; it need not appear in resources/list."""

    __slots__ = ("uri", "name", "title", "description", "mime_type", "size", "annotations", "icons", "meta")

    def __init__(
        self,
        uri: str,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: AnnotationsLike = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        _check_uri(uri)
        if mime_type is not None:
            _check_mime(mime_type)
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ContentError(f"size: expected a byte count, got {size!r}")
        self.uri = uri
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.size = size
        self.annotations = annotations_from(annotations)
        self.icons = icons
        self.meta = meta

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


class EmbeddedResource(Record):
    """A resource's contents inline: exactly one of ``text`` or ``blob`` (bytes)."""

    __slots__ = ("uri", "text", "blob", "mime_type", "annotations", "meta", "resource_meta")

    def __init__(
        self,
        uri: str,
        text: str | None = None,
        blob: bytes | None = None,
        mime_type: str | None = None,
        annotations: AnnotationsLike = None,
        meta: dict[str, Any] | None = None,
        resource_meta: dict[str, Any] | None = None,
    ) -> None:
        _check_uri(uri)
        if (text is None) == (blob is None):
            raise ContentError("EmbeddedResource needs exactly one of text= or blob=")
        if mime_type is not None:
            _check_mime(mime_type)
        self.uri = uri
        self.text = text
        self.blob = blob
        self.mime_type = mime_type
        self.annotations = annotations_from(annotations)
        self.meta = meta
        self.resource_meta = resource_meta

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
