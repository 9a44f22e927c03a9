"""The 2026-07-28 (modern, stateless) rows over stdio, each measured against a 2025-11-25 session of the same server
in interleaved rounds: the per-request envelope, the reply checks, sequential tools/call and tools/list.

Over stdio the first request decides the era of the connection, so each era has a process of its own: one that went
through `initialize`, and one whose first request carried the envelope (no handshake, no session).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import orjson

from .measure import Plan, cpu_delta, now, percentile, text_ok
from .process import ServerFailed
from .stdio import StdioServer

MODERN_VERSION = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tooldeck-bench", "version": "1.0.0"},  # clients SHOULD send it
}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def message(request_id: int, method: str, params: dict[str, Any] | None = None, modern: bool = False) -> bytes:
    """One JSON-RPC request; ``modern`` adds the 2026-07-28 envelope to its params' ``_meta``."""
    found: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if modern:
        found["params"] = {**(params or {}), "_meta": ENVELOPE}
    elif params is not None:
        found["params"] = params
    return orjson.dumps(found)


def modern_text_ok(reply: dict[str, Any], request_id: int, text: str) -> bool:
    """`text_ok`, and the result is a 2026-07-28 one: `resultType` "complete"."""
    return text_ok(reply, request_id, text) and reply["result"].get("resultType") == "complete"


def reply_check(modern: bool) -> Callable[[dict[str, Any], int, str], bool]:
    return modern_text_ok if modern else text_ok


class Era:
    """One stdio process speaking one era: its request bytes and its reply check."""

    def __init__(self, server: StdioServer, modern: bool) -> None:
        self.server = server
        self.modern = modern
        self.ok = reply_check(modern)
        self.errors = 0
        self.first_error: str | None = None
        self.server_info: Any = None

    @property
    def name(self) -> str:
        return "modern" if self.modern else "session"

    def open(self) -> None:
        """The 2025 process goes through the lifecycle; the modern one starts with a request carrying the envelope
        (which fixes its era) and must answer with `resultType` and the server's identity in `_meta`."""
        if not self.modern:
            self.server_info = self.server.initialize().get("serverInfo")
            return
        self.server.next_id += 1
        self.server.write(message(self.server.next_id, "tools/list", modern=True) + b"\n")
        reply, _ = self.server.read_reply()
        result = reply.get("result")
        if reply.get("id") != self.server.next_id or not isinstance(result, dict) or "resultType" not in result:
            raise ServerFailed(f"no 2026-07-28 answer over stdio: {orjson.dumps(reply)[:300].decode()}")
        self.server_info = (result.get("_meta") or {}).get(SERVER_INFO)

    def fail(self, what: str, reply: dict[str, Any]) -> None:
        self.errors += 1
        self.first_error = self.first_error or f"{what}: " + orjson.dumps(reply)[:300].decode()

    def call(self, text: str, tool: str = "echo") -> tuple[int, bytes]:
        self.server.next_id += 1
        params = {"name": tool, "arguments": {"text": text}}
        return self.server.next_id, message(self.server.next_id, "tools/call", params, self.modern) + b"\n"

    def warm_up(self, calls: int) -> None:
        for _ in range(calls):
            request_id, data = self.call("warm-up")
            self.server.write(data)
            reply, _ = self.server.read_reply()
            if not self.ok(reply, request_id, "warm-up"):
                self.fail(f"id {request_id}", reply)

    def sequential_block(self, seconds: float) -> dict[str, Any]:
        """tools/call echo one at a time for `seconds`: latency samples, calls/s, server CPU per call."""
        server, samples = self.server, list[int]()
        cpu_before = server.cpu_ns()
        started = now()
        deadline = started + int(seconds * 1e9)
        while True:
            text = f"hello {len(samples)}"
            request_id, data = self.call(text)
            t0 = now()
            server.write(data)
            reply, _ = server.read_reply()
            t1 = now()
            samples.append(t1 - t0)
            if not self.ok(reply, request_id, text):
                self.fail(f"id {request_id}", reply)
            if t1 >= deadline:
                break
        return block(samples, now() - started, cpu_before, server.cpu_ns())

    def listing(self, wanted: int) -> tuple[int, int]:
        """One whole tools/list (following nextCursor, each page a request of this era): the size in bytes and
        the number of pages; a wrong page (id, tool count, `resultType` on the modern one) is counted."""
        server = self.server
        names: set[str] = set()
        size = pages = 0
        cursor = None
        while True:
            server.next_id += 1
            params = None if cursor is None else {"cursor": cursor}
            server.write(message(server.next_id, "tools/list", params, self.modern) + b"\n")
            reply, nbytes = server.read_reply()
            size, pages = size + nbytes, pages + 1
            result = reply.get("result") if reply.get("id") == server.next_id else None
            if not isinstance(result, dict) or (self.modern and result.get("resultType") != "complete"):
                self.fail(f"tools/list id {server.next_id}", reply)
                return size, pages
            names.update(tool.get("name") for tool in result.get("tools", ()))
            cursor = result.get("nextCursor")
            if cursor is None:
                if len(names) != wanted:
                    self.fail(f"tools/list: {len(names)} tools, expected {wanted}", {})
                return size, pages

    def listing_block(self, seconds: float, wanted: int) -> dict[str, Any]:
        """Whole listings one after another for `seconds` (at least one): p50 and server CPU per listing."""
        samples: list[int] = []
        size = pages = 0
        cpu_before = self.server.cpu_ns()
        started = now()
        deadline = started + int(seconds * 1e9)
        while not samples or now() < deadline:
            t0 = now()
            size, pages = self.listing(wanted)
            samples.append(now() - t0)
        return {**block(samples, now() - started, cpu_before, self.server.cpu_ns()), "bytes": size, "pages": pages}


