"""Tool definitions: a JSON or YAML document (read by reading.py) checked against the format's JSON Schema and the
registration rules, pinned by a digest. Every problem names its file and JSON path: ``calc.json:
$.capabilities[1].name: ...``, and none repeats a value of the file (a file that is not a definition may hold
anything): once the document has the format's shape, its id and capability names may be named.

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
from ..protocol.errors import SchemaError
from ..protocol.paths import find, format_path
from ..protocol.record import Record
from ..schema.validate import Validator
from .problems import DefinitionError, Problem
from .reading import YAML_SUFFIXES, read_document

__all__ = [
    "SUFFIXES",
    "Definition",
    "DefinitionError",
    "Problem",
    "check_document",
    "check_unique_ids",
    "definition_files",
    "digest",
    "format_schema",
    "load_definition",
    "parse_definition",
]  # fmt: skip

SUFFIXES = (".json", ".yaml", ".yml")
_SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "definition.schema.json")
_PATH_PREFIX = re.compile(r'\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*(?=: )')
_schema_validator: Validator | None = None
_format_names: frozenset[str] | None = None
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class Definition(Record):
    """A checked tool definition: the document as written, its id and version, and its digest, which pins what a
    version means: the SHA-256 of its canonical JSON and, when command handlers name files (``files``: their paths
    relative to ``base_dir`` and the SHA-256 of each), of those files too. ``source`` is the file it came from
    (None: built in code); command handlers and ``cwd`` are relative to ``base_dir``."""

    __slots__ = ("document", "id", "version", "digest", "files", "source", "base_dir")

    def __init__(self, document: dict[str, Any], source: str | None = None, base_dir: str | None = None) -> None:
        self.document = document
        self.id: str = document["id"]
        self.version: str = document["version"]
        self.source = source
        self.base_dir = base_dir if base_dir is not None else (os.path.dirname(source) if source else os.getcwd())
        self.files: dict[str, str] = {}
        if _has_command(document):
            from .scripts import command_files

            self.files = command_files(document, self.base_dir)
        self.digest = digest(document, self.files)

    @classmethod
    def restored(cls, document: dict[str, Any], digest: str, files: dict[str, str], source: str | None,
                 base_dir: str) -> Definition:  # fmt: skip
        """A definition as another process served it (from the shared definitions, store.py): its digest and its
        command files' digests as that process took them, not taken again here (a call still checks the files)."""
        definition = cls.__new__(cls)
        definition.document = document
        definition.id = document["id"]
        definition.version = document["version"]
        definition.source = source
        definition.base_dir = base_dir
        definition.files = dict(files)
        definition.digest = digest
        return definition

    def stored(self) -> dict[str, Any]:
        """What ``restored`` takes back, as JSON: how the shared definitions keep this one."""
        return {"document": self.document, "digest": self.digest, "files": self.files, "source": self.source,
                "base_dir": self.base_dir}  # fmt: skip

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


def digest(document: Any, files: dict[str, str] | None = None) -> str:
    """SHA-256 of the canonical JSON (keys sorted, no whitespace, UTF-8): the same definition in JSON or YAML, in any
    key order or layout, has the same digest. ``files`` (path -> SHA-256, from ``command_files``) follow the
    document after a NUL byte, as canonical JSON, so that changing a command's script changes the digest."""
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    if files:
        canonical += b"\0" + orjson.dumps(files, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _has_command(document: dict[str, Any]) -> bool:
    handlers = [document.get("handler"), *(capability.get("handler") for capability in document["capabilities"])]
    return any(isinstance(handler, dict) for handler in handlers)


# --- reading --------------------------------------------------------------------------------------------------------


def load_definition(
    path: str | os.PathLike[str], label: str | None = None, *, within: str | os.PathLike[str] | None = None
) -> Definition:
    """The checked definition in ``path``; DefinitionError lists every problem. ``within``: the directory it is
    served from, which the file must not lead out of (see reading.py for what else a file must be)."""
    path = os.fspath(path)
    label = label or path
    document = read_document(path, label, within=os.fspath(within) if within is not None else None)
    # orjson reads nothing JSON cannot hold, so only YAML (and documents built in code) need that walk
    return parse_definition(document, label, source=path, json_only=not path.endswith(YAML_SUFFIXES))


def parse_definition(
    document: Any, label: str = "<definition>", source: str | None = None, *, json_only: bool = False
) -> Definition:
    """``document`` (a dict as read from a file) checked and made a Definition; DefinitionError lists the problems.
    ``json_only``: it came from a JSON parser, so it holds JSON values only."""
    problems = check_document(document, label, json_only=json_only)
    if problems:
        raise DefinitionError(problems)
    return Definition(document, source)


# --- checking -------------------------------------------------------------------------------------------------------


def check_document(document: Any, label: str, *, json_only: bool = False) -> list[Problem]:
    """Every problem with ``document``: the schema first; the registration rules once the shape is right."""
    found = None if json_only else find(document, _not_json)
    if found is not None:
        path, value = found
        if isinstance(value, dict):
            keys = list(value)
            index, key = next((i, key) for i, key in enumerate(keys) if not isinstance(key, str))
            message = f"key {index + 1} of {len(keys)} is a YAML {type(key).__name__}, not a string; quote it"
            return [Problem(label, format_path(path), message)]
        if isinstance(value, float):
            message = "NaN or an infinity is not a JSON number; quote it to make it a string"
        elif isinstance(value, int):
            message = "an integer that does not fit in 64 bits, as JSON numbers must here; quote it to make it a string"
        else:
            message = f"a YAML {type(value).__name__} is not a JSON value; quote it to make it a string"
        return [Problem(label, format_path(path), message)]
    lines = _validator().errors(document, values=False, names=_names())
    problems = [Problem(label, *_split(line)) for line in lines]
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


def _names() -> frozenset[str]:
    """Every property name of the format: an unexpected property close to one of them is shown as a misspelling."""
    global _format_names
    if _format_names is None:
        names: set[str] = set()
        pending: list[Any] = [format_schema()]
        while pending:
            value = pending.pop()
            if isinstance(value, dict):
                properties = value.get("properties")
                if isinstance(properties, dict):
                    names.update(properties)
                pending.extend(value.values())
            elif isinstance(value, list):
                pending.extend(value)
        _format_names = frozenset(names)
    return _format_names


def format_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the definition format, as shipped in the package."""
    return _validator().schema


def _rule_problems(document: dict[str, Any], label: str) -> Iterable[Problem]:
    import semver

    if not semver.Version.is_valid(document["version"]):
        yield Problem(label, "$.version", "is not a semantic version (MAJOR.MINOR.PATCH, like 1.0.0)")
    tool_id = document["id"]
    if not NAME_PATTERN.fullmatch(tool_id):
        yield Problem(label, "$.id", "cannot start an MCP tool name: use 1-128 characters of A-Z a-z 0-9 _ - . only")
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
                f"with the id it forms a tool name ({len(tool_name)} characters) that is not a valid MCP tool name: "
                "1-128 characters of A-Z a-z 0-9 _ - .",
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
                Validator(schema, values=False)
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
