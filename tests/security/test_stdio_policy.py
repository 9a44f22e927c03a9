"""A policy over a real stdio subprocess: `tooldeck serve deck.py --policy policy.toml` — the local user's scopes
decide, an API key in $TOOLDECK_TOKEN is honoured, and a broken policy stops the start with file:line."""

from __future__ import annotations

from pathlib import Path

from stdio_client import StdioServer
from tooldeck.security.tokens import hash_token

DECK = """\
from tooldeck import Deck

deck = Deck("stdio-policy")


@deck.tool(security_level=5, scopes=["deploy:write"])
def deploy() -> str:
    return "deployed"
"""


def write(tmp_path: Path, policy: str) -> tuple[Path, Path]:
    (tmp_path / "deck.py").write_text(DECK)
    (tmp_path / "policy.toml").write_text(policy)
    return tmp_path / "deck.py", tmp_path / "policy.toml"


def call_deploy(server: StdioServer) -> dict:
    server.initialize()
    return server.request("tools/call", {"name": "deploy", "arguments": {}})  # type: ignore[no-any-return]


def test_the_local_user_has_the_scopes_the_policy_grants(tmp_path: Path) -> None:
    deck, policy = write(tmp_path, '[authentication.stdio]\nscopes = ["deploy:write"]\n')
    with StdioServer("serve", str(deck), "--policy", str(policy)) as server:
        assert call_deploy(server)["result"]["structuredContent"] == {"result": "deployed"}
    deck, policy = write(tmp_path, "[levels]\ndefault = 0\n")
    with StdioServer("serve", str(deck), "--policy", str(policy), env={"USER": "sam"}) as server:
        assert call_deploy(server)["error"] == {
            "code": -32000,
            "message": "tool 'deploy' needs the scope deploy:write (security level 5); ask for a token that grants "
            "deploy:write",
        }


def test_an_api_key_from_the_environment(tmp_path: Path) -> None:
    policy_text = (
        f'[[authentication.tokens]]\nsubject = "ci"\nsha256 = "{hash_token("k")}"\nscopes = ["deploy:write"]\n'
    )
    deck, policy = write(tmp_path, policy_text)
    with StdioServer("serve", str(deck), "--policy", str(policy), env={"TOOLDECK_TOKEN": "k"}) as server:
        assert call_deploy(server)["result"]["structuredContent"] == {"result": "deployed"}


def test_a_broken_policy_stops_the_start_with_its_line(tmp_path: Path) -> None:
    deck, policy = write(tmp_path, "[levels]\ndefault = 11\n")
    with StdioServer("serve", str(deck), "--policy", str(policy)) as server:
        assert server.wait() == 2
        assert server.stderr_so_far() == f"tooldeck: {policy}:2: levels.default: expected a number <= 10, got 11\n"
