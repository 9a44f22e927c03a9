"""Recognise the kinds of annotation tooldeck understands, by duck typing where a library would otherwise be imported.

Both schema generation and value conversion ask these questions, so the answers live in one place. Nothing here
imports a module a tool's annotations might not need: see ``loaded``.
"""

from __future__ import annotations

import collections.abc as cabc
import sys
import types
import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dataclasses

NoneType = type(None)

# Origins (as ``typing.get_origin`` reports them) that mean "a JSON array".
LIST_ORIGINS: frozenset[Any] = frozenset(
    {list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection, cabc.Iterator, cabc.Reversible}
)
SET_ORIGINS: frozenset[Any] = frozenset({set, frozenset, cabc.Set, cabc.MutableSet})
MAPPING_ORIGINS: frozenset[Any] = frozenset({dict, cabc.Mapping, cabc.MutableMapping})
UNION_ORIGINS: frozenset[Any] = frozenset({typing.Union, types.UnionType})
_REQUIRED_MARKERS = ("Required", "NotRequired", "ReadOnly")


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""Stands for "this parameter or field has no default" (None is a default like any other)."""


def loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` has been imported, else None; the module is never imported here.

    An annotation can only name ``decimal.Decimal``, ``uuid.UUID`` or a ``pathlib`` class, and a value can only be
    one of theirs or ``inspect.Parameter.empty``, once something has imported the module; so tooldeck asks
    ``sys.modules`` rather than pay for these imports at start-up (several milliseconds between them).
    """
    found = sys.modules.get(module)
    return None if found is None else getattr(found, name, None)


def inherits(cls: type, module: str, name: str) -> bool:
    """Whether ``cls`` is the class ``module.name`` or a subclass of it, without importing ``module``."""
    base = loaded(module, name)
    return base is not None and issubclass(cls, base)


def is_instance(value: Any, module: str, name: str) -> bool:
    """Whether ``value`` is an instance of the class ``module.name``, without importing ``module``."""
    cls = loaded(module, name)
    return cls is not None and isinstance(value, cls)


def is_signature_empty(tp: Any) -> bool:
    """Whether ``tp`` is ``inspect.Parameter.empty``, the "no annotation" marker, which means any value."""
    parameter = loaded("inspect", "Parameter")
    return parameter is not None and tp is parameter.empty


def strip_annotated(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[X, a, b]`` -> ``(X, (a, b))``; also sees through NewType and type aliases."""
    if type(tp) is type and not hasattr(tp, "__supertype__"):
        return tp, ()  # a plain class, the usual case: typing.get_origin is slow by comparison
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
    # What dataclasses.is_dataclass checks, without importing dataclasses (and, through it, inspect).
    return isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")


def is_typeddict(tp: Any) -> bool:
    # typing.is_typeddict misses typing_extensions.TypedDict, which is a separate class on 3.11.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def init_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The dataclass fields a caller can pass to the constructor."""
    import dataclasses  # already imported: cls is a dataclass

    return [field for field in dataclasses.fields(cls) if field.init]


def has_default(field: dataclasses.Field[Any]) -> bool:
    import dataclasses  # already imported: field belongs to a dataclass

    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def field_default(field: dataclasses.Field[Any]) -> Any:
    """The field's default value, or ``NO_DEFAULT`` (also for a ``default_factory``: each instance gets its own)."""
    import dataclasses  # already imported: field belongs to a dataclass

    return NO_DEFAULT if field.default is dataclasses.MISSING else field.default


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
