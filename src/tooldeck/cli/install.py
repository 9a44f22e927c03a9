"""``tooldeck install HOST TARGET``: add the deck to an MCP host's configuration, or print the ``mcpServers`` JSON.

The entry runs ``<this python> -m tooldeck serve <absolute target>``, so the host starts the deck with the Python
environment tooldeck is installed in, from whatever directory it starts servers in. The target is loaded first: a
deck that does not load is never installed. An existing config is merged, never rewritten from scratch: every other
server and every other key stay as they were (VS Code's JSON with comments is edited as text, so its comments and
layout stay too: ``jsonc.py``), a copy is kept as ``<file>.bak``, and the new file replaces the old one in a single
rename (a crash leaves the old file or the new one, never half of either).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol.errors import TargetError
from ..schema.names import a_type_name
from .hosts import HOSTS, Host, config_path, server_entry

if TYPE_CHECKING:
    import argparse

DEMO = "tooldeck.demo"


def register(commands: Any, target_help: str) -> None:
    """Adds ``install`` to the command line."""
    install_parser = commands.add_parser(
        "install",
        help="add a deck to an MCP host's configuration (claude-desktop, claude-code, cursor, vscode, gemini-cli) "
        "or print its mcpServers JSON (json)",
        description="Add TARGET to HOST's user configuration, merging with the servers already there (a backup is "
        "written first). HOST 'json' prints the standard mcpServers JSON instead.",
    )
    install_parser.add_argument(
        "host", choices=[*HOSTS, "json"], metavar="HOST", help=f"one of {', '.join(HOSTS)}, or json"
    )
    install_parser.add_argument("target", nargs="?", metavar="TARGET", help=f"{target_help} (default: the demo deck)")
    install_parser.add_argument("--name", help="the server's name in the host (default: the deck's name)")
    install_parser.add_argument(
        "--env",
        action="append",
        type=_env_pair,
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable the host sets for the server; repeatable",
    )
    install_parser.add_argument(
        "--dry-run", action="store_true", help="print the config file and the entry it would get; write nothing"
    )
    install_parser.set_defaults(command=install)


def _env_pair(text: str) -> tuple[str, str]:
    import argparse

    key, sep, value = text.partition("=")
    if not sep or not key.strip() or key != key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, like --env API_KEY=secret, got {text!r}")
    return key, value


def install(args: argparse.Namespace) -> int:
    import contextlib

    from ..loader import load_deck

    target = args.target or DEMO
    with contextlib.redirect_stdout(sys.stderr):  # the target's own prints must not mix with the JSON we print
        deck = load_deck(target)
    name = deck.name if args.name is None else args.name
    if not name.strip():
        raise TargetError("--name must not be empty")
    command = [os.path.abspath(sys.executable), "-m", "tooldeck", "serve", absolute_target(target)]
    env = dict(args.env)
    _warn_if_found_only_here(target)
    if args.host == "json":
        _print_json({"mcpServers": {name: server_entry(None, command[0], command[1:], env)}})
        return 0
    host = HOSTS[args.host]
    path = config_path(host)
    entry = server_entry(host, command[0], command[1:], env)
    return write_entry(host, path, name, entry, dry_run=args.dry_run)


def absolute_target(target: str) -> str:
    """``target`` with its file or directory made absolute (``:attr`` kept); a module name as it is."""
    if os.path.exists(target):
        return os.path.abspath(target)
    source, sep, attr = target.rpartition(":")
    if sep and attr.isidentifier() and os.path.exists(source):
        return f"{os.path.abspath(source)}:{attr}"
    return target


def _warn_if_found_only_here(target: str) -> None:
    """A module target found in the current directory will not be found where the host starts the server."""
    if os.path.exists(target) or os.path.exists(target.rpartition(":")[0]):
        return
    top = target.partition(":")[0].partition(".")[0]
    here = os.getcwd()
    if os.path.isfile(os.path.join(here, f"{top}.py")) or os.path.isdir(os.path.join(here, top)):
        print(f"tooldeck: note: {top} is imported from the current directory, which the host will not start in; "
              f"give the file's path instead, or add --env PYTHONPATH={here}", file=sys.stderr)  # fmt: skip


def write_entry(host: Host, path: Path, name: str, entry: dict[str, Any], *, dry_run: bool) -> int:
    """Merge ``entry`` as server ``name`` into ``host``'s config at ``path`` (or, ``dry_run``, say what would be)."""
    real = Path(os.path.realpath(path))  # a symlinked config (dotfiles) is updated where it lives, link kept
    text = read_text(real)
    document = None if text is None else parse_config(real, host, text)
    existed = document is not None
    document = {} if document is None else document
    servers = document.setdefault(host.key, {})
    replacing = name in servers
    change = f"replace the existing server {name!r} in" if replacing else f"add server {name!r} to"
    if dry_run:
        print(f"would {change} {path} ({host.title}); nothing written:")
        _print_json({host.key: {name: entry}})
        return 0
    servers[name] = entry
    merged = _dumps(document)
    if host.comments and text is not None and text.strip():
        merged = _merged_in_place(path, text, (host.key,), name, entry, document)
    backup = None
    try:
        if existed:
            backup = _backup(real)
        _write_atomically(real, merged)
    except OSError as exc:
        raise TargetError(f"{path}: cannot write the config ({exc.strerror or exc}); nothing was changed") from None
    done = f"replaced the existing server {name!r} in" if replacing else f"added server {name!r} to"
    kept = f" (the previous file is kept as {backup})" if backup else ""
    print(f"{done} {path}{kept}; restart {host.title} to load it")
    return 0


