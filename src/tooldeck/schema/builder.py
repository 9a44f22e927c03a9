"""The walk from a Python annotation to a JSON Schema: one SchemaBuilder per ``$defs`` mapping.

Named types (dataclasses, TypedDicts, NamedTuples, enums, pydantic models) go into ``$defs`` under their class name
and are referenced with ``$ref``, which is what lets a type refer to itself. Two different classes that share a name
get ``Name``, ``Name2``, ...: a name is reused only when the schema already stored under it is identical.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from tooldeck.protocol.errors import SchemaError
from tooldeck.schema import kinds
from tooldeck.schema.docstring import cleandoc, parse_docstring
from tooldeck.schema.jsonvalue import json_value
from tooldeck.schema.names import type_name

Schema = dict[str, Any]
Mode = Literal["validation", "serialization"]

# datetime is imported, unlike the modules below: orjson, which tooldeck cannot run without, imports it anyway.
_SCALARS: dict[Any, Schema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    kinds.NoneType: {"type": "null"},
    None: {"type": "null"},
    dt.datetime: {"type": "string", "format": "date-time"},
    dt.date: {"type": "string", "format": "date"},
    dt.time: {"type": "string", "format": "time"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    bytearray: {"type": "string", "contentEncoding": "base64"},
}
# Scalars from modules tooldeck does not import (see kinds.loaded), found by module and class name.
# Decimal is a JSON number: models and clients read numbers, and json_default writes a Decimal's exact digits.
_UNIMPORTED_SCALARS: tuple[tuple[str, str, Schema], ...] = (
    ("uuid", "UUID", {"type": "string", "format": "uuid"}),
    ("decimal", "Decimal", {"type": "number"}),
)
_ANY: frozenset[Any] = frozenset({Any, object})
_NUMERIC_CONSTRAINTS = (("gt", "exclusiveMinimum"), ("ge", "minimum"), ("lt", "exclusiveMaximum"), ("le", "maximum"))
_LENGTH_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
# Characters a $defs name keeps; any other becomes "_". A set rather than a regex: compiling one costs start-up time.
_DEF_NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def type_repr(tp: Any) -> str:
    """A short readable name for an annotation, for messages."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "").replace("collections.abc.", "")


