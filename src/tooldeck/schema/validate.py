"""Compiled JSON Schema validators, and failure messages that say what was wrong and where.

``Validator.is_valid`` is the compiled jsonschema_rs check itself, so the hot path costs one native call. Only when
it says no does ``errors`` walk the failures and word them: ``$.items[2].name: expected string, got 3``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tooldeck.protocol.errors import SchemaError
from tooldeck.schema.paths import format_path, path_key, preview

if TYPE_CHECKING:
    import jsonschema_rs

MAX_ERRORS = 20
_MAX_OPTIONS = 10

# $schema (without scheme and trailing "#") -> (dialect name, jsonschema_rs validator class name)
_DIALECTS: dict[str, tuple[str, str]] = {
    "json-schema.org/draft/2020-12/schema": ("2020-12", "Draft202012Validator"),
    "json-schema.org/draft/2019-09/schema": ("2019-09", "Draft201909Validator"),
    "json-schema.org/draft-07/schema": ("draft-07", "Draft7Validator"),
    "json-schema.org/draft-06/schema": ("draft-06", "Draft6Validator"),
    "json-schema.org/draft-04/schema": ("draft-04", "Draft4Validator"),
}
SUPPORTED_DIALECTS = tuple(f"https://{uri}" for uri in _DIALECTS)

Line = tuple[tuple[Any, ...], str]  # (sort key, message)


class Validator:
    """A JSON Schema compiled once; ``is_valid`` for the hot path, ``errors`` to explain a failure.

    The dialect comes from ``$schema`` (2020-12 when absent). The schema is checked against its dialect's
    meta-schema first, so a broken schema fails here, at registration, not at the first call. Remote ``$ref``s are
    never fetched. ``validate_formats`` follows the dialect unless given (2020-12 treats ``format`` as a note).
    """

    __slots__ = ("_compiled", "dialect", "is_valid", "schema")

    is_valid: Callable[[Any], bool]
    """Whether ``instance`` is valid: the compiled validator's own method, with nothing in between."""

    def __init__(self, schema: dict[str, Any], *, validate_formats: bool | None = None) -> None:
        if not isinstance(schema, dict):
            raise SchemaError(f"a JSON Schema must be an object, got {preview(schema)}")
        # Imported on first use: jsonschema_rs loads the email package, a cost start-up should not pay.
        import jsonschema_rs

        self.schema = schema
        self.dialect, class_name = _dialect(schema)
        validator_class: type[jsonschema_rs.Validator] = getattr(jsonschema_rs, class_name)
        try:
            jsonschema_rs.meta.validate(schema)
        except jsonschema_rs.ValidationError as error:
            reason = _describe(error)[0][1]
            raise SchemaError(f"invalid JSON Schema ({self.dialect}): {reason}") from None
        except jsonschema_rs.ReferencingError as error:
            raise SchemaError(f"invalid JSON Schema ({self.dialect}): {error}") from None
        try:
            self._compiled = validator_class(schema, validate_formats=validate_formats, offline=True)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as error:
            message = getattr(error, "message", None) or str(error).splitlines()[0]
            raise SchemaError(f"cannot compile JSON Schema: {message}") from None
        self.is_valid = self._compiled.is_valid

    def errors(self, instance: Any) -> list[str]:
        """One line per failure, ``$.path: what was wrong``, sorted by path; empty when the instance is valid."""
        lines = sorted(_lines(self._compiled.iter_errors(instance)))
        unique = list(dict.fromkeys(message for _, message in lines))
        if len(unique) > MAX_ERRORS:
            return [*unique[:MAX_ERRORS], f"... and {len(unique) - MAX_ERRORS} more"]
        return unique

    def __repr__(self) -> str:
        return f"<Validator {self.dialect} {preview(self.schema)}>"


def _dialect(schema: dict[str, Any]) -> tuple[str, str]:
    uri = schema.get("$schema")
    if uri is None:
        return _DIALECTS["json-schema.org/draft/2020-12/schema"]
    if isinstance(uri, str):
        key = uri.removeprefix("https://").removeprefix("http://").removesuffix("#")
        if key in _DIALECTS:
            return _DIALECTS[key]
    # Checked before the meta-schema, which would otherwise try to download an unknown dialect.
    raise SchemaError(f"unsupported JSON Schema dialect {uri!r} (supported: {', '.join(SUPPORTED_DIALECTS)})")


# -- wording -------------------------------------------------------------------------------------------------------


def _lines(errors: Iterable[jsonschema_rs.ValidationError]) -> list[Line]:
    out: list[Line] = []
    for error in errors:
        out.extend(_describe(error))
    return out