def read_text(path: Path) -> str | None:
    """The config file's text, None when there is none."""
    try:
        # A byte-order mark, as some Windows editors write, is allowed; line ends are kept as they are (CRLF too).
        with open(path, encoding="utf-8-sig", newline="") as file:
            return file.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise TargetError(f"{path}: cannot be read ({reason}); nothing was written") from None


def parse_config(path: Path, host: Host, text: str) -> dict[str, Any]:
    """The config in ``text``: JSON, or JSON with comments for a host whose files are (VS Code)."""
    import json

    from . import jsonc

    if not text.strip():
        return {}  # an empty file holds nothing to lose
    try:
        document = jsonc.loads(text) if host.comments else json.loads(text)
    except (json.JSONDecodeError, jsonc.JsoncError) as exc:
        hint = " (comments are not read: remove them)" if text[exc.pos : exc.pos + 1] == "/" else ""
        kind = "JSON with comments" if host.comments else "JSON"
        raise TargetError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid {kind}: {exc.msg}{hint}; "
            f"mend the file or move it away, then run install again (nothing was written)"
        ) from None
    if not isinstance(document, dict):
        raise TargetError(
            f"{path}: expected a JSON object at the top, found {a_type_name(document)}; nothing was written"
        )
    servers = document.get(host.key)
    if servers is not None and not isinstance(servers, dict):
        raise TargetError(
            f'{path}: "{host.key}" is {a_type_name(servers)}, expected an object of servers by name; nothing was written'
        )
    return document


def _merged_in_place(path: Path, text: str, where: tuple[str, ...], name: str, entry: dict[str, Any],
                     expected: dict[str, Any]) -> str:  # fmt: skip
    """``text`` with the entry set in it, its comments, trailing commas and layout kept; checked by reading it back
    (a layout the edit gets wrong is refused, never written)."""
    from . import jsonc

    merged = jsonc.set_member(text, where, name, entry)
    try:
        same = jsonc.loads(merged) == expected
    except jsonc.JsoncError:
        same = False
    if not same:
        raise TargetError(f"{path}: the entry could not be added without changing the rest of the file; add it by "
                          "hand (tooldeck install json prints it) — nothing was written")  # fmt: skip
    return merged


def _dumps(document: Any) -> str:
    import json

    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _print_json(document: Any) -> None:
    sys.stdout.write(_dumps(document))


def _backup(path: Path) -> Path:
    import shutil

    backup = path.with_name(path.name + ".bak")
    shutil.copy2(path, backup)  # keeps the file's permissions: ~/.claude.json is private
    return backup


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: all or nothing."""
    import stat
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None  # a new file stays private to the user (mkstemp's 0600): env values may be secrets
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
