"""A fleet of real ``tooldeck serve --http --backend redis://...`` processes, and a client that goes round the fleet.

``Fleet`` runs the deck ``fleet_deck.py`` as three processes (nodes ``n1``, ``n2``, ``n3``, each on a port of its
own) over one Redis, with a security policy (API keys, a level-5 tool, a rate limit, the audit trail in the fleet's
directory) and a short task lease. Each process writes its log to ``<node>.log`` there, never to a pipe that could
fill up while nobody reads it.

``RoundRobin`` is one client with one session that sends every request to the next process after the one it used
last, as a round-robin balancer with no sticky sessions does. A request that finds no process listening on its port
(connection refused: the process is down) goes to the next process instead, as a balancer does with a dead
upstream; a request whose connection breaks after it was sent is *lost*, never retried: it was in flight on a
process that died, and retrying a call is not the client's to decide. Every message received is schema-checked.
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from http_client import ACCEPT_BOTH, free_port
from mcp_schema import LATEST, WireChecker
from stdio_client import ROOT, TOOLDECK
from tooldeck.security.tokens import hash_token

DECK = str(Path(__file__).resolve().parent / "fleet_deck.py")
NODES = ("n1", "n2", "n3")
TOKENS = {"alice": "alice-secret", "bob": "bob-secret"}  # alice holds fleet:admin, bob holds nothing
STOPPED = "The process running this task stopped before the task finished"
TERMINAL = {"completed", "failed", "cancelled"}


def policy(audit: Path, per_principal: str = "100000/minute", burst: int | None = None) -> str:
    """The fleet's policy: API keys for alice and bob, a rate limit, and the audit trail ``audit``."""
    limits = f'per_principal = "{per_principal}"\n' + (f"burst = {burst}\n" if burst is not None else "")
    return (
        "[authentication]\nrequired = true\n\n"
        f'[[authentication.tokens]]\nsubject = "alice"\nsha256 = "{hash_token(TOKENS["alice"])}"\n'
        'scopes = ["fleet:admin"]\n\n'
        f'[[authentication.tokens]]\nsubject = "bob"\nsha256 = "{hash_token(TOKENS["bob"])}"\n\n'
        f"[limits]\n{limits}\n"
        f'[audit]\nfile = "{audit}"\n'
    )


class Fleet:
    """Three processes of ``fleet_deck.py`` over the Redis at ``redis_url``; ``start``/``kill``/``stop`` one."""

    def __init__(self, directory: Path, redis_url: str, *, lease: float = 3.0, policy_text: str | None = None) -> None:
        self.directory = directory
        self.redis_url = redis_url
        self.lease = lease
        self.runs = directory / "runs.log"
        self.audit = directory / "audit.jsonl"
        self.policy = directory / "policy.toml"
        self.policy.write_text(policy_text or policy(self.audit))
        self.ports = {node: free_port() for node in NODES}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.down: set[str] = set()  # nodes killed or stopped, not started again

    def url(self, node: str) -> str:
        return f"http://127.0.0.1:{self.ports[node]}/mcp"

    @property
    def urls(self) -> list[str]:
        return [self.url(node) for node in NODES]

    def log(self, node: str) -> str:
        path = self.directory / f"{node}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, node: str, timeout: float = 30.0) -> None:
        env = {**os.environ, "FLEET_RUNS": str(self.runs), "FLEET_LEASE": str(self.lease)}
        with open(self.directory / f"{node}.log", "ab") as log:
            proc = subprocess.Popen([*TOOLDECK, "serve", DECK, "--http", "--quiet", "--port", str(self.ports[node]),
                                     "--node-id", node, "--backend", self.redis_url, "--policy", str(self.policy),
                                     "--trusted-proxy", "127.0.0.1"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT, env=env)  # fmt: skip
        self.procs[node] = proc
        deadline = time.monotonic() + timeout
        while True:  # a port that is not open yet: nothing to wait on across processes but the port itself
            try:
                with socket.create_connection(("127.0.0.1", self.ports[node]), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise RuntimeError(f"{node} did not start: {self.log(node)[-3000:]}") from None
                time.sleep(0.05)  # a poll interval
        self.down.discard(node)

    def start_all(self) -> None:
        for node in NODES:
            self.start(node)

    def kill(self, node: str) -> None:
        """SIGKILL: the process dies at once, with whatever it had in flight."""
        self.down.add(node)
        self.procs[node].kill()
        self.procs[node].wait(timeout=30)

    def stop(self, node: str, timeout: float = 30.0) -> int:
        """SIGTERM, as a deployment stops a process: it drains what is in flight and exits; returns its status."""
        self.down.add(node)
        self.procs[node].send_signal(signal.SIGTERM)
        return self.procs[node].wait(timeout=timeout)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)

    def run_counts(self) -> dict[tuple[str, str], list[str]]:
        """(what, tag) -> the nodes it ran on, in order, from the runs file."""
        counts: dict[tuple[str, str], list[str]] = {}
        if self.runs.exists():
            for line in self.runs.read_text().splitlines():
                what, tag, node = line.split()
                counts.setdefault((what, tag), []).append(node)
        return counts

    def audit_trails(self) -> list[Path]:
        return sorted(self.directory.glob("audit.*.jsonl*"))

    def audit_records(self) -> list[dict[str, Any]]:
        records = []
        for trail in self.audit_trails():
            for line in trail.read_bytes().splitlines():
                try:
                    records.append(orjson.loads(line))
                except orjson.JSONDecodeError:  # a last line cut short by a killed process: never answered
                    pass
        return records

    def verify_audit(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*TOOLDECK, "audit", "verify", *map(str, self.audit_trails())], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)  # fmt: skip


