"""Reloading the policy while serving (Deck.reload_policy, SIGHUP): new tokens, scopes and limits apply from the next
request, sessions stay open, the audit trail goes on in one chain, and a broken file is refused with its file and
line while the policy before keeps serving — in-process and in a real ``tooldeck serve --http`` process."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from asgi_client import AsgiClient
from http_client import free_port, wait_for_port
from security.test_audit_trail import records
from stdio_client import ROOT, TOOLDECK
from tooldeck import Deck
from tooldeck.security.audit import verify
from tooldeck.security.policy import PolicyError
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http import HttpApp

ALICE = {"authorization": "Bearer alice-key"}
BOB = {"authorization": "Bearer bob-key"}


def policy_text(trail: Path, *, alice_scopes: tuple[str, ...] = (), bob: bool = False) -> str:
    tokens = [("alice", alice_scopes)] + ([("bob", ())] if bob else [])
    text = "".join(f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
                   f"scopes = {list(scopes)!r}\n" for who, scopes in tokens)  # fmt: skip
    return text.replace("'", '"') + f'[audit]\nfile = "{trail}"\n'


def vault_deck(policy: Path) -> Deck:
    deck = Deck("reloaded")

    @deck.tool(security_level=5, scopes=["vault:read"])
    def vault() -> str:
        return "secret"

    deck.apply_policy(policy)
    return deck


async def session_of(http: AsgiClient, headers: dict[str, str]) -> Any:
    return await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=headers)  # fmt: skip


async def vault(http: AsgiClient, session: str, request_id: int) -> dict[str, Any]:
    answer = await http.call(session, request_id, "tools/call", {"name": "vault", "arguments": {}}, headers=ALICE)
    return await answer.json()  # type: ignore[no-any-return]


async def test_a_reloaded_policy_serves_from_the_next_request_and_no_session_ends(tmp_path: Path) -> None:
    trail, policy = tmp_path / "audit.jsonl", tmp_path / "policy.toml"
    policy.write_text(policy_text(trail))
    deck = vault_deck(policy)
    http = AsgiClient(HttpApp(deck))
    opened = await session_of(http, ALICE)
    await opened.body()
    session = opened.headers["mcp-session-id"]
    assert "error" in await vault(http, session, 1)  # no vault:read yet
    assert (await session_of(http, BOB)).status == 401

    policy.write_text(policy_text(trail, alice_scopes=("vault:read",), bob=True))
    assert deck.reload_policy() == str(policy)
    assert (await vault(http, session, 2))["result"]["structuredContent"] == {"result": "secret"}  # same session
    assert (await session_of(http, BOB)).status == 200  # the new token, through the app's rebuilt layers
    shown = [(r.get("request_id"), r.get("decision")) for r in records(trail) if r["event"] == "call"]
    assert shown == [(1, "refused"), (2, "allowed")]
    assert verify([trail]).ok  # one chain across the reload


async def test_a_broken_policy_is_refused_with_its_line_and_the_one_before_serves_on(tmp_path: Path) -> None:
    trail, policy = tmp_path / "audit.jsonl", tmp_path / "policy.toml"
    policy.write_text(policy_text(trail, alice_scopes=("vault:read",)))
    deck = vault_deck(policy)
    http = AsgiClient(HttpApp(deck))
    opened = await session_of(http, ALICE)
    await opened.body()
    session = opened.headers["mcp-session-id"]
    policy.write_text(policy_text(trail, bob=True) + "[limits\n")
    with pytest.raises(PolicyError, match=r"policy\.toml:\d+"):
        deck.reload_policy()
    policy.write_text(policy_text(trail) + '[limits]\nper_principal = "often"\n')  # valid TOML, a wrong value
    with pytest.raises(PolicyError, match="per_principal"):
        deck.reload_policy()
    assert (await vault(http, session, 3))["result"]["structuredContent"] == {"result": "secret"}  # as before
    assert (await session_of(http, BOB)).status == 401


def test_a_deck_without_a_policy_file_says_there_is_nothing_to_reload() -> None:
    with pytest.raises(PolicyError, match="no policy file: nothing to reload"):
        Deck("plain").reload_policy()


def test_sighup_reloads_the_policy_of_a_serving_process(tmp_path: Path) -> None:
    trail, policy = tmp_path / "audit.jsonl", tmp_path / "policy.toml"
    deck = tmp_path / "app.py"
    deck.write_text("from tooldeck import Deck\ndeck = Deck('app')\n\n@deck.tool\ndef echo(text: str) -> str:\n"
                    "    return text\n")  # fmt: skip
    policy.write_text(policy_text(trail))
    port = free_port()
    args = [*TOOLDECK, "serve", str(deck), "--http", "--port", str(port), "--policy", str(policy)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, text=True)
    assert proc.stderr is not None
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def log_line(wanted: str) -> str:
        for line in proc.stderr:  # type: ignore[union-attr]  # waits for the process's next line
            if wanted in line:
                return line
        raise AssertionError(f"the process ended before logging {wanted!r}")

    try:
        wait_for_port(port, proc)
        assert httpx.post(url, json=init, headers={**headers, **BOB}).status_code == 401
        policy.write_text(policy_text(trail, bob=True))
        os.kill(proc.pid, signal.SIGHUP)
        assert str(policy) in log_line("policy reloaded from")
        assert httpx.post(url, json=init, headers={**headers, **BOB}).status_code == 200
        policy.write_text("[authentication\n")
        os.kill(proc.pid, signal.SIGHUP)
        refused = log_line("policy not reloaded")
        assert f"{policy}:1" in refused and "serves on" in refused
        assert httpx.post(url, json=init, headers={**headers, **BOB}).status_code == 200  # the one before
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
