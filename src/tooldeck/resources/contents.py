"""What a resource function returned -> the ``contents`` of a resources/read result.

``str`` is text, ``bytes`` a base64 blob, a dict / list / dataclass / model JSON text, an ``EmbeddedResource`` a
content item of its own (its URI may be a sub-resource's), and a list or tuple of strings, bytes and embedded
resources several items.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from ..model.content import EmbeddedResource
from ..schema import kinds
from ..schema.jsonvalue import json_default

_BINARY = (bytes, bytearray, memoryview)
_ITEMS = (str, *_BINARY, EmbeddedResource)


def contents_for(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """The ``contents`` list for ``value`` read from ``uri``; ``mime_type`` is the resource's, if it declared one.

    Raises TypeError for a value that is none of the kinds above.
    """
    if isinstance(value, _ITEMS):
        return [_item(uri, value, mime_type)]
    # A NamedTuple is a record, written as a JSON object; an empty list is the JSON document "[]".
    several = isinstance(value, list | tuple) and value and not hasattr(value, "_asdict")
    if several and all(isinstance(item, _ITEMS) for item in value):
        return [_item(uri, item, mime_type) for item in value]
    if _is_json_document(value):
        try:
            text = orjson.dumps(value, default=json_default).decode()
        except TypeError as exc:
            raise TypeError(f"resource {uri!r}: the returned value cannot be written as JSON: {exc}") from None
        return [{"uri": uri, "mimeType": mime_type or "application/json", "text": text}]
    raise TypeError(
        f"resource {uri!r}: a resource function must return str, bytes, an EmbeddedResource, a dict, a list, "
        f"a dataclass or a model, or a list of str / bytes / EmbeddedResource; got {type(value).__name__}"
    )


def _item(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    if isinstance(value, str):
        return {"uri": uri, "mimeType": mime_type or "text/plain", "text": value}
    if isinstance(value, EmbeddedResource):
        resource: dict[str, Any] = value.to_wire()["resource"]
        return resource
    blob = base64.b64encode(value).decode("ascii")
    return {"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": blob}


def _is_json_document(value: Any) -> bool:
    if isinstance(value, dict | list | tuple):
        return True
    cls = type(value)
    return kinds.is_dataclass_type(cls) or kinds.is_pydantic_model(cls)
