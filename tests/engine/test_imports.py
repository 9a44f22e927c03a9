"""Nothing of ``redis`` is loaded unless a Redis backend is: not by ``import tooldeck``, the command line, the HTTP
transport, the seams' Protocols and in-memory implementations, nor by the engine's error type; the Redis
implementations do load it (with hiredis, its C parser)."""

from __future__ import annotations

import subprocess
import sys

from helpers import modules_added_by

CLIENT = ("redis", "hiredis", "valkey")


def loaded_clients(imports: str) -> list[str]:
    code = f"import sys\n{imports}\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {CLIENT!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(eval(done.stdout))


def test_a_deck_without_a_shared_backend_never_loads_the_redis_client() -> None:
    imports = ("import tooldeck, tooldeck.cli, tooldeck.transports.http, tooldeck.server.state, tooldeck.server.bus, "
               "tooldeck.server.events, tooldeck.security.limits, tooldeck.engine, tooldeck.engine.errors\n"
               "from tooldeck import Deck\nDeck('plain').http_app()")  # fmt: skip
    assert loaded_clients(imports) == []


def test_the_seams_modules_load_no_client_even_beside_the_server() -> None:
    added = modules_added_by(
        "import tooldeck.server.state, tooldeck.server.bus, tooldeck.server.events, tooldeck.security.limits, "
        "tooldeck.engine.errors",
        preload="import orjson, typing",
        forget=(),
    )
    assert "tooldeck.server.bus" in added and "tooldeck.engine.errors" in added
    assert [name for name in added if name.split(".")[0] in CLIENT] == []


def test_the_redis_implementations_load_the_client_and_its_c_parser() -> None:
    loaded = loaded_clients("import tooldeck.server.bus_redis")
    assert {"redis", "redis.asyncio", "hiredis"} <= set(loaded)
    assert not any(name.split(".")[0] == "valkey" for name in loaded)
