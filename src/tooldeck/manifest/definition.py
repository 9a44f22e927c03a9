"""Reading tool definition files: JSON or YAML, checked against the format's JSON Schema and the registration rules,
pinned by a digest. Every problem names its file and JSON path: ``calc.json: $.capabilities[1].name: ...``.

The registration rules (beyond the schema): the version is a semantic version; capability names are unique within a
tool and parameter names within a capability; ``<id>.<capability>`` is a valid MCP tool name; a return schema is a
usable JSON Schema; a YAML file holds only what JSON can (no dates, no non-string keys).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterable
from typing import Any

import orjson

from ..model.metadata import NAME_PATTERN
from ..protocol.errors import SchemaError, TooldeckError
from ..protocol.paths import find, format_path, preview
from ..protocol.record import Record
from ..schema.validate import Validator

SUFFIXES = (".json", ".yaml", ".yml")
_SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "definition.schema.json")
_PATH_PREFIX = re.compile(r'\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*(?=: )')
_schema_validator: Validator | None = None
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class Problem(Record):
    """One thing wrong with a definition file: where (file, JSON path) and what."""

    __slots__ = ("file", "path", "message")

    def __init__(self, file: str, path: str, message: str) -> None:
        self.file = file
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {"file": self.file, "path": self.path, "message": self.message}


class DefinitionError(TooldeckError):
    """A definition (or a set of them) that cannot be served as given; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


class Definition(Record):
    """A checked tool definition: the document as written, its id and version, and its digest (the SHA-256 of its
    canonical JSON), which pins what a version means. ``source`` is the file it came from (None: built in code);
    command handlers and ``cwd`` are relative to ``base_dir``."""

    __slots__ = ("document", "id", "version", "digest", "source", "base_dir")

    def __init__(self, document: dict[str, Any], source: str | None = None, base_dir: str | None = None) -> None:
        self.document = document
        self.id: str = document["id"]
        self.version: str = document["version"]
        self.digest = digest(document)
        self.source = source
        self.base_dir = base_dir if base_dir is not None else (os.path.dirname(source) if source else os.getcwd())

    @property
    def label(self) -> str:
        """``id@version``, as log lines and refusals name a definition."""
        return f"{self.id}@{self.version}"

    @property
    def capabilities(self) -> list[dict[str, Any]]:
        return self.document["capabilities"]

    def tool_names(self) -> list[str]:
        return [f"{self.id}.{capability['name']}" for capability in self.capabilities]

    def __repr__(self) -> str:
        return f"<Definition {self.label} {self.digest[:12]}>"


def digest(document: Any) -> str:
    """SHA-256 of the canonical JSON (keys sorted, no whitespace, UTF-8): the same definition in JSON or YAML, in any
    key order or layout, has the same digest."""
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


# --- reading --------------------------------------------------------------------------------------------------------


def load_definition(path: str | os.PathLike[str], label: str | None = None) -> Definition:
    """The checked definition in ``path``; DefinitionError lists every problem."""
    path = os.fspath(path)
    label = label or path
    document = read_document(path, label)
    # orjson reads nothing JSON cannot hold, so only YAML (and documents built in code) need that walk
    return parse_definition(document, label, source=path, json_only=not path.endswith((".yaml", ".yml")))


def parse_definition(
    document: Any, label: str = "<definition>", source: str | None = None, *, json_only: bool = False
) -> Definition:
    """``document`` (a dict as read from a file) checked and made a Definition; DefinitionError lists the problems.
    ``json_only``: it came from a JSON parser, so it holds JSON values only."""
    problems = check_document(document, label, json_only=json_only)
    if problems:
        raise DefinitionError(problems)
    return Definition(document, source)


