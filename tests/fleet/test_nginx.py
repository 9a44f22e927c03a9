"""The fleet behind nginx, configured with the README's text word for word (its ports replaced by the test's): the
load of ``load.py`` through one round-robin upstream of three processes, one of them SIGKILLed mid-load.

nginx is Debian's package (``.ci/run`` installs it), run as this test's own process with its pid, logs and
temporary files in the test's directory. Without nginx the test is skipped, unless ``$TOOLDECK_REQUIRE_NGINX`` is
set: then it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fleet.cluster import NODES, Fleet, fleet
from fleet.load import Load
from fleet.test_load import GRACE, LEASE, judge, print_report
from http_client import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
README_PORTS = {"8001": "n1", "8002": "n2", "8003": "n3"}  # the upstream's servers in the README's text


def nginx_binary() -> str | None:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None and os.environ.get("TOOLDECK_REQUIRE_NGINX"):
        pytest.fail("nginx is not installed and $TOOLDECK_REQUIRE_NGINX is set (.ci/run installs it)")
    return found


def readme_nginx() -> str:
    """The nginx configuration of the README's "Running several processes", as it is written there."""
    section = README.read_text().split("## Running several processes", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```nginx\n(.*?)```", section, re.S)
    return block


def configuration(directory: Path, running: Fleet, port: int) -> str:
    """nginx.conf: the README's text with this test's ports, inside what runs nginx from ``directory``."""
    text = readme_nginx()
    for readme_port, node in README_PORTS.items():
        assert f"127.0.0.1:{readme_port};" in text
        text = text.replace(f"127.0.0.1:{readme_port};", f"127.0.0.1:{running.ports[node]};")
    assert "listen 8000;" in text
    text = text.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    temp = "\n".join(f"    {kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                            "uwsgi", "scgi"))  # fmt: skip
    user = "user root;\n" if os.geteuid() == 0 else ""  # as root nginx would run its worker as nobody
    return (f"{user}worker_processes 1;\npid {directory / 'nginx.pid'};\nerror_log {directory / 'error.log'} warn;\n"
            f"events {{\n    worker_connections 1024;\n}}\nhttp {{\n    access_log off;\n{temp}\n\n{text}}}\n")  # fmt: skip


@contextmanager
def nginx(binary: str, directory: Path, running: Fleet) -> Iterator[str]:
    directory.mkdir()
    port = free_port()
    conf = directory / "nginx.conf"
    conf.write_text(configuration(directory, running, port))
    checked = subprocess.run([binary, "-t", "-c", str(conf), "-p", str(directory), "-e", str(directory / "error.log")],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(directory), "-e", str(directory / "error.log"),
                             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:  # a port that is not open yet: nothing else to wait on across processes
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
                time.sleep(0.05)  # a poll interval
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()  # SIGTERM: nginx's fast shutdown, its worker with it
        proc.communicate(timeout=30)


@pytest.mark.slow
def test_the_readme_nginx_configuration_balances_the_fleet_and_survives_a_killed_process(
    redis_url: str, tmp_path: Path
) -> None:
    binary = nginx_binary()
    if binary is None:
        pytest.skip("nginx is not installed (set $TOOLDECK_REQUIRE_NGINX to make this a failure)")
    with fleet(tmp_path, redis_url, lease=LEASE) as running, nginx(binary, tmp_path / "nginx", running) as url:
        load = Load([url], clients=16)
        try:
            load.start()
            load.wait_for_operations(80)
            running.kill("n2")
            killed_at = time.monotonic()
            load.wait_for_operations(sum(load.seen.operations.values()) + 80)
            while time.monotonic() < killed_at + LEASE + GRACE:  # the load goes on while the takeover happens
                time.sleep(0.1)  # a poll interval
            load.stop()
            load.sessions_alive()
        finally:
            load.close()
        # What nginx sent where is its own: a lost request or a task is judged as if on the killed process.
        report = judge(running, load, url, killed_at)
        assert len([trail for trail in running.audit_trails() if trail.stat().st_size]) == len(NODES)  # all served
        print_report("through nginx (round robin), SIGKILL mid-load", report, tmp_path)
