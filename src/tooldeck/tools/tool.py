"""The Tool record: everything known about a tool at registration, including its wire form and validators.

A Tool is not changed after registration. Its schemas are compiled to validators here, once; the schema that is advertised is the schema
that is enforced. Names, annotations, icons and task support are checked here, with errors that say what to fix; so
are the ``x-mcp-header`` annotations of the input schema (``headers.py``), listed once as ``mirrored``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.errors import RegistrationError, SchemaError
from ..protocol.record import Record
from ..schema.validate import Validator
from .headers import MirroredParam, mirrored_params

TASK_SUPPORT = ("forbidden", "optional", "required")
_ANNOTATION_KEYS = {
    "title": "title",
    "readOnlyHint": "readOnlyHint",
    "read_only_hint": "readOnlyHint",
    "destructiveHint": "destructiveHint",
    "destructive_hint": "destructiveHint",
    "idempotentHint": "idempotentHint",
    "idempotent_hint": "idempotentHint",
    "openWorldHint": "openWorldHint",
    "open_world_hint": "openWorldHint",
}


class Tool(Record):
    """A registered tool. ``fn`` is called with validated, converted keyword arguments; ``wire`` is its listing."""

    __slots__ = (
        "name", "fn", "is_async", "description", "input_schema", "output_schema", "wraps_output", "input_validator",
        "output_validator", "title", "annotations", "icons", "task_support", "meta", "injected", "converters", "wire",
        "immediate_response", "timeout", "version", "security_level", "scopes", "definition", "ask_before_task",
        "mirrored", "plain_output",
    )  # fmt: skip

    def __init__(
        self,
        *,
        name: str,
        fn: Callable[..., Any],
        is_async: bool,
        description: str | None,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None,
        wraps_output: bool,
        input_validator: Validator,
        output_validator: Validator | None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: tuple[dict[str, Any], ...] | None = None,
        task_support: str = "forbidden",
        meta: dict[str, Any] | None = None,
        injected: dict[str, type] | None = None,
        converters: dict[str, Callable[[Any], Any]] | None = None,
        immediate_response: str | None = None,
        timeout: float | None = None,
        version: str | None = None,
        security_level: int | None = None,
        scopes: tuple[str, ...] = (),
        definition: Any = None,
        ask_before_task: bool = False,
    ) -> None:
        self.name = name
        self.fn = fn
        self.is_async = is_async
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.wraps_output = wraps_output
        self.input_validator = input_validator
        self.output_validator = output_validator
        self.title = title
        self.annotations = annotations
        self.icons = icons
        self.task_support = task_support
        self.meta = meta
        self.injected = injected or {}
        self.converters = converters or {}
        self.immediate_response = immediate_response
        self.timeout = timeout  # None: the server's default applies
        self.version = version
        self.security_level = security_level  # None: the policy's default applies
        self.scopes = scopes
        self.definition = definition  # the tool definition (seed 002) this tool serves a capability of, if any
        self.ask_before_task = ask_before_task  # runs in its request until ctx.continue_as_task() (tasks extension)
        # the parameters Streamable HTTP clients mirror into Mcp-Param-* headers (2026-07-28); () for most tools
        self.mirrored: tuple[MirroredParam, ...] = mirrored_params(input_schema, name)
        # the one type a wrapped result of this schema must have, when that type says all the schema says
        self.plain_output: type | None = _plain_output(output_schema) if wraps_output else None
        self.wire = wire_form(self)


_PLAIN = {"string": str, "integer": int, "boolean": bool}


def _plain_output(schema: dict[str, Any] | None) -> type | None:
    """For ``{"type": "object", "properties": {"result": {"type": T}}, "required": ["result"]}`` with T a string,
    an integer or a boolean, and nothing else: the Python type whose values are exactly the valid results (an exact
    type: ``True`` is no integer here). None for any other schema, which is validated as it is."""
    if schema is None or schema.keys() != {"type", "properties", "required"} or schema["type"] != "object":
        return None
    properties, required = schema["properties"], schema["required"]
    if type(properties) is not dict or properties.keys() != {"result"} or required != ["result"]:
        return None
    result = properties["result"]
    if type(result) is not dict or result.keys() != {"type"} or type(result["type"]) is not str:
        return None
    return _PLAIN.get(result["type"])


def normalize_annotations(annotations: Any, tool: str) -> dict[str, Any] | None:
    """Tool annotations in wire form; accepts camelCase or snake_case keys, refuses unknown ones and non-booleans."""
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise RegistrationError(f"tool {tool!r}: annotations must be a dict, got {type(annotations).__name__}")
    wire: dict[str, Any] = {}
    for key, value in annotations.items():
        wire_key = _ANNOTATION_KEYS.get(key)
        if wire_key is None:
            known = "title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint"
            raise RegistrationError(f"tool {tool!r}: unknown annotation {key!r} (known: {known})")
        expected = str if wire_key == "title" else bool
        if not isinstance(value, expected):
            raise RegistrationError(f"tool {tool!r}: annotation {key!r} must be a {expected.__name__}")
        wire[wire_key] = value
    return wire


def check_task_support(task: Any, tool: str) -> str:
    if task is None or task is False:
        return "forbidden"
    if task is True:
        return "optional"
    if task not in TASK_SUPPORT:
        raise RegistrationError(f"tool {tool!r}: task must be one of {', '.join(TASK_SUPPORT)}, got {task!r}")
    return str(task)


def check_ask_before_task(ask: Any, tool: str, task: Any) -> bool:
    """``ask_before_task`` is a bool, and only for a tool that may run as a task."""
    if ask is None or ask is False:
        return False
    if ask is not True:
        raise RegistrationError(f"tool {tool!r}: ask_before_task must be True or False, got {ask!r}")
    if check_task_support(task, tool) == "forbidden":
        raise RegistrationError(f'tool {tool!r}: ask_before_task needs task="optional" or task="required"')
    return True


def check_timeout(timeout: Any, owner: str) -> float | None:
    """None (no limit of its own) or a positive number of seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise RegistrationError(f"{owner}: timeout must be a positive number of seconds or None, got {timeout!r}")
    return float(timeout)