def read_document(path: str, label: str) -> Any:
    """The JSON or YAML value in ``path`` (by its suffix; other files are read as JSON)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except IsADirectoryError:
        raise DefinitionError([Problem(label, "$", "is a directory, not a definition file")]) from None
    except FileNotFoundError:
        raise DefinitionError([Problem(label, "$", "no such file")]) from None
    except OSError as exc:
        raise DefinitionError([Problem(label, "$", f"cannot be read: {exc.strerror or exc}")]) from None
    if path.endswith((".yaml", ".yml")):
        return _read_yaml(data, label)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DefinitionError([Problem(label, "$", f"not valid JSON: {_json_reason(exc, data)}")]) from None


def _json_reason(exc: orjson.JSONDecodeError, data: bytes) -> str:
    # exc.pos counts characters of the decoded text, not bytes: lineno/colno are computed on that text
    return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"


def _read_yaml(data: bytes, label: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # safe loading only: no Python objects from a file
    try:
        return yaml.load(data, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DefinitionError([Problem(label, "$", f"not valid YAML: {problem}{where}")]) from None


# --- checking -------------------------------------------------------------------------------------------------------


def check_document(document: Any, label: str, *, json_only: bool = False) -> list[Problem]:
    """Every problem with ``document``: the schema first; the registration rules once the shape is right."""
    found = None if json_only else find(document, _not_json)
    if found is not None:
        path, value = found
        if isinstance(value, dict):
            key = next(key for key in value if not isinstance(key, str))
            message = f"key {preview(key)} is a YAML {type(key).__name__}, not a string; quote it"
            return [Problem(label, format_path(path), message)]
        if isinstance(value, float):
            message = f"{value!r} is not a JSON number; quote it to make it a string"
        elif isinstance(value, int):
            message = f"{value} does not fit in 64 bits, as JSON numbers must here; quote it to make it a string"
        else:
            message = f"a YAML {type(value).__name__} is not a JSON value; quote it to make it a string"
        return [Problem(label, format_path(path), message)]
    problems = [Problem(label, *_split(line)) for line in _validator().errors(document)]
    if problems:
        version = document.get("version") if isinstance(document, dict) else None
        if isinstance(version, int | float) and not isinstance(version, bool):
            for problem in problems:
                if problem.path == "$.version":  # YAML reads `version: 1.0` as a number
                    problem.message += '; quote it, as in version: "1.0.0"'
        return problems
    return list(_rule_problems(document, label))


def _not_json(value: Any) -> bool:
    if isinstance(value, dict):
        return any(not isinstance(key, str) for key in value)
    if isinstance(value, float):
        return not math.isfinite(value)  # YAML's .nan and .inf: no JSON number (the digest would make them null)
    if isinstance(value, int) and not isinstance(value, bool):
        return not _INT_MIN <= value <= _INT_MAX  # orjson, hence the digest and the wire, holds 64 bits
    return not isinstance(value, str | bool | list | type(None))


def _split(line: str) -> tuple[str, str]:
    match = _PATH_PREFIX.match(line)
    if match is None:
        return "$", line
    return match.group(), line[match.end() + 2 :]


def _validator() -> Validator:
    global _schema_validator
    if _schema_validator is None:
        with open(_SCHEMA_FILE, "rb") as file:
            _schema_validator = Validator(orjson.loads(file.read()))
    return _schema_validator


def format_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the definition format, as shipped in the package."""
    return _validator().schema


def _rule_problems(document: dict[str, Any], label: str) -> Iterable[Problem]:
    import semver

    version = document["version"]
    if not semver.Version.is_valid(version):
        yield Problem(
            label, "$.version", f"{preview(version)} is not a semantic version (MAJOR.MINOR.PATCH, like 1.0.0)"
        )
    tool_id = document["id"]
    if not NAME_PATTERN.fullmatch(tool_id):
        yield Problem(label, "$.id", f"{preview(tool_id)} cannot start an MCP tool name: use A-Z a-z 0-9 _ - . only")
    seen: dict[str, int] = {}
    for index, capability in enumerate(document["capabilities"]):
        where = f"$.capabilities[{index}]"
        name = capability["name"]
        if name in seen:
            yield Problem(
                label, f"{where}.name", f"capability {name!r} is already defined at $.capabilities[{seen[name]}]"
            )
        else:
            seen[name] = index
        tool_name = f"{tool_id}.{name}"
        if NAME_PATTERN.fullmatch(tool_id) and not NAME_PATTERN.fullmatch(tool_name):
            yield Problem(
                label,
                f"{where}.name",
                f"{tool_name!r} is not a valid MCP tool name: 1-128 characters of A-Z a-z 0-9 _ - .",
            )
        params: dict[str, int] = {}
        for p_index, parameter in enumerate(capability.get("parameters", ())):
            p_name = parameter["name"]
            if p_name in params:
                yield Problem(
                    label,
                    f"{where}.parameters[{p_index}].name",
                    f"parameter {p_name!r} is already defined at {where}.parameters[{params[p_name]}]",
                )
            else:
                params[p_name] = p_index
        schema = capability.get("return", {}).get("schema")
        if isinstance(schema, dict):
            try:
                Validator(schema)
            except SchemaError as exc:
                yield Problem(label, f"{where}.return.schema", str(exc))


def check_unique_ids(definitions: Iterable[Definition]) -> list[Problem]:
    """Registration rule: tool ids are unique within the system (here: within a set of files)."""
    first: dict[str, Definition] = {}
    problems = []
    for definition in definitions:
        other = first.setdefault(definition.id, definition)
        if other is not definition:
            # definitions built in code have no file to point at
            where = f"also defined in {other.source}" if other.source else "defined twice"
            problems.append(Problem(definition.source or definition.id, "$.id", f"id {definition.id!r} is {where}"))
    return problems


def definition_files(directory: str) -> list[str]:
    """The definition files directly in ``directory`` (JSON and YAML; hidden files skipped), sorted by name."""
    names = sorted(name for name in os.listdir(directory) if name.endswith(SUFFIXES) and not name.startswith("."))
    return [os.path.join(directory, name) for name in names]
