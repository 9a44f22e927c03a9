"""The policy file (TOML): who can authenticate and how, which roles grant which scopes, what security levels need,
rate limits, the sanitiser and the audit trail — read once at start, checked, every problem with its line.

    [authentication]                 # who may call: static tokens, OAuth (JWT) access tokens, the stdio user
    required = false                 # true: a request without credentials is refused (401) before it is read
    [[authentication.tokens]]
    subject = "ci-bot"
    sha256 = "<hex of the token's SHA-256>"
    scopes = ["weather:read"]
    [authentication.jwt]
    issuer = "https://auth.example.com"
    audience = "https://mcp.example.com/mcp"    # this server's canonical resource URI
    jwks = "https://auth.example.com/.well-known/jwks.json"     # or a file
    [authentication.stdio]
    subject = "alice"                # default: the user running the server ($USER)
    scopes = ["weather:read"]

    [roles]                          # role -> the scopes it grants
    ops = ["deploy:write"]

    [levels]
    default = 0                      # the level of a tool that declares none
    recent_auth_seconds = 300        # 8-10: a token whose auth_time is this recent verifies the call
    confirm = true                   # 8-10: or the user confirms the call through elicitation
    confirm_timeout = 120
    approval = "form"                # 8-10: "url": a person approves on tooldeck's own page, out of the client
    without_url = "refuse"           # approval "url", a client without URL-mode elicitation: "refuse" or "form"
    hide_unusable = true             # leave out of lists what a principal can never use

    [approvals]                      # four eyes: another person, holding the approver scope, approves the call
    levels = [10]                    # the security levels whose tool calls wait for an approver
    tools = ["deploy"]               # and these tools, whatever their level
    scope = "approver"               # the scope an approver's credentials must grant
    timeout = 300                    # seconds a call waits for a decision before it is refused

    [limits]                         # "N/s", "N/minute", "N/hour"
    per_principal = "60/minute"
    ...

    [sanitise]                       # on by default
    [audit]                          # off by default; file = "audit.jsonl" or "-" for stderr
    redact = ["token"]               # arguments whose names contain one of these, in any case: api_token, X-Token
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..protocol.errors import TooldeckError
from ..protocol.record import Record

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_RATE = {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "authentication": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "required": {"type": "boolean"},
                "tokens": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["subject", "sha256"],
                        "properties": {
                            "subject": {"type": "string", "minLength": 1},
                            "sha256": {"type": "string", "pattern": "^(sha256:)?[0-9a-fA-F]{64}$"},
                            "scopes": _STRINGS,
                            "roles": _STRINGS,
                        },
                    },
                },
                "jwt": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["issuer", "audience", "jwks"],
                    "properties": {
                        "issuer": {"type": "string", "minLength": 1},
                        "audience": {"anyOf": [{"type": "string", "minLength": 1}, _STRINGS]},
                        "jwks": {"type": "string", "minLength": 1},
                        "algorithms": _STRINGS,
                        "roles_claim": {"type": "string"},
                        "leeway": {"type": "number", "minimum": 0},
                        "authorization_servers": _STRINGS,
                    },
                },
                "stdio": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "subject": {"type": "string", "minLength": 1},
                        "scopes": _STRINGS,
                        "roles": _STRINGS,
                    },
                },
                "resource": {"type": "string", "minLength": 1},
            },
        },
        "roles": {"type": "object", "additionalProperties": _STRINGS},
        "levels": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "default": {"type": "integer", "minimum": 0, "maximum": 10},
                "recent_auth_seconds": {"type": "number", "minimum": 0},
                "confirm": {"type": "boolean"},
                "confirm_timeout": {"type": "number", "exclusiveMinimum": 0},
                "approval": {"enum": ["form", "url"]},
                "without_url": {"enum": ["form", "refuse"]},
                "hide_unusable": {"type": "boolean"},
            },
        },
        "approvals": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "levels": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 10}},
                "tools": _STRINGS,
                "scope": {"type": "string", "minLength": 1},
                "timeout": {"type": "number", "exclusiveMinimum": 0},
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "per_principal": _RATE,
                "per_tool": _RATE,
                "per_principal_tool": _RATE,
                "global": _RATE,
                "http_requests": _RATE,
                "burst": {"type": "integer", "minimum": 1},
            },
        },
        "sanitise": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "max_result_bytes": {"type": "integer", "minimum": 1},
                "oversize": {"enum": ["truncate", "error"]},
                "max_depth": {"type": "integer", "minimum": 1},
                "max_string": {"type": "integer", "minimum": 1},
                "max_argument_bytes": {"type": "integer", "minimum": 1},
            },
        },
        "audit": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "file": {"type": "string", "minLength": 1},
                "max_bytes": {"type": "integer", "minimum": 1},
                "backups": {"type": "integer", "minimum": 0},
                "fsync": {"enum": ["never", "interval", "each"]},
                "redact": _STRINGS,
            },
        },
    },
}


class PolicyError(TooldeckError):
    """A policy file that cannot be used: the message names the file, the line and what is wrong."""


class Policy(Record):
    """A checked policy: the file's tables as plain dicts (``authentication``, ``roles``, ``levels``,
    ``approvals``, ``limits``, ``sanitise``, ``audit``), each defaulted. ``Policy()`` is the policy of a deck with no file: levels enforced,
    output sanitised, nothing else."""

    __slots__ = ("authentication", "roles", "levels", "approvals", "limits", "sanitise", "audit", "source")

    def __init__(self, document: dict[str, Any] | None = None, source: str | None = None) -> None:
        document = document or {}
        self.authentication: dict[str, Any] = document.get("authentication", {})
        self.roles: dict[str, list[str]] = document.get("roles", {})
        self.levels: dict[str, Any] = {"default": 0, "recent_auth_seconds": 0, "confirm": True, "confirm_timeout": 120,
                                       "approval": "form", "without_url": "refuse", "hide_unusable": True,
                                       **document.get("levels", {})}  # fmt: skip
        self.approvals: dict[str, Any] = {"levels": [], "tools": [], "scope": "approver", "timeout": 300,
                                          **document.get("approvals", {})}  # fmt: skip
        self.limits: dict[str, Any] = document.get("limits", {})
        self.sanitise: dict[str, Any] = {"enabled": True, "oversize": "truncate", **document.get("sanitise", {})}
        self.audit: dict[str, Any] = document.get("audit", {})
        self.source = source

    def scopes_of(self, principal: Any) -> frozenset[str]:
        """A principal's scopes: its own and those its roles grant."""
        if principal is None:
            return frozenset()
        scopes = set(getattr(principal, "scopes", ()))
        for role in getattr(principal, "roles", ()):
            scopes.update(self.roles.get(role, ()))
        return frozenset(scopes)


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """The policy in a TOML file; PolicyError (``file:line: what``) for a file that cannot be read or used."""
    import tomllib

    path = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PolicyError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        where = f"{path}:{found.group(1)}" if found else path
        raise PolicyError(f"{where}: not valid TOML: {reason}") from None
    return check_policy(document, path, data.decode("utf-8"), base=os.path.dirname(os.path.abspath(path)))


