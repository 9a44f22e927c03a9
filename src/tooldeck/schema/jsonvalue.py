"""Python values back into JSON: the orjson ``default=`` hook for the types tooldeck's schemas describe."""

from __future__ import annotations

from typing import Any

import orjson

from . import kinds


def json_default(obj: Any) -> Any:
    """orjson ``default=`` hook for the values tooldeck's schemas describe but orjson cannot dump by itself."""
    if hasattr(obj, "model_dump") and not isinstance(obj, type):  # a pydantic model instance
        return obj.model_dump(mode="json")
    if isinstance(obj, set | frozenset):
        try:
            return sorted(obj)  # a stable order keeps results reproducible
        except TypeError:
            return list(obj)
    # Decimal and PurePath are looked up, not imported (kinds.loaded): a value can only be one if its module is loaded.
    if kinds.is_instance(obj, "decimal", "Decimal"):
        if obj.is_finite():
            # The schema says "number": emit the exact digits rather than round through a float.
            return orjson.Fragment(str(obj))
        raise TypeError(f"Decimal {obj} has no JSON representation")
    if kinds.is_instance(obj, "pathlib", "PurePath"):
        return str(obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        import base64  # when a tool returns bytes, not at start-up (see _bytes)

        return base64.b64encode(obj).decode("ascii")
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):  # NamedTuple: an object, as its schema says
        return obj._asdict()
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def json_value(value: Any) -> tuple[bool, Any]:
    """``(True, plain JSON form of value)``, or ``(False, None)`` when it has none (used for schema defaults)."""
    try:
        return True, orjson.loads(orjson.dumps(value, default=json_default))
    except (TypeError, ValueError):
        return False, None
