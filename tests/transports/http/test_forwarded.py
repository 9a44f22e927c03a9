"""X-Forwarded-For, believed only from trusted proxies: behind a load balancer each anonymous caller keeps a rate
limit of its own, and a header sent by anyone else changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from asgi_client import AsgiClient
from eras import modern
from stdio_client import ROOT, TOOLDECK
from tooldeck import Deck
from tooldeck.security.policy import load_policy
from tooldeck.transports.http.app import HttpApp
from tooldeck.transports.http.forwarded import TrustedProxies
from transports.http.test_eras import headers_for

PROXIES = TrustedProxies(["127.0.0.1", "10.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [("127.0.0.1", None, "127.0.0.1"),  # no header: the proxy's own call
     ("127.0.0.1", b"203.0.113.5", "203.0.113.5"),
     ("127.0.0.1", b"198.51.100.1, 203.0.113.5", "203.0.113.5"),  # the left one is the client's own word
     ("127.0.0.1", b"203.0.113.5, 10.1.2.3", "203.0.113.5"),  # through two trusted proxies
     ("127.0.0.1", b"10.1.2.3, 10.4.5.6", "10.1.2.3"),  # only proxies: the farthest one
     ("127.0.0.1", b"203.0.113.5, not-an-address", "127.0.0.1"),  # malformed: believe no further
     ("192.0.2.9", b"203.0.113.5", "192.0.2.9"),  # an untrusted peer's header is ignored
     ("::1", b"2001:db8::7", "2001:db8::7"),
     (None, b"203.0.113.5", None)],
)  # fmt: skip
def test_the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy(
    peer: str | None, forwarded: bytes | None, client: str | None
) -> None:
    headers = {} if forwarded is None else {b"x-forwarded-for": forwarded}
    assert PROXIES.client(peer, headers) == client


def test_without_trusted_proxies_the_header_is_ignored() -> None:
    assert TrustedProxies().client("127.0.0.1", {b"x-forwarded-for": b"203.0.113.5"}) == "127.0.0.1"


def test_an_entry_that_is_no_address_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"trusted proxy 'lb\.internal': expected an IP address or a network"):
        TrustedProxies(["lb.internal"])


def limited_app(tmp_path: Path, proxies: list[str]) -> HttpApp:
    deck = Deck("forwarded")

    @deck.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    policy = tmp_path / "policy.toml"
    policy.write_text('[limits]\nper_principal = "2/minute"\n')
    deck.apply_policy(load_policy(policy))
    return HttpApp(deck, trusted_proxies=proxies)


async def call(app: HttpApp, peer: str, forwarded: str | None, request_id: int) -> int:
    message = modern(request_id, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    headers = headers_for(message)
    if forwarded is not None:
        headers["x-forwarded-for"] = forwarded
    response = await AsgiClient(app, client=(peer, 40000)).post(message, version=None, accept="application/json",
                                                                headers=headers)  # fmt: skip
    body = await response.json()
    return 429 if response.status == 429 or body.get("result", {}).get("isError") else response.status


async def test_behind_a_trusted_proxy_each_anonymous_caller_has_its_own_bucket(tmp_path: Path) -> None:
    app = limited_app(tmp_path, ["127.0.0.1"])
    first = [await call(app, "127.0.0.1", "203.0.113.5", n) for n in range(3)]
    second = [await call(app, "127.0.0.1", "203.0.113.6", n) for n in range(2)]
    assert (first, second) == ([200, 200, 429], [200, 200])


async def test_a_forwarded_header_from_anyone_else_buys_no_new_bucket(tmp_path: Path) -> None:
    app = limited_app(tmp_path, ["127.0.0.1"])
    spoofed = [await call(app, "192.0.2.9", f"203.0.113.{n}", n) for n in range(3)]
    assert spoofed == [200, 200, 429]  # one caller, whatever it claims
    untrusting = limited_app(tmp_path, [])
    assert [await call(untrusting, "127.0.0.1", f"203.0.113.{n}", n) for n in range(3)] == [200, 200, 429]


def test_serve_refuses_a_trusted_proxy_that_is_no_address_in_one_line() -> None:
    done = subprocess.run([*TOOLDECK, "serve", "--http", "--trusted-proxy", "lb.internal"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("argument --trusted-proxy: must be an IP address or a network (like 10.0.0.0/8), got 'lb.internal'")
    )