@contextmanager
def fleet(directory: Path, redis_url: str, **options: Any) -> Iterator[Fleet]:
    running = Fleet(directory, redis_url, **options)
    try:
        running.start_all()
        yield running
    finally:
        running.close()


# --- the client ------------------------------------------------------------------------------------------------------


class Lost(Exception):
    """A request whose connection broke after it was sent: in flight on a process that died."""

    def __init__(self, url: str, what: str, started: float) -> None:
        super().__init__(f"{what} lost at {url}")
        self.url = url
        self.what = what
        self.started = started


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str | None, Any]]:
    """Each event of an SSE stream's lines, once whole: the last event id seen so far, and its JSON message (None
    for an event without one, as the priming event)."""
    event_id: str | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line == "":
            yield event_id, orjson.loads("\n".join(data)) if data and data != [""] else None
            data = []


class Refused(Exception):
    """An HTTP answer that is not 200/202: ``status`` and the JSON-RPC error body."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class Tally:
    """What a client did, for the test's report (shared by the clients, under ``lock``)."""

    requests: int = 0  # HTTP requests that reached a process (retries after a refused connection not counted twice)
    answered: int = 0
    lost: list[Lost] = field(default_factory=list)
    redirected: int = 0  # connections refused by a dead process, sent to the next one
    resent: int = 0  # notifications and responses whose connection broke, sent again to the next process
    not_found: list[str] = field(default_factory=list)  # 404s: a session "not found"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)


Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


