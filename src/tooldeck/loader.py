"""Finding the Deck a command-line TARGET names: ``path/file.py[:attr]``, ``package.module[:attr]``, a tool
definition file (``.json``/``.yaml``) or a directory of them.

Every failure is a ``TargetError`` with one line that names the file (and line) and what to do about it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from types import ModuleType
from typing import Any

from .deck import Deck
from .protocol.errors import RegistrationError, TargetError
from .schema.names import a_type_name

DEMO = "tooldeck.demo"
TARGETS = (
    "a TARGET is a Python file (path/app.py[:NAME]), a module (package.module[:NAME]), a tool definition file "
    "(.json, .yaml, .yml) or a directory of tool definition files"
)


def load_deck(target: str | None, *, watch: bool = False, name: str | None = None, version: str | None = None) -> Deck:
    """The Deck ``target`` names; ``watch``: a directory of definitions is followed while the deck serves.

    ``name`` and ``version`` name a deck made from tool definitions (a directory is named after itself, version
    0.1.0; a file after its definition); a Python deck names itself, so giving them for one is a TargetError."""
    if not target:
        target = DEMO
    if os.path.isdir(target):
        return _definitions_deck(target, watch, name, version)
    if watch:
        what = "is a file" if os.path.isfile(target) else "no such directory"
        raise TargetError(f"{target}: {what}; --watch takes a directory of tool definition files (.json, .yaml, .yml)")
    source, attr = _split(target)
    if source.endswith((".json", ".yaml", ".yml")):
        return _definition_deck(source, name, version)
    if name is not None or version is not None:
        given = [flag for flag, value in (("--name", name), ("--deck-version", version)) if value is not None]
        verb = "names" if len(given) == 1 else "name"
        raise TargetError(f"{target}: {' and '.join(given)} {verb} a deck served from tool definitions (a directory or a .json/.yaml "
                          'file); a Python deck is named in its code: Deck("name", version="1.0.0")')  # fmt: skip
    module = _load_file(source) if _looks_like_path(source) else _load_module(source)
    return _pick(module, source, attr)


def _definition_deck(path: str, name: str | None = None, version: str | None = None) -> Deck:
    """A deck serving one tool definition file, named after the definition (unless ``name``/``version`` say
    otherwise)."""
    from .manifest.definition import DefinitionError, load_definition

    try:
        definition = load_definition(path)
        deck = Deck(name or definition.id, version=version or definition.version,
                    description=definition.document["description"])  # fmt: skip
        deck.manager.register(definition)
    except DefinitionError as exc:
        raise TargetError(str(exc)) from None  # every problem, a line each
    except RegistrationError as exc:
        raise TargetError(str(exc)) from None
    return deck


def _definitions_deck(directory: str, watch: bool, name: str | None = None, version: str | None = None) -> Deck:
    """A deck serving every definition file of a directory, named after the directory unless ``name`` is given;
    ``watch``: and what the directory becomes."""
    from .manifest.definition import DefinitionError, definition_files
    from .manifest.watch import DirectoryWatcher

    deck = Deck(name or os.path.basename(os.path.abspath(directory)) or "tooldeck", version=version or "0.1.0")
    if watch:
        watcher = DirectoryWatcher(deck.manager, directory)
        watcher.load()  # a broken file is logged and skipped: it is applied once it is mended
        deck.services.append(watcher.watch)
        return deck
    if not definition_files(directory):
        raise TargetError(f"{directory}: {_no_definitions(directory)}")
    try:
        deck.load_manifest(directory)
    except DefinitionError as exc:
        raise TargetError(str(exc)) from None  # every problem, a line each
    return deck


def _no_definitions(directory: str) -> str:
    """Why a directory cannot be served: it holds no definition files (and, when it holds Python, what to give)."""
    said = "is a directory with no tool definition files (.json, .yaml, .yml) in it, which is what a directory serves"
    python = sorted(
        (name for name in os.listdir(directory) if name.endswith(".py")), key=lambda n: (n == "__init__.py", n)
    )
    if python:
        return f"{said}; for Python code give the file that creates the Deck, e.g. {os.path.join(directory, python[0])}"
    return f"{said}; {TARGETS}"


def _split(target: str) -> tuple[str, str | None]:
    source, sep, attr = target.rpartition(":")
    if sep and attr.isidentifier() and source and not (len(source) == 1 and source.isalpha()):
        return source, attr
    return target, None


def _looks_like_path(source: str) -> bool:
    return source.endswith(".py") or os.sep in source or "/" in source


def _load_file(path: str) -> ModuleType:
    if os.path.isdir(path):  # DIR:NAME (a directory is served only as tool definitions, whole)
        raise TargetError(f"{path}: is a directory, and :NAME picks a Deck in a Python file or module; {TARGETS}")
    if not os.path.isfile(path):
        where = "" if os.path.isabs(path) else f" (looked for in {os.getcwd()})"
        raise TargetError(f"{path}: no such file{where}")
    if not path.endswith(".py"):
        raise TargetError(f"{path}: expected a Python file (.py)")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its neighbours, as `python file.py` would
    name = os.path.splitext(os.path.basename(path))[0]
    if not name.isidentifier() or name in sys.modules:
        name = f"tooldeck_target_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise TargetError(f"{path}: exited while being imported (SystemExit {exc.code})") from None
    except BaseException as exc:
        del sys.modules[name]
        raise TargetError(f"{_where(exc, path)}: {type(exc).__name__}: {exc}") from None
    return module


def _load_module(name: str) -> ModuleType:
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise TargetError(f"{name}: no such module (give a path/file.py or an importable module)") from None
        raise TargetError(f"{name}: {type(exc).__name__}: {exc}") from None
    except BaseException as exc:
        raise TargetError(f"{name}: {type(exc).__name__}: {exc}") from None


def _where(exc: BaseException, path: str) -> str:
    """``path:line`` of the deepest frame inside the target file, or the syntax error's location."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{path}:{exc.lineno}"
    line = None
    target = os.path.abspath(path)
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == target:
            line = frame.lineno
    return f"{path}:{line}" if line else path


