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
                             "approval": "form", "without_url": "refuse", "hide_unusable": True}  # fmt: skip
    assert policy.sanitise == {"enabled": True, "oversize": "truncate"}
    assert policy.limits == {"per_principal": "60/minute", "global": "100/s"}
    assert policy.scopes_of(Principal("x", scopes={"a"}, roles={"ops", "unknown"})) == {"a", "deploy:write"}
    assert policy.scopes_of(None) == frozenset()
    assert Policy().levels["default"] == 0 and Policy().audit == {}


def test_a_principal_has_the_scopes_of_its_own_roles_only() -> None:
    policy = Policy({"roles": {"forecaster": ["weather:read"], "ops": ["deploy:write"], "admin": ["*"]}})
    assert policy.scopes_of(Principal("carol", roles={"forecaster"})) == {"weather:read"}
    assert policy.scopes_of(Principal("dan", scopes={"own"}, roles={"unknown"})) == {"own"}


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


# --- paths in the policy file ---------------------------------------------------------------------------------

JWT = """\
[authentication.jwt]
issuer = "https://auth.example.com"
audience = "https://mcp.example.com/mcp"
jwks = "{jwks}"
"""


def test_relative_paths_are_relative_to_the_policy_file(tmp_path: Path, signer: tuple[object, Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    _, jwks = signer
    folder = tmp_path / "config"
    folder.mkdir()
    jwks.rename(folder / "keys.json")
    path = folder / "policy.toml"
    path.write_text(JWT.format(jwks="keys.json") + '\n[audit]\nfile = "logs/audit.jsonl"\n')
    monkeypatch.chdir(tmp_path)  # elsewhere: the paths must not depend on where the server is started
    policy = load_policy("config/policy.toml")
    assert policy.audit["file"] == str(folder / "logs" / "audit.jsonl")
    assert policy.authentication["jwt"]["jwks"] == str(folder / "keys.json")


@pytest.mark.parametrize(
    ("audit", "jwks"),
    [("-", "https://auth.example.com/jwks.json"), ("/var/log/audit.jsonl", "http://127.0.0.1:9000/jwks.json")],
)
def test_what_is_not_a_relative_path_stays_as_written(tmp_path: Path, audit: str, jwks: str) -> None:
    path = write(tmp_path, JWT.format(jwks=jwks) + f'\n[audit]\nfile = "{audit}"\n')
    policy = load_policy(path)
    assert (policy.audit["file"], policy.authentication["jwt"]["jwks"]) == (audit, jwks)


def test_a_home_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    policy = load_policy(write(tmp_path, '[audit]\nfile = "~/audit.jsonl"\n'))
    assert policy.audit["file"] == str(tmp_path / "home" / "audit.jsonl")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot be read (No such file or directory)"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        ('{"keys": {}}', 'expected an object with a "keys" list'),
        ('{"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}',
         'no usable signing key (each needs a "kid", "kty" RSA, EC or OKP, and no private part)'),
    ],
)  # fmt: skip
def test_a_jwks_file_that_cannot_be_used_is_one_line_at_start(tmp_path: Path, content: str | None,
                                                              problem: str) -> None:  # fmt: skip
    if content is not None:
        (tmp_path / "jwks.json").write_text(content)
    path = write(tmp_path, JWT.format(jwks="jwks.json"))
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert str(caught.value) == f"{path}:4: authentication.jwt.jwks: JWKS {tmp_path / 'jwks.json'}: {problem}"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('jwks = "http://auth.example.com/jwks.json"', ":4: authentication.jwt.jwks: JWKS http://auth.example.com/"
         "jwks.json: use https (plain http is accepted for loopback addresses only)"),
        ('jwks = "https://a.example/jwks"\nalgorithms = ["ES256", "HS256"]', ":5: authentication.jwt.algorithms: "
         "'HS256' is not accepted (asymmetric signatures only; choose from RS256, RS384, RS512, PS256, PS384, PS512, "
         "ES256, ES384, ES512, EdDSA)"),
    ],
)  # fmt: skip
def test_jwt_settings_the_server_would_refuse_are_one_line(tmp_path: Path, line: str, problem: str) -> None:
    path = write(tmp_path, JWT.replace('jwks = "{jwks}"', line))
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert str(caught.value) == f"{path}{problem}"