class RoundRobin:
    """One client, one session, every request to the next process (see the module docstring)."""

    def __init__(self, urls: list[str], token: str | None, tally: Tally, *, name: str = "c", start: int = 0,
                 answers: dict[str, Answer] | None = None, timeout: float = 30.0) -> None:  # fmt: skip
        self.urls = urls
        self.token = token
        self.tally = tally
        self.name = name
        self.turn = start
        self.ids = itertools.count(1)
        self.session: str | None = None
        self.http = httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0))
        self.checker = WireChecker(name=f"RoundRobin({name})")
        self.answers = answers or {}
        self.last_url = ""

    def close(self) -> None:
        self.http.close()

    def next_id(self) -> str:
        return f"{self.name}-{next(self.ids)}"

    def headers(self, version: str | None = LATEST) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        if self.session is not None:
            headers["mcp-session-id"] = self.session
        if version is not None:
            headers["mcp-protocol-version"] = version
        return headers

    @contextmanager
    def _send(self, message: Any, version: str | None = LATEST) -> Iterator[tuple[str, httpx.Response]]:
        """POST ``message`` to the next process; a refused connection moves on to the one after (at most once
        round the fleet), and so does a notification or a response whose connection broke."""
        self.checker.sent(message)
        body = orjson.dumps(message)
        first = self.turn
        self.turn += 1
        for attempt in range(len(self.urls)):
            url = self.urls[(first + attempt) % len(self.urls)]
            started = time.monotonic()
            answered = False
            try:
                with self.http.stream("POST", url, content=body, headers=self.headers(version)) as response:
                    self.tally.add(requests=1)
                    if response.status_code in (502, 504) and "json" not in response.headers.get("content-type", ""):
                        raise httpx.RemoteProtocolError(f"a balancer's {response.status_code}: its process died")
                    answered = True  # from here on what breaks is thrown in at the yield: never sent again
                    self.last_url = url
                    if response.status_code == 404:
                        self.tally.not_found.append(f"{url} {self.session}: {response.read()[:200]!r}")
                    yield url, response
                    return
            except httpx.ConnectError:
                if attempt == len(self.urls) - 1:
                    raise
                self.tally.add(redirected=1)
                self.turn += 1
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if not is_request(message) and not answered and attempt < len(self.urls) - 1:
                    self.tally.add(resent=1)  # a notification or a response: safe to send twice, so sent again
                    continue
                what = message.get("method", "response") if isinstance(message, dict) else "batch"
                lost = Lost(url, f"{what} ({exc!r})", started)
                with self.tally.lock:
                    self.tally.lost.append(lost)
                raise lost from None

    def _messages(self, response: httpx.Response) -> Iterator[Any]:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            data = response.read()
            if data:
                message = orjson.loads(data)
                self.checker.received(message)
                yield message
            return
        for _, message in sse_events(response.iter_lines()):
            if message is not None:
                self.checker.received(message)
                yield message

    def post(self, message: dict[str, Any], version: str | None = LATEST,
             on_message: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:  # fmt: skip
        """Send ``message``; answer the server's requests on its stream (each answer to the next process) and return
        the response (None for a notification or a response, and for a request whose stream ended without one)."""
        with self._send(message, version) as (_, response):
            if response.status_code == 202:
                return None
            for received in self._messages(response):
                if "method" in received and "id" in received:
                    self.answer(received)
                elif "method" in received:
                    if on_message is not None:
                        on_message(received)
                elif received.get("id") == message.get("id"):
                    if response.status_code != 200:
                        raise Refused(response.status_code, received)
                    self.tally.add(answered=1)
                    return received
            if response.status_code not in (200, 202):
                raise Refused(response.status_code, None)
        return None

    def answer(self, request: dict[str, Any]) -> None:
        """Answer a server->client request (elicitation, sampling) with a POST of its own, to the next process."""
        handler = self.answers.get(request["method"])
        result = handler(request["params"]) if handler is not None else None
        if result is None:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"],
                                     "error": {"code": -32601, "message": f"no handler for {request['method']}"}}  # fmt: skip
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        self.post(reply)

    def request(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if params is not None:
            message["params"] = params
        reply = self.post(message, **options)
        assert reply is not None, f"{method}: the stream ended without a response"
        return reply

    def result(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> Any:
        reply = self.request(method, params, **options)
        assert "result" in reply, reply
        return reply["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.post(message)

    def initialize(self, capabilities: dict[str, Any] | None = None) -> str:
        params = {"protocolVersion": LATEST, "capabilities": capabilities or {}, "clientInfo": {"name": self.name,
                                                                                                "version": "1"}}  # fmt: skip
        message = {"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize", "params": params}
        with self._send(message, version=None) as (_, response):
            assert response.status_code == 200, response.read()
            self.session = response.headers["mcp-session-id"]
            (reply,) = list(self._messages(response))
            assert "result" in reply, reply
            self.tally.add(answered=1)
        self.notify("notifications/initialized")
        return self.session

    def call(self, name: str, arguments: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        return self.result("tools/call", {"name": name, "arguments": arguments or {}}, **options)  # type: ignore[no-any-return]

    def run_task(self, name: str, arguments: dict[str, Any], deadline: float) -> tuple[dict[str, Any], str]:
        """Call ``name`` as a task and poll ``tasks/get`` (round robin) until it ends or ``deadline`` passes; returns
        its last status and its id."""
        created = self.result("tools/call", {"name": name, "arguments": arguments, "task": {"ttl": 600_000}})
        task = created["task"]
        while task["status"] not in TERMINAL and time.monotonic() < deadline:
            wait_a_little(min(task.get("pollInterval", 200), 250) / 1000)
            task = self.result("tasks/get", {"taskId": task["taskId"]})
        return task, task["taskId"]


def is_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


def wait_a_little(seconds: float) -> None:
    """A client's poll interval (what ``pollInterval`` asks of it), not a wait for something to happen."""
    time.sleep(seconds)


def code_in(message: str) -> str:
    found = re.search(r"enter the code (\d{6})", message)
    assert found is not None, message
    return found.group(1)


class Listener:
    """The session's GET stream, read in a thread of its own: every notification goes to ``messages``. When its
    process ends the stream, it opens it again on the next process with ``Last-Event-ID``, as a client resumes."""

    def __init__(self, client: RoundRobin) -> None:
        self.client = client
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, read=None))
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.last_event_id: str | None = None
        self.opened = threading.Event()
        self.stopped = False
        self.reconnects = 0
        self.broken: list[str] = []
        self.stream: Any = None
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name=f"listener-{client.name}", daemon=True)

    def start(self) -> Listener:
        self.thread.start()
        if not self.opened.wait(20):
            raise TimeoutError(f"the GET stream did not open: {self.errors}")
        return self

    def stop(self) -> None:
        self.stopped = True
        stream = self.stream
        if stream is not None:  # shut the connection down under the read, which then ends at once
            sock = stream.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.thread.join(10)
        self.http.close()

    def _run(self) -> None:
        client = self.client
        turn = client.turn
        while not self.stopped:
            url = client.urls[turn % len(client.urls)]
            turn += 1
            headers = {k: v for k, v in client.headers().items() if k != "content-type"} | {
                "accept": "text/event-stream"}  # fmt: skip
            if self.last_event_id is not None:
                headers["last-event-id"] = self.last_event_id
            try:
                with self.http.stream("GET", url, headers=headers) as response:
                    if response.status_code != 200:
                        self.errors.append(f"GET {url}: {response.status_code} {response.read()[:200]!r}")
                        if response.status_code == 404:
                            client.tally.not_found.append(f"GET {url} {client.session}")
                        return
                    self.stream = response.extensions.get("network_stream")
                    self.opened.set()
                    if self.stopped:
                        return
                    for event_id, message in sse_events(response.iter_lines()):
                        if event_id is not None:  # an event whole, its id too: what a resume starts after
                            self.last_event_id = event_id
                        if message is not None:
                            client.checker.received(message)
                            self.messages.put(message)
            except (httpx.TransportError, RuntimeError) as exc:  # RuntimeError: the client was closed by stop()
                if self.stopped:
                    return
                self.broken.append(f"GET {url}: {exc!r}")  # its process died: open it again on the next one
            if not self.stopped:
                self.reconnects += 1

    def wait_for(self, method: str, timeout: float = 10.0, match: Callable[[dict[str, Any]], bool] | None = None
                 ) -> dict[str, Any]:  # fmt: skip
        """The next notification ``method`` (others are dropped), within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {method} within {timeout}s on {self.client.name}'s GET stream")
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if message.get("method") == method and (match is None or match(message)):
                return message

    def drain(self) -> None:
        while True:
            try:
                self.messages.get_nowait()
            except queue.Empty:
                return
