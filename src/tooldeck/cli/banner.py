"""The start-up banner of ``tooldeck serve``: a few lines on stderr (never stdout, the protocol's on stdio) saying
what is served, where, and how to connect a host or the MCP Inspector. Plain standard library: it costs start-up
nothing worth measuring, and it is written with one write."""

from __future__ import annotations

import os
import sys
from typing import Any

INSPECTOR = "npx @modelcontextprotocol/inspector"


def stdio_banner(deck: Any, target: str | None, policy: str | None, options: list[str] | None = None) -> str:
    """The banner of a deck served over stdio: what it serves, and the commands that connect a host or the
    Inspector to it (the same command a host would run; ``options``: more words for it, like ``--name N``)."""
    command = " ".join(_quote(word) for word in [*serve_command(target, policy), *(options or ())])
    return _block(
        deck,
        "stdio",
        policy,
        [
            f"host: tooldeck install claude-desktop{f' {_quote(target)}' if target else ''}",
            f"inspector: {INSPECTOR} -- {command}",  # "--": the server's own options are not the Inspector's
        ],
    )


def http_banner(deck: Any, url: str, policy: str | None, bound: str | None = None) -> str:
    """The banner of a deck served over Streamable HTTP at ``url``; ``bound``: the wildcard address it listens on
    when ``url`` names loopback instead."""
    where = f"{url} (Streamable HTTP{f', listening on {bound}' if bound else ''})"
    auth = "off" if deck.http_auth is None else "required" if _auth_required(deck) else "optional"
    return _block(deck, where, policy, [f"inspector: {INSPECTOR} --transport http --server-url {url}"], auth=auth)


def serve_command(target: str | None, policy: str | None) -> list[str]:
    """``tooldeck serve`` for this target run by this Python, from any directory (paths made absolute)."""
    command = [sys.executable, "-m", "tooldeck", "serve"]
    if target:
        command.append(_absolute(target))
    if policy:
        command += ["--policy", os.path.abspath(policy)]
    return command


def write(text: str) -> None:
    """``text`` on stderr in one write (a host that reads stderr line by line gets the block whole)."""
    data = text.encode("utf-8", "replace")
    while data:
        try:
            data = data[os.write(2, data) :]
        except OSError:
            return  # a closed or broken stderr must not stop the server


def _block(deck: Any, where: str, policy: str | None, hints: list[str], auth: str | None = None) -> str:
    counts = [_count(len(deck.tools), "tool"), _count(len(deck.resources), "resource")]
    if len(deck.templates):
        counts.append(_count(len(deck.templates), "resource template"))
    counts.append(_count(len(deck.prompts), "prompt"))
    state = [f"tasks: {_task_store(deck.backends.tasks)}"]
    if policy is not None:
        state += [f"policy: {os.path.abspath(policy)}", f"audit: {_audit(deck.policy.audit)}"]
    if auth is not None:
        state.append(f"auth: {auth}")
    title = f"tooldeck: {deck.name} {deck.version} on {where}"
    if _colour():
        title = f"\x1b[1m{title}\x1b[0m"
    lines = [title, ", ".join(counts), " · ".join(state), *hints]
    return "\n  ".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _task_store(store: Any) -> str:
    if store is None or store == "memory":
        return "memory"
    if isinstance(store, str):
        return f"SQLite {os.path.abspath(store.partition(':')[2])}"
    return type(store).__name__  # a store object given to Deck(task_store=...)


def _audit(audit: dict[str, Any]) -> str:
    file = audit.get("file")
    return "off" if not file else "stderr" if file == "-" else os.path.abspath(file)


def _auth_required(deck: Any) -> bool:
    return bool(deck.policy.authentication.get("required", False))


def _absolute(target: str) -> str:
    """A file or directory target made absolute (keeping ``:attr``); a module name stays as it is."""
    source, sep, attr = target.rpartition(":")
    if sep and attr.isidentifier() and os.path.exists(source):
        return f"{os.path.abspath(source)}:{attr}"
    return os.path.abspath(target) if os.path.exists(target) else target


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def _quote(word: str) -> str:
    """``word`` as a shell reads it; shlex (and the re it compiles) only for the rare word that needs quoting."""
    if word and _SAFE.issuperset(word):
        return word
    import shlex

    return shlex.quote(word)


def _colour() -> bool:
    """Bold only for a person at a terminal (https://no-color.org)."""
    return "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb" and os.isatty(2)