def _describe(error: jsonschema_rs.ValidationError) -> list[Line]:
    path = error.instance_path
    key = path_key(path)
    where = format_path(path)
    kind = error.kind
    name = type(kind).__name__
    if name == "Required":
        return [(key, f"{where}: missing required property '{kind.property}'")]  # type: ignore[attr-defined]
    if name in ("AdditionalProperties", "UnevaluatedProperties"):
        return [(key, f"{where}: unexpected property '{prop}'") for prop in kind.unexpected]  # type: ignore[attr-defined]
    if name in ("AnyOf", "OneOfNotValid"):
        return _alternatives(error, "anyOf" if name == "AnyOf" else "oneOf")
    if name == "OneOfMultipleValid":
        return [(key, f"{where}: matches more than one oneOf alternative, got {preview(error.instance)}")]
    if name == "FalseSchema":
        return [(key, f"{where}: no value is allowed here, got {preview(error.instance)}")]
    expected = _expectation(error)
    if expected is not None:
        return [(key, f"{where}: expected {expected}, got {preview(error.instance)}")]
    counted = _count_message(error)
    if counted is not None:
        return [(key, f"{where}: {counted}")]
    return [(key, f"{where}: {error.message}")]


def _expectation(error: jsonschema_rs.ValidationError) -> str | None:
    """What the failing keyword wanted, for the kinds worded ``expected <this>, got <value>``."""
    kind: Any = error.kind
    name = type(kind).__name__
    if name == "Type":
        return _join_or(list(kind.types))
    if name == "Constant":
        return preview(kind.expected_value)
    if name == "Enum":
        options = [preview(option) for option in kind.options[:_MAX_OPTIONS]]
        if len(kind.options) > _MAX_OPTIONS:
            options.append("...")
        return "one of " + ", ".join(options)
    if name in _BOUNDS:
        return f"a number {_BOUNDS[name]} {preview(kind.limit)}"
    if name == "MultipleOf":
        return f"a multiple of {preview(kind.multiple_of)}"
    if name == "MinLength":
        return f"at least {_plural(kind.limit, 'character')}"
    if name == "MaxLength":
        return f"at most {_plural(kind.limit, 'character')}"
    if name == "Pattern":
        return f"a string matching '{kind.pattern}'"
    if name == "Format":
        return f"a string in {kind.format} format"
    if name == "UniqueItems":
        return "unique items"
    return None


_BOUNDS = {"Minimum": ">=", "Maximum": "<=", "ExclusiveMinimum": ">", "ExclusiveMaximum": "<"}


def _count_message(error: jsonschema_rs.ValidationError) -> str | None:
    """Size limits on arrays and objects: say how many there were, not what they were."""
    kind: Any = error.kind
    name = type(kind).__name__
    size = len(error.instance) if isinstance(error.instance, list | dict) else 0
    if name == "MinItems":
        return f"expected at least {_plural(kind.limit, 'item')}, got {size}"
    if name == "MaxItems":
        return f"expected at most {_plural(kind.limit, 'item')}, got {size}"
    if name == "MinProperties":
        return f"expected at least {_plural(kind.limit, 'property', 'properties')}, got {size}"
    if name == "MaxProperties":
        return f"expected at most {_plural(kind.limit, 'property', 'properties')}, got {size}"
    return None


def _alternatives(error: jsonschema_rs.ValidationError, keyword: str) -> list[Line]:
    """anyOf/oneOf with no match: one ``expected A or B`` line when every branch failed on the value's type
    (the usual ``X | None``); the branch's own errors when exactly one branch got past that; else a summary."""
    path = error.instance_path
    shallow: list[str] = []
    deep: list[list[jsonschema_rs.ValidationError]] = []
    for branch in error.kind.context:  # type: ignore[attr-defined]
        expected = _expectation(branch[0]) if len(branch) == 1 and branch[0].instance_path == path else None
        if expected is not None and type(branch[0].kind).__name__ in ("Type", "Constant", "Enum"):
            if expected not in shallow:
                shallow.append(expected)
        else:
            deep.append(branch)
    key = path_key(path)
    where = format_path(path)
    if not deep:
        return [(key, f"{where}: expected {_join_or(shallow)}, got {preview(error.instance)}")]
    if len(deep) == 1:
        return _lines(deep[0])
    count = len(error.kind.context)  # type: ignore[attr-defined]
    summary = (key, f"{where}: matches none of the {count} {keyword} alternatives, got {preview(error.instance)}")
    return [summary, *(line for branch in deep for line in _lines(branch))]


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} or {words[-1]}"


def _plural(count: Any, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"
