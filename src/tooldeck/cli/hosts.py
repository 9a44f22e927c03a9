"""The MCP hosts ``tooldeck install`` knows: where each keeps its server list, and the shape of one entry there.

Every host reads a JSON object with the servers under one key (``mcpServers``, or ``servers`` for VS Code, whose file
is JSON with comments); each server is ``{"command", "args", "env"}``, and Claude Code and VS Code also want
``"type": "stdio"``. Paths follow each
host's documentation: per user, never per project, so the deck is available in every workspace.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A host's config file, given sys.platform, the environment and the home directory.
Where = Callable[[str, Mapping[str, str], Path], Path]


@dataclass(frozen=True)
class Host:
    name: str
    """The command-line name: ``tooldeck install NAME ...``."""
    title: str
    """What the user calls it, in messages."""
    key: str
    """The member of the config file's top-level object that holds the servers."""
    typed: bool
    """The entry carries ``"type": "stdio"`` (hosts that also take HTTP servers in the same map want it)."""
    where: Where
    """The config file for a platform (``sys.platform``), an environment and a home directory."""
    comments: bool = False
    """The file is JSON with comments (VS Code's): comments and trailing commas are read, and kept when it is merged."""


def _config_home(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """The per-user configuration directory of desktop applications: Application Support, %APPDATA% or XDG."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform == "win32":
        return Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config")


def _claude_desktop(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    return _config_home(platform, environ, home) / "Claude" / "claude_desktop_config.json"


def _vscode(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    return _config_home(platform, environ, home) / "Code" / "User" / "mcp.json"


def _in_home(*parts: str) -> Where:
    def where(platform: str, environ: Mapping[str, str], home: Path) -> Path:
        return home.joinpath(*parts)

    return where


HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        Host("claude-desktop", "Claude Desktop", "mcpServers", False, _claude_desktop),
        Host("claude-code", "Claude Code", "mcpServers", True, _in_home(".claude.json")),
        Host("cursor", "Cursor", "mcpServers", False, _in_home(".cursor", "mcp.json")),
        Host("vscode", "VS Code", "servers", True, _vscode, comments=True),
        Host("gemini-cli", "Gemini CLI", "mcpServers", False, _in_home(".gemini", "settings.json")),
    )
}


def config_path(
    host: Host, platform: str | None = None, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """The file ``host`` reads on this machine (or on ``platform`` with ``environ`` and ``home``, for tests)."""
    return host.where(
        platform or sys.platform,
        os.environ if environ is None else environ,
        Path(os.path.expanduser("~")) if home is None else home,
    )


def server_entry(host: Host | None, command: str, args: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    """One server as ``host`` writes it (``None``: the standard ``mcpServers`` form, without a type)."""
    entry: dict[str, Any] = {"type": "stdio"} if host is not None and host.typed else {}
    entry["command"] = command
    entry["args"] = list(args)
    if env:
        entry["env"] = dict(env)
    return entry
