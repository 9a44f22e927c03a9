"""The policy file: TOML read and checked, every problem as ``file:line: key: what``; defaults when a table is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldeck.security.policy import Policy, PolicyError, load_policy
from tooldeck.security.principal import Principal

GOOD = """\
[authentication]
required = true

[[authentication.tokens]]
subject = "ci-bot"
sha256 = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
scopes = ["weather:read"]
roles = ["ops"]

[roles]
ops = ["deploy:write"]

[levels]
default = 1
recent_auth_seconds = 300

[limits]
per_principal = "60/minute"
global = "100/s"

[audit]
file = "audit.jsonl"
redact = ["password"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def test_a_good_policy_and_its_defaults(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, GOOD))
    assert policy.levels == {"default": 1, "recent_auth_seconds": 300, "confirm": True, "confirm_timeout": 120,
                             "hide_unusable": True}  # fmt: skip
    assert policy.sanitise == {"enabled": True, "oversize": "truncate"}
    assert policy.limits == {"per_principal": "60/minute", "global": "100/s"}
    assert policy.scopes_of(Principal("x", scopes={"a"}, roles={"ops", "unknown"})) == {"a", "deploy:write"}
    assert policy.scopes_of(None) == frozenset()
    assert Policy().levels["default"] == 0 and Policy().audit == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[limits\n", ":1: not valid TOML: Expected ']' at the end of a table declaration"),
        ('[limits]\nper_tool = "10/minute"\nglobal = "ten"\n',
         ':3: limits.global: expected a rate like "60/minute" (N/s, N/minute or N/hour), got "ten"'),
        ("[levels]\ndefault = 3\n\n[bogus]\nx = 1\n", ":4: bogus: unknown key (a misspelling?)"),
        ("[levels]\ndefualt = 3\n", ":2: levels.defualt: unknown key (a misspelling?)"),
        ("[levels]\ndefault = 11\n", ":2: levels.default: expected a number <= 10, got 11"),
        ('[[authentication.tokens]]\nsubject = "a"\nsha256 = "00"\n',
         ":3: authentication.tokens[0].sha256: expected the token's SHA-256 as 64 hex digits "
         "(tooldeck.security.tokens.hash_token)"),
        ('[[authentication.tokens]]\nsubject = "a"\nsha256 = "' + "a" * 64 + '"\nroles = ["nope"]\n',
         ":4: authentication.tokens[0].roles: role 'nope' is not defined in [roles]"),
        ('[audit]\nfile = "a.jsonl"\nfsync = "sometimes"\n',
         ':3: audit.fsync: expected one of "never", "interval", "each", got "sometimes"'),
        ("[authentication.jwt]\nissuer = \"https://a\"\n", ":1: authentication.jwt: missing required property 'audience'"),
    ],
)  # fmt: skip
def test_each_problem_names_the_file_and_line(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert str(caught.value) == f"{path}{problem}"


def test_an_unreadable_policy(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing.toml: cannot be read: No such file or directory$"):
        load_policy(tmp_path / "missing.toml")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match=r"bin.toml: not UTF-8 text$"):
        load_policy(tmp_path / "bin.toml")
