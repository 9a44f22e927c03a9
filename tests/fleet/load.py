"""The fleet's load: 32 clients, each with a session of its own and sending each request to the next process, mixing
plain calls, task-augmented calls (``tasks/get`` polled until the task ends), elicitation, sampling, cancellation,
a level-5 tool, a resource subscription and ``list_changed`` — and what they saw, for the tests to judge.

Each client runs the operations of ``OPERATIONS`` in turn, starting at an offset of its own, until the load is
stopped; every fourth client also holds its session's GET stream (``Listener``), subscribes to ``fleet://board``
and, in its turn, touches the board or toggles a prompt and waits for the notification on that stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.cluster import TERMINAL, TOKENS, Listener, Lost, Refused, RoundRobin, Tally

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "fleet-model"}
TASK_SECONDS = 1.5  # how long a task's work takes
NOTIFIED_WITHIN = 5.0  # seconds a notification may take to reach the GET stream


@dataclass
class Task:
    tool: str
    tag: str
    task_id: str
    url: str  # the process the task was created on
    created: float
    status: str = "working"
    message: str | None = None
    ended: float | None = None  # when the client first saw it ended


@dataclass
class Seen:
    """What the load saw, shared by its clients (under ``lock``)."""

    tally: Tally = field(default_factory=Tally)
    tasks: list[Task] = field(default_factory=list)
    calls: list[tuple[str, str, str, str, float]] = field(default_factory=list)  # answered tools/call:
    # (session, request id, tool, the process that answered, when)
    errors: list[str] = field(default_factory=list)
    operations: dict[str, int] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)  # tags of naps whose stream ended without a response
    notified: dict[str, int] = field(default_factory=dict)  # notification -> how many arrived in time
    missed: dict[str, int] = field(default_factory=dict)  # notification -> how many did not
    sessions: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, counter: dict[str, int], name: str) -> None:
        with self.lock:
            counter[name] = counter.get(name, 0) + 1


class Worker:
    """One client of the load, in a thread of its own."""

    def __init__(self, load: Load, index: int) -> None:
        self.load = load
        self.index = index
        self.name = f"c{index}"
        answers = {
            "elicitation/create": lambda params: {"action": "accept",
                                                  "content": {"word": params["message"].split()[-1].rstrip("?")}},
            "sampling/createMessage": lambda params: SAMPLED,
        }  # fmt: skip
        self.client = RoundRobin(load.urls, load.token, load.seen.tally, name=self.name, start=index,
                                 answers=answers)  # fmt: skip
        self.listener: Listener | None = None
        self.serial = 0

    def tag(self) -> str:
        self.serial += 1
        return f"{self.name}.{self.serial}"

    def run(self) -> None:
        seen = self.load.seen
        try:
            self.client.initialize({"elicitation": {}, "sampling": {}})
            with seen.lock:
                seen.sessions.append(self.client.session or "")
            if self.index % 4 == 0:
                self.listener = Listener(self.client).start()
                self.client.result("resources/subscribe", {"uri": "fleet://board"})
        except Exception as exc:
            seen.errors.append(f"{self.name} could not start: {exc!r}")
            self.load.ready.release()
            return
        self.load.ready.release()
        operations = [op for op in OPERATIONS if self.listener is not None or op not in LISTENING]
        turn = self.index
        while not self.load.stopping.is_set():
            operation = operations[turn % len(operations)]
            turn += 1
            try:
                operation(self)
                seen.count(seen.operations, operation.__name__)
            except Lost:
                pass  # judged by the test: only what was in flight on a process that died may be lost
            except Exception as exc:
                seen.errors.append(f"{self.name} {operation.__name__}: {exc!r}")
        if self.listener is not None:
            self.listener.stop()
            seen.errors.extend(f"{self.name} listener: {error}" for error in self.listener.errors)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request_id = self.client.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}  # fmt: skip
        reply = self.client.post(message)
        assert reply is not None and "result" in reply, reply
        self.answered(request_id, name)
        return reply["result"]  # type: ignore[no-any-return]

    def answered(self, request_id: str, name: str) -> None:
        with self.load.seen.lock:
            self.load.seen.calls.append((self.client.session or "", request_id, name, self.client.last_url,
                                         time.monotonic()))  # fmt: skip


# --- the operations --------------------------------------------------------------------------------------------------


def echo(worker: Worker) -> None:
    tag = worker.tag()
    result = worker.call("echo", {"tag": tag})
    assert result["content"][0]["text"].startswith(f"{tag}@"), result


def admin(worker: Worker) -> None:
    tag = worker.tag()
    assert worker.call("admin", {"tag": tag})["content"][0]["text"] == f"admin {tag}"


def ask(worker: Worker) -> None:
    tag = worker.tag()
    assert worker.call("ask", {"tag": tag})["content"][0]["text"] == f"{tag}: {tag}"


def think(worker: Worker) -> None:
    tag = worker.tag()
    assert worker.call("think", {"tag": tag})["content"][0]["text"] == f"{tag}: sampled"


def _task(worker: Worker, tool: str) -> None:
    load, client = worker.load, worker.client
    tag = worker.tag()
    request_id = client.next_id()
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": tool, "arguments": {"tag": tag, "seconds": TASK_SECONDS}, "task": {"ttl": 600_000}}}  # fmt: skip
    reply = client.post(message)
    assert reply is not None and "result" in reply, reply
    worker.answered(request_id, tool)
    created = reply["result"]["task"]
    task = Task(tool, tag, created["taskId"], client.last_url, time.monotonic(), created["status"])
    with load.seen.lock:
        load.seen.tasks.append(task)
    deadline = time.monotonic() + load.task_deadline
    state = created
    while state["status"] not in TERMINAL:
        if time.monotonic() > deadline:
            raise AssertionError(f"task {tag} ({task.task_id}) still {state['status']} after {load.task_deadline}s")
        time.sleep(min(state.get("pollInterval", 250), 250) / 1000)  # the client's poll interval
        try:
            state = client.result("tasks/get", {"taskId": task.task_id})
        except Lost:
            continue  # that tasks/get was in flight on a process that died: ask the next one
        task.status = state["status"]
        task.message = state.get("statusMessage")
    task.status, task.message, task.ended = state["status"], state.get("statusMessage"), time.monotonic()
    if task.status == "completed":
        result = client.result("tasks/result", {"taskId": task.task_id})
        assert result["content"][0]["text"] == f"{tool} {tag} done", result


def job(worker: Worker) -> None:
    _task(worker, "job")


def redo(worker: Worker) -> None:
    _task(worker, "redo")


def nap_cancelled(worker: Worker) -> None:
    """A call that logs, then sleeps; cancelled (through the next process) once its stream has begun."""
    client = worker.client
    tag = worker.tag()
    request_id = client.next_id()
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": "nap", "arguments": {"tag": tag, "seconds": 60}}}  # fmt: skip
    with client._send(message) as (_, response):
        assert response.status_code == 200, response.read()
        messages = client._messages(response)
        first = next(messages)
        assert first.get("method") == "notifications/message", first
        client.notify("notifications/cancelled", {"requestId": request_id, "reason": "the load cancels it"})
        rest = list(messages)
    assert not [m for m in rest if m.get("id") == request_id], rest  # a cancelled request gets no response
    with worker.load.seen.lock:
        worker.load.seen.cancelled.append(tag)


def touch(worker: Worker) -> None:
    assert worker.listener is not None
    worker.listener.drain()
    worker.call("touch", {})
    _notified(worker, "notifications/resources/updated")


def toggle(worker: Worker) -> None:
    assert worker.listener is not None
    worker.listener.drain()
    worker.call("toggle", {})
    _notified(worker, "notifications/prompts/list_changed")


def _notified(worker: Worker, method: str) -> None:
    assert worker.listener is not None
    seen = worker.load.seen
    try:
        worker.listener.wait_for(method, NOTIFIED_WITHIN)
    except TimeoutError:
        seen.count(seen.missed, method)
    else:
        seen.count(seen.notified, method)


OPERATIONS: list[Callable[[Worker], None]] = [echo, job, ask, touch, redo, think, nap_cancelled, admin, toggle]
LISTENING = (touch, toggle)


class Load:
    """``clients`` workers against ``urls``; ``start`` them, ``stop`` them (each finishes what it is doing)."""

    def __init__(self, urls: list[str], *, clients: int = 32, token: str = TOKENS["alice"],
                 task_deadline: float = 60.0) -> None:  # fmt: skip
        self.urls = urls
        self.token = token
        self.task_deadline = task_deadline
        self.seen = Seen()
        self.stopping = threading.Event()
        self.ready = threading.Semaphore(0)
        self.workers = [Worker(self, index) for index in range(clients)]
        self.threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in self.workers]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        for _ in self.threads:
            assert self.ready.acquire(timeout=60), "a client did not start"

    def stop(self, timeout: float = 90.0) -> None:
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(deadline - time.monotonic(), 0.1))
        stuck = [thread.name for thread in self.threads if thread.is_alive()]
        assert not stuck, f"clients still busy {timeout}s after the load stopped: {stuck}"

    def wait_for_operations(self, count: int, timeout: float = 60.0) -> None:
        """Until the clients have done ``count`` operations in all; fails at once when one failed."""
        deadline = time.monotonic() + timeout
        while sum(self.seen.operations.values()) < count:
            assert not self.seen.errors, "\n".join(self.seen.errors[:20])
            assert time.monotonic() < deadline, f"only {self.seen.operations} done in {timeout}s"
            time.sleep(0.05)  # a poll interval over the clients' counters

    def close(self) -> None:
        """Stop the clients without waiting for them (their threads end when the fleet's processes do)."""
        self.stopping.set()
        if not any(thread.is_alive() for thread in self.threads):
            for worker in self.workers:
                worker.client.close()

    def sessions_alive(self) -> None:
        """Each client's session still answers, on every process that is up (one round of calls)."""
        for worker in self.workers:
            for _ in self.urls:
                echo(worker)

    def report(self) -> dict[str, Any]:
        seen, tally = self.seen, self.seen.tally
        return {
            "clients": len(self.workers),
            "requests": tally.requests,
            "answered": tally.answered,
            "lost": len(tally.lost),
            "redirected": tally.redirected,
            "resent": tally.resent,
            "tool calls answered": len(seen.calls),
            "tasks": len(seen.tasks),
            "operations": dict(sorted(seen.operations.items())),
            "cancelled": len(seen.cancelled),
            "notified": dict(seen.notified),
            "missed notifications": dict(seen.missed),
            "errors": len(seen.errors),
        }


__all__ = ["Load", "Refused", "Task"]
