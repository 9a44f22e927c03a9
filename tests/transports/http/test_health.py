"""The health probes (transports/http/health.py): answered before the guard, authentication, the flood guard and the
audit trail, revealing one word; ``/readyz`` is 503 while the process drains or its shared backend is out of reach."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from asgi_client import AsgiClient
from helpers import adder_deck
from redis_server import RedisServer
from security.test_audit_trail import http_deck, records
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http import HttpApp
from tooldeck.transports.http.health import PING_TIMEOUT


async def probe(http: AsgiClient, path: str, method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    response = await http.request(method, path=path, jsonrpc=False)
    return response.status, await response.body(), response.headers


async def test_probes_need_no_credentials_any_host_and_leave_no_audit_record(tmp_path: Path) -> None:
    deck, trail = http_deck(tmp_path)  # every request must carry a token; the trail records refusals
    http = AsgiClient(HttpApp(deck), host="10.1.2.3:8000")  # a balancer's probe names the pod's address
    assert await probe(http, "/healthz") == (200, b"ok\n", {"content-type": "text/plain; charset=utf-8",
                                                         "cache-control": "no-store", "content-length": "3"})  # fmt: skip
    status, body, _ = await probe(http, "/readyz")
    assert (status, body) == (200, b"ready\n")
    refused = await http.request("POST", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status == 403  # the same Host at the endpoint: the guard still holds there
    await refused.body()
    assert not trail.exists() or records(trail) == []  # probes are never audited (nor was the guard's refusal)


async def test_probes_are_not_rate_limited(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[authentication.tokens]]\nsubject = "ci"\nsha256 = "{hash_token("ci-key")}"\n'
                      '[limits]\nhttp_requests = "2/minute"\n')  # fmt: skip
    deck = adder_deck("limited")
    deck.apply_policy(policy)
    http = AsgiClient(HttpApp(deck))
    for _ in range(10):
        assert (await probe(http, "/healthz"))[0] == 200
        assert (await probe(http, "/readyz"))[0] == 200


async def test_head_has_no_body_and_other_methods_are_405() -> None:
    http = AsgiClient(HttpApp(adder_deck("probes")))
    status, body, headers = await probe(http, "/readyz", "HEAD")
    assert (status, body, headers["content-length"]) == (200, b"", "6")
    status, body, headers = await probe(http, "/healthz", "POST")
    assert (status, headers["allow"]) == (405, "GET, HEAD")


async def test_readyz_is_503_from_the_start_of_a_drain_while_healthz_stays_200() -> None:
    app = HttpApp(adder_deck("draining"))
    http = AsgiClient(app)
    app.hand_over()  # a process of a fleet, stopping: its streams end, its clients move on
    assert await probe(http, "/readyz") == (503, b"not ready\n", {"content-type": "text/plain; charset=utf-8",
                                                                  "cache-control": "no-store",
                                                                  "content-length": "10"})  # fmt: skip
    assert (await probe(http, "/healthz"))[0] == 200
    app.begin_shutdown()
    assert (await probe(http, "/readyz"))[0] == 503


async def test_readyz_follows_the_shared_backend(private_redis: RedisServer) -> None:
    deck = adder_deck("fleet-member")
    deck.use_backends(private_redis.url)
    app = HttpApp(deck)
    http = AsgiClient(app)
    assert (await probe(http, "/readyz"))[0] == 503  # not open yet: the fleet's definitions are not read
    await deck.open_backends()
    try:
        assert (await probe(http, "/readyz"))[0] == 200
        private_redis.stop()
        assert (await probe(http, "/readyz"))[0] == 503  # within PING_TIMEOUT: the probe never hangs
        assert (await probe(http, "/healthz"))[0] == 200  # the process itself is fine
        private_redis.start()
        assert (await probe(http, "/readyz"))[0] == 200  # back by itself
    finally:
        await deck.aclose()
    assert PING_TIMEOUT <= 1.0


async def test_paths_are_configurable_and_none_turns_a_probe_off() -> None:
    http = AsgiClient(HttpApp(adder_deck("paths"), healthz_path="/live", readyz_path=None))
    assert (await probe(http, "/live"))[0] == 200
    response = await http.request("GET", path="/readyz")
    assert response.status == 404  # not a probe any more: the app's own 404 for what is not its endpoint
    await response.body()
    with pytest.raises(ValueError, match="must start with '/'"):
        HttpApp(adder_deck("bad"), healthz_path="healthz")
    with pytest.raises(ValueError, match="is both a health probe and a route"):
        HttpApp(adder_deck("clash"), path="/healthz")


def test_a_bad_probe_path_on_the_command_line_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "tooldeck", "serve", "--http", "--readyz-path", "ready"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "--readyz-path: must be a path from the root (like /healthz), or '' for none, got 'ready'" in done.stderr