# The keys whose values are paths. A relative one is relative to the policy file's directory (``base``), so a policy
# means the same files wherever the server is started from; ``~`` is the home directory. ``-`` (stderr) and URLs are
# not paths.
PATH_KEYS = (("audit", "file"), ("authentication", "jwt", "jwks"))


def check_policy(document: dict[str, Any], path: str = "<policy>", text: str = "", base: str | None = None) -> Policy:
    """``document`` (the parsed TOML) checked against the policy's schema and rules; ``base``: the directory relative
    paths are relative to (the policy file's; None: the working directory). A JWKS file is read now."""
    from ..schema.validate import Validator

    problems = Validator(SCHEMA).errors(document)
    if problems:
        json_path, _, reason = problems[0].partition(": ")
        unknown = re.fullmatch(r"unexpected property '(.*)'", reason)
        if unknown:  # name the key itself, and where it is
            json_path = f"{json_path}.{unknown.group(1)}" if json_path != "$" else f"$.{unknown.group(1)}"
            reason = "unknown key (a misspelling?)"
        elif "a string matching" in reason and json_path.startswith("$.limits."):
            reason = f'expected a rate like "60/minute" (N/s, N/minute or N/hour), {reason.rsplit(", ", 1)[-1]}'
        elif "a string matching" in reason and json_path.endswith(".sha256"):
            reason = "expected the token's SHA-256 as 64 hex digits (tooldeck.security.tokens.hash_token)"
        raise PolicyError(f"{path}:{_line_of(json_path, text)}: {_toml_path(json_path)}: {reason}")
    roles = document.get("roles", {})
    for index, token in enumerate(document.get("authentication", {}).get("tokens", ())):
        for role in token.get("roles", ()):
            if role not in roles:
                where = f"$.authentication.tokens[{index}].roles"
                raise PolicyError(f"{path}:{_line_of(where, text)}: {_toml_path(where)}: role {role!r} is not "
                                  f"defined in [roles]")  # fmt: skip
    _resolve_paths(document, base)
    jwt = document.get("authentication", {}).get("jwt")
    if jwt is not None:
        _check_jwt(jwt, path, text)
    return Policy(document, path)


