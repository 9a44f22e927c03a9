"""Recognise the kinds of annotation tooldeck understands, by duck typing where a library would otherwise be imported.

Both schema generation and value conversion ask these questions, so the answers live in one place.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import types
import typing
from typing import Any

NoneType = type(None)

# Origins (as ``typing.get_origin`` reports them) that mean "a JSON array".
LIST_ORIGINS: frozenset[Any] = frozenset(
    {list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection, cabc.Iterator, cabc.Reversible}
)
SET_ORIGINS: frozenset[Any] = frozenset({set, frozenset, cabc.Set, cabc.MutableSet})
MAPPING_ORIGINS: frozenset[Any] = frozenset({dict, cabc.Mapping, cabc.MutableMapping})
UNION_ORIGINS: frozenset[Any] = frozenset({typing.Union, types.UnionType})
_REQUIRED_MARKERS = ("Required", "NotRequired", "ReadOnly")


def strip_annotated(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[X, a, b]`` -> ``(X, (a, b))``; also sees through NewType and type aliases."""
    metadata: tuple[Any, ...] = ()
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            metadata = (*metadata, *tp.__metadata__)
            tp = tp.__origin__
        elif hasattr(tp, "__supertype__"):  # typing.NewType
            tp = tp.__supertype__
        elif type(tp).__name__ == "TypeAliasType" and hasattr(tp, "__value__"):
            tp = tp.__value__
        else:
            return tp, metadata


def strip_required(tp: Any) -> tuple[Any, bool | None]:
    """``Required[X]``/``NotRequired[X]`` (TypedDict markers) -> ``(X, True/False)``; otherwise ``(tp, None)``."""
    required: bool | None = None
    while True:
        origin = typing.get_origin(tp)
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if origin is not None and name in _REQUIRED_MARKERS:
            if name != "ReadOnly":
                required = name == "Required"
            tp = typing.get_args(tp)[0]
        elif origin is typing.Annotated:
            inner, required_inner = strip_required(tp.__origin__)
            if required_inner is None:
                return tp, required
            return typing.Annotated[(inner, *tp.__metadata__)], required_inner
        else:
            return tp, required


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in UNION_ORIGINS


def is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and hasattr(tp, "model_validate")


def is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def is_typeddict(tp: Any) -> bool:
    # typing.is_typeddict misses typing_extensions.TypedDict, which is a separate class on 3.11.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def init_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The dataclass fields a caller can pass to the constructor."""
    return [field for field in dataclasses.fields(cls) if field.init]


def has_default(field: dataclasses.Field[Any]) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def class_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a class, with Annotated/Required metadata kept."""
    return typing.get_type_hints(cls, include_extras=True)


def typeddict_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(key, annotation, required)`` for each key of a TypedDict, honouring total=False and Required/NotRequired.

    The markers are read from the hints as well as ``__required_keys__`` because, with ``from __future__ import
    annotations``, Python 3.11 computes ``__required_keys__`` from unevaluated strings and misses them.
    """
    hints = class_hints(cls)
    required_keys = cls.__required_keys__  # type: ignore[attr-defined]
    fields = []
    for key, hint in hints.items():
        tp, marker = strip_required(hint)
        fields.append((key, tp, key in required_keys if marker is None else marker))
    return fields


def declared_doc(cls: type) -> str | None:
    """The class docstring the author wrote, not the signature dataclass/NamedTuple put there when there was none."""
    doc = cls.__doc__
    if not doc or doc.startswith(f"{cls.__name__}("):
        return None
    return doc