class SchemaBuilder:
    """Builds schemas into one ``defs`` mapping; remembers which class got which name while it lives."""

    def __init__(self, defs: dict[str, Schema], mode: Mode, subject: str) -> None:
        self.defs = defs
        self.mode = mode
        self.subject = subject
        self._names: dict[Any, str] = {}
        self._reserved: set[str] = set()  # names of classes whose schema is still being built
        self._where: list[str] = []

    def fail(self, reason: str) -> SchemaError:
        where = f", field {self._where[-1]}" if self._where else ""
        return SchemaError(f"cannot build a JSON Schema for {self.subject}{where}: {reason}")

    @contextmanager
    def at(self, where: str) -> Iterator[None]:
        self._where.append(where)
        try:
            yield
        finally:
            self._where.pop()

    def schema(self, tp: Any) -> Schema:
        """A fresh schema dict for ``tp``: callers may add keys to it."""
        bare, metadata = kinds.strip_annotated(tp)
        try:
            schema = self._bare(bare)
        except SchemaError:
            if not any(isinstance(meta, dict) for meta in metadata):
                raise
            schema = {}  # the raw fragment in the metadata describes the type instead
        for meta in metadata:
            self._apply(schema, meta)
        return schema

    def _bare(self, tp: Any) -> Schema:
        try:
            hash(tp)
        except TypeError:
            raise self.fail(f"{tp!r} is not a type") from None
        scalar = _SCALARS.get(tp)
        if scalar is not None:
            return dict(scalar)
        if _is_any(tp):
            return {}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Literal:
            return self._literal(args)
        if kinds.is_union(tp):
            return self._union(args)
        if origin in kinds.LIST_ORIGINS or tp in kinds.LIST_ORIGINS:
            return self._array(args[0] if args else Any)
        if tp in kinds.SET_ORIGINS or origin in kinds.SET_ORIGINS:
            return {**self._array(args[0] if args else Any), "uniqueItems": True}
        if tp is tuple or tp is typing.Tuple:  # noqa: UP006 - the bare alias means "any tuple"
            return {"type": "array"}
        if origin is tuple:
            return self._tuple(args)
        if tp in kinds.MAPPING_ORIGINS or origin in kinds.MAPPING_ORIGINS:
            return self._mapping(args)
        if isinstance(tp, typing.TypeVar):
            return self._typevar(tp)
        if isinstance(tp, type):
            return self._class(tp)
        if kinds.is_dataclass_type(origin) or kinds.is_typeddict(origin) or kinds.is_namedtuple(origin):
            raise self.fail(f"generic {type_repr(tp)} is not supported; use a concrete (non-generic) class")
        if origin is not None:
            raise self.fail(f"{type_repr(tp)} cannot be passed as JSON")
        raise self.fail(f"{tp!r} is not a type")

    def _class(self, cls: type) -> Schema:
        if issubclass(cls, enum.Enum):
            return self._named(cls, lambda: self._enum(cls))
        if kinds.is_pydantic_model(cls):
            return self._pydantic(cls)
        if kinds.is_dataclass_type(cls) or kinds.is_namedtuple(cls) or kinds.is_typeddict(cls):
            return self._named(cls, lambda: self._object(cls))
        for base, schema in _SCALARS.items():
            # Subclasses of str, int, datetime, ... (enums were handled first, so an IntEnum is not a plain int).
            if isinstance(base, type) and base is not kinds.NoneType and issubclass(cls, base):
                return dict(schema)
        for module, name, schema in _UNIMPORTED_SCALARS:
            if kinds.inherits(cls, module, name):
                return dict(schema)
        if kinds.inherits(cls, "pathlib", "PurePath"):
            return {"type": "string"}
        if issubclass(cls, list | tuple):
            return {"type": "array"}
        if issubclass(cls, dict):
            return {"type": "object"}
        if cls.__module__ in ("builtins", "typing", "collections.abc", "types"):
            raise self.fail(f"{type_repr(cls)} cannot be passed as JSON")
        raise self.fail(
            f"{type_repr(cls)} is a plain class; use a dataclass, TypedDict, NamedTuple or pydantic model, "
            "or describe it with Annotated[..., {<JSON Schema>}]"
        )

    # -- named types -------------------------------------------------------------------------------------------

    def _named(self, cls: Any, build: Callable[[], Schema]) -> Schema:
        """Register ``cls`` in ``defs`` (building it once, recursion-safe) and return a ``$ref`` to it."""
        name = self._names.get(cls)
        if name is not None:
            return {"$ref": f"#/$defs/{name}"}
        base = "".join(char if char in _DEF_NAME_CHARACTERS else "_" for char in cls.__name__)
        for number in range(1, 1000):
            candidate = base if number == 1 else f"{base}{number}"
            if candidate in self._reserved:
                continue
            defs_before, names_before = set(self.defs), dict(self._names)
            self._names[cls] = candidate
            self._reserved.add(candidate)
            try:
                schema = build()
            finally:
                self._reserved.discard(candidate)
            existing = self.defs.get(candidate)
            if existing is None or existing == schema:
                self.defs[candidate] = schema
                return {"$ref": f"#/$defs/{candidate}"}
            # Another class owns this name: undo what this attempt added (its $refs point at the wrong name).
            for added in set(self.defs) - defs_before:
                del self.defs[added]
            self._names = names_before
        raise self.fail(f"too many classes named {base!r}")

    def _enum(self, cls: type[enum.Enum]) -> Schema:
        values = []
        for member in cls:
            ok, value = json_value(member.value)
            if not ok or not isinstance(value, str | int | float | bool | None):
                raise self.fail(f"{type_repr(cls)}.{member.name} has a value JSON cannot hold: {member.value!r}")
            values.append(value)
        schema: Schema = {}
        types = _json_types(values)
        if len(types) == 1:
            schema["type"] = types[0]
        schema["enum"] = values
        doc = kinds.declared_doc(cls)
        if doc:
            schema["description"] = cleandoc(doc)
        return schema

    def _object(self, cls: type) -> Schema:
        try:
            hints = kinds.class_hints(cls)
        except Exception as error:  # NameError for an unresolvable forward reference, mostly
            raise self.fail(f"cannot resolve the annotations of {type_repr(cls)}: {error}") from None
        description, field_docs = parse_docstring(kinds.declared_doc(cls), for_class=True)
        fields: list[tuple[str, Any, bool, Any, str | None]] = []  # name, type, required, default, description
        missing = kinds.NO_DEFAULT
        if kinds.is_typeddict(cls):
            fields = [(name, tp, required, missing, None) for name, tp, required in kinds.typeddict_fields(cls)]
        elif kinds.is_namedtuple(cls):
            defaults = cls._field_defaults  # type: ignore[attr-defined]
            for name in cls._fields:  # type: ignore[attr-defined]
                fields.append((name, hints.get(name, Any), name not in defaults, defaults.get(name, missing), None))
        else:
            for field in kinds.init_fields(cls):
                doc = field.metadata.get("description")
                default = kinds.field_default(field)
                fields.append((field.name, hints[field.name], not kinds.has_default(field), default, doc))
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for name, tp, is_required, default, doc in fields:
            with self.at(f"{cls.__qualname__}.{name}"):
                schema = self.schema(tp)
            doc = doc or field_docs.get(name)
            if doc and "description" not in schema:
                schema["description"] = doc
            if default is not missing:
                set_default(schema, default)
            if is_required:
                required.append(name)
            properties[name] = schema
        result: Schema = {"type": "object", "properties": properties}
        if required:
            result["required"] = required
        if description:
            result["description"] = description
        return result

    def _pydantic(self, cls: Any) -> Schema:
        try:
            raw = cls.model_json_schema(ref_template="#/$defs/{model}", mode=self.mode)
        except Exception as error:
            raise self.fail(f"pydantic cannot build a schema for {type_repr(cls)}: {error}") from None
        sub_defs: dict[str, Schema] = raw.pop("$defs", {})
        rename = self._merge_renames(sub_defs)
        for name, schema in sub_defs.items():
            self.defs[rename.get(name, name)] = _rename_refs(schema, rename)
        root = _rename_refs(raw, rename)
        if set(root) == {"$ref"}:  # recursive models come back as a reference into their own $defs
            return root
        return self._named(cls, lambda: root)

    def _merge_renames(self, incoming: dict[str, Schema]) -> dict[str, str]:
        """New names for the incoming definitions that would overwrite a different schema already in ``defs``."""
        rename: dict[str, str] = {}
        changed = True
        while changed:  # renaming one definition changes the $refs inside others, which may then clash too
            changed = False
            for name, schema in incoming.items():
                if name in rename:
                    continue
                clash = name in self._reserved or (
                    name in self.defs and self.defs[name] != _rename_refs(schema, rename)
                )
                if clash:
                    taken = set(self.defs) | set(incoming) | set(rename.values()) | self._reserved
                    rename[name] = next(f"{name}{n}" for n in range(2, 10_000) if f"{name}{n}" not in taken)
                    changed = True
        return rename

    # -- structural types --------------------------------------------------------------------------------------

    def _literal(self, args: tuple[Any, ...]) -> Schema:
        values = []
        for arg in args:
            value = arg.value if isinstance(arg, enum.Enum) else arg
            if not isinstance(value, str | int | float | bool | None):
                raise self.fail(f"Literal value {arg!r} cannot be written in JSON")
            values.append(value)
        types = _json_types(values)
        schema: Schema = {"const": values[0]} if len(values) == 1 else {"enum": values}
        if len(types) == 1:
            schema["type"] = types[0]
        return schema

    def _union(self, args: tuple[Any, ...]) -> Schema:
        members: list[Schema] = []
        for arg in args:
            member = self.schema(arg)
            if not member:
                return {}  # Any absorbs the rest
            if member not in members:
                members.append(member)
        if all(set(member) == {"type"} for member in members):
            types: list[str] = []
            for member in members:
                for name in member["type"] if isinstance(member["type"], list) else [member["type"]]:
                    if name not in types:
                        types.append(name)
            return {"type": types[0] if len(types) == 1 else types}
        return {"anyOf": members}

    def _array(self, item: Any) -> Schema:
        items = self.schema(item)
        return {"type": "array", "items": items} if items else {"type": "array"}

    def _tuple(self, args: tuple[Any, ...]) -> Schema:
        if len(args) == 2 and args[1] is Ellipsis:
            return self._array(args[0])
        if not args or args == ((),):  # tuple[()]: Python 3.11 reports no arguments at all
            return {"type": "array", "maxItems": 0}
        return {
            "type": "array",
            "prefixItems": [self.schema(arg) for arg in args],
            "minItems": len(args),
            "maxItems": len(args),
        }

    def _mapping(self, args: tuple[Any, ...]) -> Schema:
        schema: Schema = {"type": "object"}
        if not args:
            return schema
        key_tp, value_tp = args
        bare_key, _ = kinds.strip_annotated(key_tp)
        if bare_key is int:
            schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}
        elif bare_key is not str and not _is_any(bare_key):
            key = self.schema(key_tp)
            if not (self._types_of(key) or {""}) <= {"string"}:
                raise self.fail(f"dict keys are strings in JSON; {type_repr(key_tp)} keys cannot be")
            schema["propertyNames"] = key
        values = self.schema(value_tp)
        if values:
            schema["additionalProperties"] = values
        return schema

    def _typevar(self, tp: typing.TypeVar) -> Schema:
        if tp.__bound__ is not None:
            return self.schema(tp.__bound__)
        if tp.__constraints__:
            return self._union(tp.__constraints__)
        return {}

    # -- Annotated metadata ------------------------------------------------------------------------------------

    def _apply(self, schema: Schema, meta: Any) -> None:
        if isinstance(meta, str):
            schema["description"] = meta
        elif isinstance(meta, dict):
            ok, fragment = json_value(meta)
            if not ok:
                raise self.fail(f"the schema fragment {meta!r} is not JSON")
            schema.update(fragment)
        elif all(hasattr(meta, name) for name in ("description", "title", "examples", "metadata")):
            self._apply_field_info(schema, meta)
        else:
            self._apply_constraints(schema, meta)

    def _apply_field_info(self, schema: Schema, info: Any) -> None:
        """A pydantic ``Field(...)``: its documentation and the constraints it carries."""
        for name in ("title", "description"):
            value = getattr(info, name)
            if isinstance(value, str):
                schema[name] = value
        if info.examples is not None:
            ok, examples = json_value(list(info.examples))
            if ok:
                schema["examples"] = examples
        for meta in info.metadata:
            self._apply(schema, meta)
        extra = getattr(info, "json_schema_extra", None)
        if isinstance(extra, dict):
            self._apply(schema, extra)

    def _apply_constraints(self, schema: Schema, meta: Any) -> None:
        """annotated_types-style constraints (Gt, Ge, MinLen, Len, Interval, ...), read by attribute name."""
        for attribute, keyword in _NUMERIC_CONSTRAINTS:
            value = getattr(meta, attribute, None)
            if value is not None:
                schema[keyword] = self._number(meta, value)
        multiple_of = getattr(meta, "multiple_of", None)
        if multiple_of is not None:
            schema["multipleOf"] = self._number(meta, multiple_of)
        min_length, max_length = getattr(meta, "min_length", None), getattr(meta, "max_length", None)
        if min_length or max_length is not None:
            types = self._types_of(schema) or set(_LENGTH_KEYWORDS)
            for type_name, (min_keyword, max_keyword) in _LENGTH_KEYWORDS.items():
                if type_name in types:
                    if min_length:
                        schema[min_keyword] = self._number(meta, min_length)
                    if max_length is not None:
                        schema[max_keyword] = self._number(meta, max_length)
        pattern = getattr(meta, "pattern", None)
        if pattern is not None:
            schema["pattern"] = pattern if isinstance(pattern, str) else pattern.pattern

    def _number(self, meta: Any, value: Any) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"the constraint {meta!r} is not a number JSON Schema can check")
        return value

    def _types_of(self, schema: Schema, depth: int = 0) -> set[str]:
        """The JSON types a schema admits, as far as can be told cheaply; empty when unknown."""
        declared = schema.get("type")
        if isinstance(declared, str):
            return {declared}
        if isinstance(declared, list):
            return set(declared)
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
            target = self.defs.get(ref.removeprefix("#/$defs/"))
            return self._types_of(target, depth + 1) if target is not None else set()
        if "anyOf" in schema:
            member_types = [self._types_of(member, depth + 1) for member in schema["anyOf"]]
            return set().union(*member_types) if all(member_types) else set()
        return set()


def _is_any(tp: Any) -> bool:
    """Whether ``tp`` admits any value: ``Any``, ``object``, or the no-annotation marker ``inspect.Parameter.empty``."""
    return tp in _ANY or kinds.is_signature_empty(tp)


def _json_types(values: list[Any]) -> list[str]:
    """The distinct JSON types of some literal values, with integer folded into number when both occur."""
    types: list[str] = []
    for value in values:
        name = type_name(value)  # a JSON scalar: the callers refuse anything else
        if name not in types:
            types.append(name)
    if set(types) == {"integer", "number"}:
        return ["number"]
    return types


def set_default(schema: Schema, default: Any) -> None:
    ok, value = json_value(default)
    if ok:
        schema["default"] = value


def _rename_refs(schema: Any, rename: dict[str, str]) -> Any:
    if not rename:
        return schema
    if isinstance(schema, dict):
        out = {key: _rename_refs(value, rename) for key, value in schema.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            out["$ref"] = f"#/$defs/{rename.get(name, name)}"
        return out
    if isinstance(schema, list):
        return [_rename_refs(value, rename) for value in schema]
    return schema