def _resolve_paths(document: dict[str, Any], base: str | None) -> None:
    for *tables, key in PATH_KEYS:
        table: Any = document
        for name in tables:
            table = table.get(name) if isinstance(table, dict) else None
        value = table.get(key) if isinstance(table, dict) else None
        if not isinstance(value, str) or value == "-" or value.startswith(("https://", "http://")):
            continue
        value = os.path.expanduser(value)
        table[key] = os.path.join(base, value) if base is not None else value  # an absolute value stays as it is


def _check_jwt(jwt: dict[str, Any], path: str, text: str) -> None:
    """What the JWT backend would refuse when the server starts, refused here with the file's line: an algorithm
    outside the asymmetric allow-list, a JWKS URL over plain http, a JWKS file that cannot be read or holds no key."""
    from .jwks import JwksError, check_url, is_url, read_file
    from .jwt import ALGORITHMS

    for algorithm in jwt.get("algorithms", ()):
        if algorithm not in ALGORITHMS:
            where = "$.authentication.jwt.algorithms"
            raise PolicyError(f"{path}:{_line_of(where, text)}: {_toml_path(where)}: {algorithm!r} is not accepted "
                              f"(asymmetric signatures only; choose from {', '.join(ALGORITHMS)})")  # fmt: skip
    where = "$.authentication.jwt.jwks"
    try:
        if is_url(jwt["jwks"]):
            check_url(jwt["jwks"])
        else:
            read_file(jwt["jwks"])
    except (ValueError, JwksError) as exc:
        raise PolicyError(f"{path}:{_line_of(where, text)}: {_toml_path(where)}: {exc}") from None


def _toml_path(json_path: str) -> str:
    """``$.limits.per_tool`` -> ``limits.per_tool`` (how a TOML user names a key)."""
    return json_path.removeprefix("$.").removeprefix("$") or "(the file)"


def _line_of(json_path: str, text: str) -> int | str:
    """The line of the key a JSON path ends in: the last key of the path, looked for after its table's header."""
    keys = [plain or quoted for plain, quoted in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\"(.*?)\"\]", json_path)]
    if not keys or not text:
        return 1
    lines = text.splitlines()
    start = 0
    header = re.compile(r"^\s*\[\[?\s*" + re.escape(".".join(keys[:-1])) + r"\s*\]\]?\s*$") if len(keys) > 1 else None
    if header is not None:
        start = next((i for i, line in enumerate(lines) if header.match(line)), 0)
    key = re.compile(r"^\s*\"?" + re.escape(keys[-1]) + r"\"?\s*=|^\s*\[\[?\s*" + re.escape(".".join(keys)) + r"\s*\]")
    for index in range(start, len(lines)):
        if key.match(lines[index]):
            return index + 1
    return start + 1