def _pick(module: ModuleType, source: str, attr: str | None) -> Deck:
    if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):  # a namespace package: a directory
        raise TargetError(f"{source}: is a directory without __init__.py, not a module; {TARGETS}")
    if attr is not None:
        if not hasattr(module, attr):
            held = sorted(name for name, value in vars(module).items() if isinstance(value, Deck))
            found = f"its Decks: {', '.join(held)}" if held else "it defines no Deck"
            raise TargetError(f"{source}: has no attribute {attr!r} ({found})")
        return _as_deck(getattr(module, attr), f"{source}:{attr}")
    decks = {name: value for name, value in vars(module).items() if isinstance(value, Deck)}
    if "deck" in decks:
        return decks["deck"]
    if len(decks) == 1:
        return next(iter(decks.values()))
    if not decks:
        raise TargetError(f"{source}: no Deck found; create one (deck = Deck(...)) or name it as {source}:NAME")
    names = ", ".join(sorted(decks))
    raise TargetError(f"{source}: several Decks ({names}); choose one as {source}:NAME")


def _as_deck(value: Any, where: str) -> Deck:
    if isinstance(value, Deck):
        return value
    if callable(value):  # a factory: `module:create_deck`
        try:
            value = value()
        except Exception as exc:
            raise TargetError(
                f"{where}: calling it failed (a TARGET's NAME must be a Deck, or a function that takes no arguments "
                f"and returns one): {type(exc).__name__}: {exc}"
            ) from None
        if isinstance(value, Deck):
            return value
        raise TargetError(f"{where}: returned {a_type_name(value)}, not a Deck")
    raise TargetError(f"{where}: is {a_type_name(value)}, not a Deck (or a function returning one)")
