"""Reading a tool definition file: only a regular file, at most ``MAX_FILE_BYTES``, and (when read as part of a
directory) only one that lies inside that directory; JSON, or YAML without anchors and aliases; at most
``MAX_DEPTH`` levels deep.

Nothing here blocks on what a path turns out to be (a named pipe is refused, not waited on; a device is never read)
and nothing expands beyond the bytes read (a 552-byte YAML alias bomb holds 10^8 leaves). Every refusal is a
DefinitionError whose message names the file and the place (line and column where the parser gives one) and never
repeats the file's content: a file that is not a definition may hold anything, secrets included.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import orjson

from .problems import DefinitionError, Problem

MAX_FILE_BYTES = 1024 * 1024  # a definition is a few KiB; a MiB is room for generous return schemas
MAX_DEPTH = 64  # nesting of objects and arrays: the later checks walk the document recursively
YAML_SUFFIXES = (".yaml", ".yml")
_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}
_QUOTED = re.compile(r"'[^']*'")  # a parser's quotes: of the text it read, or of its own tokens ('<block end>', ',')


def read_document(path: str, label: str, *, within: str | None = None) -> Any:
    """The JSON or YAML value in ``path`` (YAML by its suffix; other files are read as JSON). ``within``: the
    directory the file is served from, which the file (after following symbolic links) must be inside."""
    data = read_bytes(path, label, within=within)
    document = _read_yaml(data, label) if path.endswith(YAML_SUFFIXES) else _read_json(data, label)
    if _deeper_than(document, MAX_DEPTH):
        raise DefinitionError([Problem(label, "$", f"nested more than {MAX_DEPTH} levels deep")])
    return document


def read_bytes(path: str, label: str, *, within: str | None = None) -> bytes:
    """The bytes of the regular file ``path``; DefinitionError (with no content in it) for anything else."""
    target = path
    if within is not None:
        real, root = os.path.realpath(path), os.path.realpath(within)
        if os.path.commonpath([real, root]) != root or real == root:
            raise DefinitionError([Problem(label, "$", "leads outside the directory (a symbolic link); only files "
                                                      "inside the watched directory are read")])  # fmt: skip
        target = real  # every link followed: O_NOFOLLOW below refuses a link put in its place meanwhile
    try:
        found = os.stat(target)
    except FileNotFoundError:
        raise DefinitionError([Problem(label, "$", "no such file")]) from None
    except OSError as exc:
        raise DefinitionError([Problem(label, "$", f"cannot be read: {exc.strerror or type(exc).__name__}")]) from None
    _check_kind(found, label)  # before opening: opening a device may do something, opening a pipe may block
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if within is not None else 0)
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        raise DefinitionError([Problem(label, "$", "no such file")]) from None
    except OSError as exc:
        raise DefinitionError([Problem(label, "$", f"cannot be read: {exc.strerror or type(exc).__name__}")]) from None
    try:
        _check_kind(os.fstat(fd), label)  # what was opened, which may not be what was looked at
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise DefinitionError([Problem(label, "$", f"cannot be read: {exc.strerror or type(exc).__name__}")]) from None
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:  # the bytes read, not the size a stat claims (which a growing file outruns)
        raise DefinitionError(
            [Problem(label, "$", f"is larger than {MAX_FILE_BYTES} bytes, the limit for a definition file")]
        )
    return b"".join(chunks)


def _check_kind(found: os.stat_result, label: str) -> None:
    kind = stat.S_IFMT(found.st_mode)
    if kind == stat.S_IFDIR:
        raise DefinitionError([Problem(label, "$", "is a directory, not a definition file")])
    if kind != stat.S_IFREG:
        what = _KINDS.get(kind, "not a regular file")
        raise DefinitionError([Problem(label, "$", f"is {what}, not a regular file; only regular files are read")])


def _read_json(data: bytes, label: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # exc.pos counts characters of the decoded text, not bytes: lineno/colno are computed on that text
        where = f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
        raise DefinitionError([Problem(label, "$", f"not valid JSON: {where}")]) from None


def _read_yaml(data: bytes, label: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # safe loading only: no Python objects from a file
    try:
        _refuse_aliases(yaml.parse(data, Loader=loader), label)  # the events, before anything is built from them
        return yaml.load(data, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        # str(exc) quotes the offending line: only the parser's own words are kept
        problem = _QUOTED.sub(_elide, getattr(exc, "problem", None) or type(exc).__name__)
        raise DefinitionError([Problem(label, "$", f"not valid YAML: {problem}{where}")]) from None


def _elide(quoted: re.Match[str]) -> str:
    """A quote of the file's text (an alias, a tag, a word) is left out; one character or a token name is kept."""
    text = quoted.group()
    return text if len(text) <= 3 or text.startswith("'<") else "'…'"


def _refuse_aliases(events: Any, label: str) -> None:
    import yaml

    depth = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            message = "YAML anchors and aliases are not accepted{}: write the value out where it is used"
            raise DefinitionError([Problem(label, "$", message.format(_at(event)))])
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise DefinitionError([Problem(label, "$", f"nested more than {MAX_DEPTH} levels deep{_at(event)}")])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _at(event: Any) -> str:
    mark = event.start_mark
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether ``document`` nests objects and arrays more than ``limit`` deep (without recursing itself)."""
    level: list[Any] = [document]
    for _ in range(limit + 1):
        containers = [value for value in level if isinstance(value, dict | list)]
        if not containers:
            return False
        level = [item for value in containers for item in (value.values() if isinstance(value, dict) else value)]
    return True