def check_version(version: Any, owner: str) -> str | None:
    """A semantic version (checked by the semver library, imported only when a tool has a version)."""
    if version is None:
        return None
    import semver

    if not isinstance(version, str) or not semver.Version.is_valid(version):
        raise RegistrationError(f"{owner}: version must be a semantic version like '1.2.0', got {version!r}")
    return version


def compile_schema(schema: Any, tool: str, which: str, *, trusted: bool = False) -> Validator:
    """A validator for an advertised schema; ``trusted`` (generated by tooldeck) ones compile at first use."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise RegistrationError(f'tool {tool!r}: {which} must be a JSON Schema object with "type": "object"')
    try:
        return Validator(schema, trusted=trusted)
    except SchemaError as exc:
        raise RegistrationError(f"tool {tool!r}: {which} is not usable: {exc}") from None


def wire_form(tool: Tool) -> dict[str, Any]:
    """The Tool object as tools/list sends it."""
    wire: dict[str, Any] = {"name": tool.name}
    if tool.title is not None:
        wire["title"] = tool.title
    if tool.description is not None:
        wire["description"] = tool.description
    wire["inputSchema"] = tool.input_schema
    if tool.output_schema is not None:
        wire["outputSchema"] = tool.output_schema
    if tool.annotations:
        wire["annotations"] = tool.annotations
    if tool.icons:
        wire["icons"] = list(tool.icons)
    if tool.task_support != "forbidden":
        wire["execution"] = {"taskSupport": tool.task_support}
    meta = tool.meta
    if tool.version is not None or tool.security_level is not None or tool.scopes:
        meta = dict(meta or {})
        if tool.version is not None:
            meta["tooldeck/version"] = tool.version
        if tool.security_level is not None:
            meta["tooldeck/securityLevel"] = tool.security_level
        if tool.scopes:
            meta["tooldeck/scopes"] = list(tool.scopes)
    if meta:
        wire["_meta"] = meta
    return wire
