"""Turn validated JSON values into the Python types a tool declared (the other way is ``jsonvalue.py``).

``converter_for(tp)`` returns None when the JSON value can be passed as is (str, int, bool, dicts and lists of
those): that is the fast path, and most parameters take it. Otherwise it returns a function that raises
``ConversionError`` (with a JSON path) when the value cannot be converted.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing
from collections.abc import Callable
from typing import Any

from tooldeck.schema import kinds

from ..protocol.errors import ConversionError, SchemaError
from ..protocol.paths import preview

Converter = Callable[[Any], Any]

# The Python types orjson produces for JSON values, each a "shape" a union branch may accept.
_SHAPES: tuple[type, ...] = (dict, list, str, int, float, bool, kinds.NoneType)
_ALL_SHAPES = frozenset(_SHAPES)
_NUMBER = frozenset({int, float})
_IDENTITY_TYPES: frozenset[Any] = frozenset({str, bool, kinds.NoneType, None, Any, object})
_ISO_TYPES: dict[type, str] = {dt.datetime: "date-time", dt.date: "date", dt.time: "time"}


def converter_for(tp: Any) -> Converter | None:
    """A function turning the JSON form of ``tp`` into ``tp``, or None when the JSON value already is one."""
    return _Builder().build(tp)


def _fail(reason: str) -> ConversionError:
    return ConversionError(reason)


def _to_int(value: Any) -> Any:
    # JSON has one number type: 10, 10.0 and 1e1 are the same integer to a JSON Schema "integer", so a whole-number
    # float that passed the schema becomes the int the function declared.
    kind = type(value)
    if kind is int:
        return value
    if kind is float and value.is_integer():
        if abs(value) > 2**53:  # past this a double has lost digits: the int would not be the one the client sent
            raise _fail(f"expected an integer, got {preview(value)}, which is too large to be exact")
        return int(value)
    raise _fail(f"expected an integer, got {preview(value)}")


def _to_float(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        return float(value)
    raise _fail(f"expected a number, got {preview(value)}")


# The three converters below import their module when a tool needs them, not when tooldeck starts. For decimal and
# uuid that costs nothing (the annotation names one of their classes, so they are loaded); base64 loads struct and
# binascii, which only a tool that takes bytes should pay for.


def _decimal() -> Converter:
    import decimal

    def to_decimal(value: Any) -> decimal.Decimal:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise _fail(f"expected a number, got {preview(value)}")
        try:
            # str() first: Decimal(0.1) would keep the float's binary error, Decimal("0.1") does not.
            return decimal.Decimal(str(value))
        except decimal.InvalidOperation:
            raise _fail(f"expected a number, got {preview(value)}") from None

    return to_decimal


def _bytes() -> Callable[[Any], bytes]:
    import base64
    import binascii

    def to_bytes(value: Any) -> bytes:
        if not isinstance(value, str):
            raise _fail(f"expected a base64 string, got {preview(value)}")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _fail(f"expected base64-encoded data, got {preview(value)}") from None

    return to_bytes


def _uuid() -> Converter:
    import uuid

    def to_uuid(value: Any) -> uuid.UUID:
        try:
            return uuid.UUID(value)
        except (TypeError, ValueError, AttributeError):
            raise _fail(f"expected a UUID, got {preview(value)}") from None

    return to_uuid


def _iso(cls: type) -> Converter:
    what = _ISO_TYPES[next(base for base in _ISO_TYPES if issubclass(cls, base))]
    parse = cls.fromisoformat  # type: ignore[attr-defined]

    def convert(value: Any) -> Any:
        try:
            return parse(value)
        except (TypeError, ValueError):
            raise _fail(f"expected an ISO 8601 {what}, got {preview(value)}") from None

    return convert


def _enum(cls: type[enum.Enum]) -> Converter:
    allowed = ", ".join(preview(member.value) for member in cls)

    def convert(value: Any) -> Any:
        try:
            return cls(value)
        except ValueError:
            raise _fail(f"expected one of {allowed}, got {preview(value)}") from None

    return convert


def _path(cls: type) -> Converter:
    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            raise _fail(f"expected a path string, got {preview(value)}")
        return cls(value)

    return convert


def _expect(value: Any, kind: type, what: str) -> None:
    if not isinstance(value, kind):
        raise _fail(f"expected {what}, got {preview(value)}")


def _at(key: str | int, convert: Converter, value: Any) -> Any:
    try:
        return convert(value)
    except ConversionError as error:
        error.path.insert(0, key)
        raise


def _items(convert: Converter, value: Any) -> list[Any]:
    _expect(value, list, "an array")
    return [_at(index, convert, item) for index, item in enumerate(value)]


class _Builder:
    """Builds converters for one annotation; recursive classes are tied through late-bound cells."""

    def __init__(self) -> None:
        self._cells: dict[Any, list[Converter]] = {}

    def build(self, tp: Any) -> Converter | None:
        tp, metadata = kinds.strip_annotated(tp)
        if not self._needs(tp, set()):
            return None
        cell = self._cells.get(tp)
        if cell is not None:  # a recursive reference to a class being built
            return lambda value: cell[0](value)
        try:
            return self._build(tp)
        except SchemaError:
            if any(isinstance(meta, dict) for meta in metadata):
                return None  # a raw schema fragment stands in for the type: the value is passed as is
            raise

    def _needs(self, tp: Any, visiting: set[Any]) -> bool:
        """Whether a JSON value of ``tp`` must be converted; a TypedDict cycle counts as "no" until shown otherwise."""
        tp, _ = kinds.strip_annotated(tp)
        if tp in _IDENTITY_TYPES or kinds.is_signature_empty(tp):
            return False
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Literal:
            return any(isinstance(arg, enum.Enum) for arg in args)
        if kinds.is_union(tp):
            return any(self._needs(arg, visiting) for arg in args)
        if origin in kinds.LIST_ORIGINS or tp in kinds.LIST_ORIGINS:
            return bool(args) and self._needs(args[0], visiting)
        if origin in kinds.MAPPING_ORIGINS or tp in kinds.MAPPING_ORIGINS:
            if not args:
                return False
            # Integer keys arrive as strings ("1"), so they always need converting.
            return kinds.strip_annotated(args[0])[0] is int or any(self._needs(arg, visiting) for arg in args)
        if kinds.is_typeddict(tp):
            if tp in visiting:
                return False
            visiting.add(tp)
            return any(self._needs(field_tp, visiting) for _, field_tp, _ in kinds.typeddict_fields(tp))
        if isinstance(tp, typing.TypeVar):
            return tp.__bound__ is not None and self._needs(tp.__bound__, visiting)
        return True

    def _build(self, tp: Any) -> Converter:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if tp is float:
            return _to_float
        if tp is int:
            return _to_int
        if isinstance(tp, type):
            if issubclass(tp, enum.Enum):
                return _enum(tp)
            if issubclass(tp, tuple(_ISO_TYPES)):
                return _iso(tp)
            if kinds.inherits(tp, "uuid", "UUID"):
                return _uuid()
            if kinds.inherits(tp, "pathlib", "PurePath"):
                return _path(tp)
            if kinds.inherits(tp, "decimal", "Decimal"):
                return _decimal()
            if tp is bytes:
                return _bytes()
            if tp is bytearray:
                to_bytes = _bytes()
                return lambda value: bytearray(to_bytes(value))
        if origin is typing.Literal:
            return self._literal(args)
        if kinds.is_union(tp):
            return self._union(args)
        if origin in kinds.LIST_ORIGINS:
            item = self._require(args[0])
            return lambda value: _items(item, value)
        if tp is tuple or tp is typing.Tuple:  # noqa: UP006 - the bare alias means "any tuple"
            return self._tuple((Any, ...))
        if origin is tuple:
            return self._tuple(args)
        if tp in kinds.SET_ORIGINS or origin in kinds.SET_ORIGINS:
            return self._set(tp if origin is None else origin, args)
        if origin in kinds.MAPPING_ORIGINS:
            return self._mapping(args)
        if isinstance(tp, typing.TypeVar) and tp.__bound__ is not None:
            return self._require(tp.__bound__)
        if kinds.is_pydantic_model(tp):
            return self._pydantic(tp)
        if kinds.is_dataclass_type(tp) or kinds.is_namedtuple(tp) or kinds.is_typeddict(tp):
            return self._class(tp)
        if isinstance(tp, type) and issubclass(tp, str | int | float | list | tuple | dict):
            return tp  # a subclass of a JSON type (a str-based ID class, an OrderedDict): construct it
        raise SchemaError(f"cannot convert JSON values to {getattr(tp, '__qualname__', repr(tp))}")

    def _require(self, tp: Any) -> Converter:
        return self.build(tp) or _identity

    def _literal(self, args: tuple[Any, ...]) -> Converter:
        members = {arg.value: arg for arg in args if isinstance(arg, enum.Enum)}
        return lambda value: members.get(value, value)

    def _union(self, args: tuple[Any, ...]) -> Converter:
        by_shape: dict[type, list[Converter | None]] = {shape: [] for shape in _SHAPES}
        for arg in args:
            convert = self.build(arg)
            for shape in _shapes(arg):
                if not by_shape[shape] or by_shape[shape][-1] is not None:  # nothing is tried after identity
                    by_shape[shape].append(convert)
        # "a number" already covers integers.
        named = [shape for shape in _SHAPES if by_shape[shape] and not (shape is int and by_shape[float])]
        expected = " or ".join(_SHAPE_NAMES[shape] for shape in named)

        def convert_union(value: Any) -> Any:
            candidates = by_shape.get(type(value))
            if not candidates:
                raise _fail(f"expected {expected}, got {preview(value)}")
            first_error: ConversionError | None = None
            # Branches are tried in declaration order; the first that converts wins, as in `datetime | str`.
            for candidate in candidates:
                if candidate is None:
                    return value
                try:
                    return candidate(value)
                except ConversionError as error:
                    first_error = first_error or error
            assert first_error is not None
            raise first_error

        return convert_union

    def _tuple(self, args: tuple[Any, ...]) -> Converter:
        if len(args) == 2 and args[1] is Ellipsis:
            item = self.build(args[0])

            def variadic(value: Any) -> tuple[Any, ...]:
                _expect(value, list, "an array")
                if item is None:
                    return tuple(value)
                return tuple(_at(index, item, element) for index, element in enumerate(value))

            return variadic
        if args == ((),):  # tuple[()] on Pythons that report it this way
            args = ()
        fixed_items = [self._require(arg) for arg in args]

        def fixed(value: Any) -> tuple[Any, ...]:
            _expect(value, list, "an array")
            if len(value) != len(fixed_items):
                raise _fail(f"expected {len(fixed_items)} items, got {len(value)}")
            pairs = enumerate(zip(fixed_items, value, strict=True))
            return tuple(_at(index, convert, element) for index, (convert, element) in pairs)

        return fixed

    def _set(self, origin: Any, args: tuple[Any, ...]) -> Converter:
        make: Callable[[Any], Any] = frozenset if origin is frozenset else set
        item = self.build(args[0]) if args else None

        def convert(value: Any) -> Any:
            _expect(value, list, "an array")
            elements = value if item is None else _items(item, value)
            try:
                return make(elements)
            except TypeError:
                raise _fail(f"expected hashable items, got {preview(value)}") from None

        return convert

    def _mapping(self, args: tuple[Any, ...]) -> Converter:
        key_tp, value_tp = args
        key = self._key(key_tp)
        item = self._require(value_tp)

        def convert(value: Any) -> dict[Any, Any]:
            _expect(value, dict, "an object")
            return {key(name): _at(name, item, element) for name, element in value.items()}

        return convert

    def _key(self, tp: Any) -> Converter:
        bare, _ = kinds.strip_annotated(tp)
        if bare is int:

            def to_int(name: str) -> int:
                try:
                    return int(name)
                except ValueError:
                    raise ConversionError(f"expected an integer key, got {preview(name)}") from None

            return to_int
        return self._require(tp)

    def _pydantic(self, cls: Any) -> Converter:
        validate = cls.model_validate

        def convert(value: Any) -> Any:
            try:
                return validate(value)
            except ValueError as error:
                problems = error.errors() if hasattr(error, "errors") else []
                if not problems:
                    raise _fail(f"invalid {cls.__name__}: {error}") from None
                first = problems[0]
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise ConversionError(f"{first['msg']}{more}", list(first.get("loc", ()))) from None

        return convert

    def _class(self, cls: type) -> Converter:
        cell: list[Converter] = []
        self._cells[cls] = cell
        if kinds.is_typeddict(cls):
            fields = [(name, self.build(tp), required) for name, tp, required in kinds.typeddict_fields(cls)]
        else:
            fields = self._constructor_fields(cls)
        converting = [(name, convert) for name, convert, _ in fields if convert is not None]
        required = [name for name, _, is_required in fields if is_required]
        known = frozenset(name for name, _, _ in fields)
        label = cls.__name__

        def convert_fields(value: Any, keep_unknown: bool) -> dict[str, Any]:
            _expect(value, dict, "an object")
            for name in required:
                if name not in value:
                    raise _fail(f"missing required property '{name}'")
            # Unknown keys are dropped, as pydantic does by default: the schema leaves objects open.
            out = dict(value) if keep_unknown else {name: v for name, v in value.items() if name in known}
            for name, convert in converting:
                if name in out:
                    out[name] = _at(name, convert, out[name])
            return out

        if kinds.is_typeddict(cls):
            cell.append(lambda value: convert_fields(value, keep_unknown=True))
        else:

            def construct(value: Any) -> Any:
                kwargs = convert_fields(value, keep_unknown=False)
                try:
                    return cls(**kwargs)
                except (TypeError, ValueError) as error:  # e.g. a check in __post_init__
                    raise _fail(f"invalid {label}: {error}") from None

            cell.append(construct)
        return cell[0]

    def _constructor_fields(self, cls: type) -> list[tuple[str, Converter | None, bool]]:
        hints = kinds.class_hints(cls)
        if kinds.is_namedtuple(cls):
            defaults = cls._field_defaults  # type: ignore[attr-defined]
            return [(name, self.build(hints.get(name, Any)), name not in defaults) for name in cls._fields]  # type: ignore[attr-defined]
        return [
            (field.name, self.build(hints.get(field.name, Any)), not kinds.has_default(field))
            for field in kinds.init_fields(cls)
        ]


def _identity(value: Any) -> Any:
    return value


_SHAPE_NAMES: dict[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    kinds.NoneType: "null",
}


def _shapes(tp: Any) -> frozenset[type]:
    """The JSON shapes (as orjson's Python types) a value of ``tp`` can arrive in."""
    tp, _ = kinds.strip_annotated(tp)
    if tp in (Any, object) or kinds.is_signature_empty(tp):
        return _ALL_SHAPES
    if tp is None or tp is kinds.NoneType:
        return frozenset({kinds.NoneType})
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return frozenset(type(arg.value if isinstance(arg, enum.Enum) else arg) for arg in typing.get_args(tp))
    if kinds.is_union(tp):
        return frozenset().union(*(_shapes(arg) for arg in typing.get_args(tp)))
    if isinstance(tp, type):
        if issubclass(tp, enum.Enum):
            return frozenset(type(member.value) for member in tp)
        if tp is bool:
            return frozenset({bool})
        if tp is int:
            return _NUMBER  # a whole-number float is an integer to JSON Schema
        if tp is float or kinds.inherits(tp, "decimal", "Decimal"):
            return _NUMBER
        if (
            issubclass(tp, (str, bytes, bytearray, *_ISO_TYPES))
            or kinds.inherits(tp, "pathlib", "PurePath")
            or kinds.inherits(tp, "uuid", "UUID")
        ):
            return frozenset({str})
        if kinds.is_namedtuple(tp) or kinds.is_dataclass_type(tp) or kinds.is_typeddict(tp) or issubclass(tp, dict):
            return frozenset({dict})
        if issubclass(tp, list | tuple | set | frozenset):
            return frozenset({list})
        if kinds.is_pydantic_model(tp):
            return _ALL_SHAPES  # a RootModel may take any shape; model_validate decides
    if origin in kinds.MAPPING_ORIGINS:
        return frozenset({dict})
    if origin in kinds.LIST_ORIGINS or origin in kinds.SET_ORIGINS or origin is tuple:
        return frozenset({list})
    if kinds.is_dataclass_type(origin) or kinds.is_typeddict(origin):
        return frozenset({dict})
    return _ALL_SHAPES