def block(samples: list[int], wall_ns: int, cpu_before: Any, cpu_after: Any) -> dict[str, Any]:
    """A block's figures: p50 (µs), operations per second, server CPU per operation (µs), kept samples."""
    cpu_ns, source = cpu_delta(cpu_before, cpu_after)
    return {
        "calls": len(samples),
        "p50_us": percentile(samples, 0.5) / 1e3,
        "calls_per_s": len(samples) / (wall_ns / 1e9),
        "cpu_us_per_call": cpu_ns / len(samples) / 1e3,
        "cpu_source": source,
        "samples": samples,
    }


def interleaved(eras: tuple[Era, Era], plan: Plan, measure: Callable[[Era], dict[str, Any]]) -> dict[str, Any]:
    """`plan.rounds` rounds of one block per era, the order alternating; per era: p50 of all samples, medians of the
    rounds' rates and CPU per call, every round kept (so the budget can take the ratio round by round)."""
    rounds: dict[str, list[dict[str, Any]]] = {era.name: [] for era in eras}
    for number in range(plan.rounds):
        for era in eras if number % 2 == 0 else eras[::-1]:
            rounds[era.name].append(measure(era))
    found = {}
    for era in eras:
        done = rounds[era.name]
        samples = [s for r in done for s in r.pop("samples")]
        found[era.name] = {
            "calls": len(samples),
            "p50_us": percentile(samples, 0.5) / 1e3,
            "p99_us": percentile(samples, 0.99) / 1e3,
            **{key: statistics.median(r[key] for r in done) for key in ("calls_per_s", "cpu_us_per_call")},
            **({"bytes": done[-1]["bytes"], "pages": done[-1]["pages"]} if "bytes" in done[-1] else {}),
            "rounds": done,
            "errors": era.errors,
            "first_error": era.first_error,
            "server_info": era.server_info,
        }
    return found


def echo_rows(session: StdioServer, modern: StdioServer, plan: Plan) -> dict[str, Any]:
    """`session_echo` and `modern_echo`: tools/call echo one at a time, a 2025 session against modern requests,
    `plan.warmup` calls each first, then `plan.rounds` rounds of `plan.block_s` blocks."""
    eras = (Era(session, modern=False), Era(modern, modern=True))
    for era in eras:
        era.open()
        era.warm_up(plan.warmup)
    found = interleaved(eras, plan, lambda era: era.sequential_block(plan.block_s))
    return {"session_echo": found["session"], "modern_echo": found["modern"]}


def list_rows(session: StdioServer, modern: StdioServer, plan: Plan) -> dict[str, Any]:
    """`session_tools_list` and `modern_tools_list`: whole tools/list of the `plan.list_tools`-tool deck, the same
    way (`plan.list_warmup` listings each first)."""
    wanted = plan.list_tools + 3
    eras = (Era(session, modern=False), Era(modern, modern=True))
    for era in eras:
        era.open()
        for _ in range(plan.list_warmup):
            era.listing(wanted)
    found = interleaved(eras, plan, lambda era: era.listing_block(plan.block_s, wanted))
    return {"session_tools_list": found["session"], "modern_tools_list": found["modern"]}
