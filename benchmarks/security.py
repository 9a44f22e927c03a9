"""Benchmark the security layer: server CPU per call of one deck with its security on (JWT authentication over HTTP,
32 clients with 32 tokens, a level-5 tool with a scope, a rate limit, the audit trail on a file) against the same
deck with security off, over Streamable HTTP and stdio, sequential calls and 32 at a time. The budget is what
security adds to a call (on less off, the median of the per-round differences): 25 µs over HTTP, 10 µs over stdio.

Usage: .venv/bin/python benchmarks/security.py [--quick] [--json PATH] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import measure, measure_http, placement, process, report
from harness.http import Connection, HttpServer, free_port
from harness.measure import cpu_delta, now, server_env
from harness.measure_http import Checker
from harness.process import ServerFailed
from harness.servers import BENCH, ROOT, SERVERS_DIR, tooldeck_git
from harness.stdio import StdioServer

PYTHON = str(ROOT / ".venv/bin/python")
TOOLDECK = str(ROOT / ".venv/bin/tooldeck")
DECK = str(SERVERS_DIR / "security_server.py")
HTTP_ARGS = ("--http", "--host", "127.0.0.1", "--port", "{port}", "--json-response")
MODES = ("off", "default", "on")  # "default": no policy file (levels at 0, inputs limited, output sanitised)
BREAKDOWN = ("on-no-audit",)  # --breakdown: "on" without its [audit] table, to tell the trail's cost from the rest
RATIOS = (("on", "off"), ("default", "off"), ("on", "default"), ("on-no-audit", "off"), ("on", "on-no-audit"))
BUDGET_US = {"http": 25.0, "stdio": 10.0}  # what security may add to a call's server CPU (µs), on less off
SCOPE = "bench:call"
LEVEL = 5
ISSUER = "https://auth.bench.invalid"
KID = "bench-key-1"
RATE = "1000000/s"  # per principal: high enough never to refuse a call of the run


@dataclass(frozen=True)
class Plan:
    rounds: int = 12  # each: every mode's blocks, the order rotating
    warmup: int = 500  # calls per server before the rounds (sequential, then as many with 32 at a time)
    block_s: float = 0.4  # HTTP: how long a block of sequential calls, and a block of 32-client calls, lasts
    calls: int = 3000  # stdio: calls in a sequential block
    inflight_calls: int = 6000  # stdio: calls in a 32-in-flight block
    clients: int = 32  # HTTP sessions (one connection each), or calls outstanding over stdio
    profile_calls: int = 20000  # --profile: calls per transport for the cProfile of the "on" server


FULL = Plan()
QUICK = Plan(rounds=2, warmup=50, block_s=0.1, calls=300, inflight_calls=600, profile_calls=2000)


# --- the authorization server and the policies -------------------------------------------------------------------


class Issuer:
    """A stand-in authorization server: a fresh EC P-256 key, its public JWKS in a file, and access tokens it signs."""

    def __init__(self, directory: Path) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        self.key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid=KID, alg="ES256", use="sig")
        self.jwks = directory / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [jwk]}))

    def token(self, subject: str, audience: str) -> str:
        import jwt

        issued = int(time.time())
        claims = {"iss": ISSUER, "aud": audience, "sub": subject, "scope": SCOPE, "iat": issued, "exp": issued + 7200}
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": KID})


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string (same escapes)


def policy(mode: str, transport: str, directory: Path, resource: str | None, jwks: Path) -> Path | None:
    """The policy file of a mode (None: no --policy, the deck's defaults)."""
    if mode == "default":
        return None
    if mode == "off":
        text = "[sanitise]\nenabled = false\n\n[levels]\ndefault = 0\n"
    else:  # "on", and "on-no-audit"
        if transport == "http":
            text = (f"[authentication.jwt]\nissuer = {toml_string(ISSUER)}\naudience = {toml_string(resource or '')}\n"
                    f"jwks = {toml_string(str(jwks))}\n\n")  # fmt: skip
        else:
            text = f"[authentication.stdio]\nscopes = [{toml_string(SCOPE)}]\n\n"
        text += f'[limits]\nper_principal = "{RATE}"\n'
        if mode == "on":
            audit = directory / f"{transport}-audit.jsonl"
            text += f'\n[audit]\nfile = {toml_string(str(audit))}\nfsync = "interval"\n'
    path = directory / f"{transport}-{mode}.toml"
    path.write_text(text)
    return path


def server_argv(transport: str, policy_file: Path | None) -> list[str]:
    argv = [TOOLDECK, "serve", DECK, *(HTTP_ARGS if transport == "http" else ())]
    return argv + (["--policy", str(policy_file)] if policy_file is not None else [])


def deck_env(mode: str) -> dict[str, str]:
    return {**server_env(), "BENCH_SECURITY_LEVEL": str(LEVEL if mode.startswith("on") else 0)}


def thread_ns(pid: int) -> dict[str, int]:
    """CPU time so far (schedstat, ns) of the main thread (the event loop) and of all other live threads together
    (the audit writer, worker threads): which side pays. Python 3.11 names no OS threads, so tids tell them apart."""
    found = {"main": 0, "other threads": 0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                found["main" if tid == str(pid) else "other threads"] += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def by_thread(before: dict[str, int], after: dict[str, int], calls: int) -> dict[str, float]:
    return {name: (ns - before.get(name, 0)) / calls / 1e3 for name, ns in after.items()}


# --- HTTP -------------------------------------------------------------------------------------------------------


class BoundHttpServer(HttpServer):
    """An HttpServer on a port picked before its policy is written: the "on" policy names the server's URI (the
    audience its tokens must carry). The rest is the harness's HttpServer."""

    def __init__(self, port: int, argv: Sequence[str], env: Mapping[str, str], cwd: str, cpus: set[int] | None) -> None:
        self.port = port
        self.argv = [arg.replace("{port}", str(port)) for arg in argv]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.process = process.spawn_pinned(
            self.argv, env, cwd, cpus, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr
        )
        self.pid = self.process.pid
        self.connections: list[Connection] = []


class BearerConnection(Connection):
    """A keep-alive connection whose every request carries ``Authorization: Bearer <token>`` (none without one)."""

    def __init__(self, port: int, sock: Any, token: str | None) -> None:
        super().__init__(port, sock=sock)
        self.authorization = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""

    def request(self, body: bytes) -> bytes:
        """The harness's POST, with the Authorization line (if any) after the request line."""
        data = super().request(body)
        if not self.authorization:
            return data
        line, _, rest = data.partition(b"\r\n")
        return line + b"\r\n" + self.authorization + rest


def connect(server: HttpServer, token: str | None) -> BearerConnection:
    plain = server.connect()
    connection = BearerConnection(server.port, plain.sock, token)
    server.connections[-1] = connection
    return connection


def http_sequential(
    server: HttpServer, connection: BearerConnection, seconds: float, checker: Checker
) -> dict[str, Any]:
    """echo one call at a time on one session for `seconds` (the harness's, with the connection's Authorization)."""
    found = measure_http.sequential(server, connection, seconds, checker)
    return {key: found[key] for key in ("calls", "p50_us", "p99_us", "calls_per_s", "cpu_us_per_call", "cpu_source")}


class HttpSubject:
    """One mode's HTTP server: a session for sequential calls and `plan.clients` more, each with its own token."""

    def __init__(self, mode: str, server: HttpServer, tokens: list[str | None], plan: Plan) -> None:
        self.mode = mode
        self.server = server
        self.checker = Checker()
        self.connection = connect(server, tokens[0])
        self.connection.initialize()
        self.clients = [connect(server, token) for token in tokens[1:]]
        for connection in self.clients:
            connection.initialize()
        measure_http.warm_up(self.connection, plan.warmup, self.checker)
        with placement.yielding():
            measure_http.clients(server, self.clients, plan.warmup / 10_000, self.checker)
        self.rows: dict[str, list[dict[str, Any]]] = {"sequential": [], "concurrent": []}

    def round(self, plan: Plan) -> None:
        for connection in (self.connection, *self.clients):
            connection.reconnect()  # servers drop keep-alive connections idle for a few seconds
            measure_http.warm_up(connection, 1, self.checker)
        threads = thread_ns(self.server.pid)
        found = http_sequential(self.server, self.connection, plan.block_s, self.checker)
        self.rows["sequential"].append(
            {**found, "threads": by_thread(threads, thread_ns(self.server.pid), found["calls"])}
        )
        threads = thread_ns(self.server.pid)
        with placement.yielding():  # the client must not preempt the server mid-burst (README: "A client that yields")
            found = measure_http.clients(self.server, self.clients, plan.block_s, self.checker)
        self.rows["concurrent"].append(
            {
                key: found[key]
                for key in ("calls", "calls_per_s", "cpu_us_per_call", "cpu_source", "server_preempted_per_call")
            }
        )
        self.rows["concurrent"][-1]["threads"] = by_thread(threads, thread_ns(self.server.pid), found["calls"])

    def calls(self) -> int:
        """tools/call requests sent so far (each connection's initialize is id 1, every call takes the next id)."""
        return sum(connection.next_id - 1 for connection in (self.connection, *self.clients))

    def errors(self) -> dict[str, Any]:
        return {"errors": self.checker.errors, "first_error": self.checker.first_error}


# --- stdio ------------------------------------------------------------------------------------------------------


class StdioSubject:
    """One mode's stdio server: sequential blocks and 32-in-flight blocks of echo calls."""

    def __init__(self, mode: str, server: StdioServer, plan: Plan) -> None:
        self.mode = mode
        self.server = server
        self.errors_seen = 0
        server.initialize()
        self.errors_seen += measure.burst(server, 1, plan.warmup, "echo")
        self.errors_seen += measure.burst(server, plan.clients, plan.warmup, "echo")
        self.rows: dict[str, list[dict[str, Any]]] = {"sequential": [], "concurrent": []}

    def round(self, plan: Plan) -> None:
        server = self.server
        threads = thread_ns(server.pid)
        found = measure.sequential(server, "echo", replace(measure.FULL, warmup=0, calls=plan.calls))
        self.errors_seen += found["errors"]
        self.rows["sequential"].append({key: found[key] for key in ("calls", "p50_us", "p99_us", "calls_per_s",
                                                                    "cpu_us_per_call", "cpu_source")})  # fmt: skip
        self.rows["sequential"][-1]["threads"] = by_thread(threads, thread_ns(server.pid), plan.calls)
        threads = thread_ns(server.pid)
        cpu_before = server.cpu_ns()
        started = now()
        self.errors_seen += measure.burst(server, plan.clients, plan.inflight_calls, "echo")
        wall = now() - started
        cpu_ns, source = cpu_delta(cpu_before, server.cpu_ns())
        self.rows["concurrent"].append({"calls": plan.inflight_calls, "calls_per_s": plan.inflight_calls / (wall / 1e9),
                                        "cpu_us_per_call": cpu_ns / plan.inflight_calls / 1e3, "cpu_source": source,
                                        "threads": by_thread(threads, thread_ns(server.pid), plan.inflight_calls)})  # fmt: skip

    def calls(self) -> int:
        return self.server.next_id - 1  # initialize is id 1

    def errors(self) -> dict[str, Any]:
        return {"errors": self.errors_seen, "first_error": None}


# --- the run ----------------------------------------------------------------------------------------------------


def rounds(subjects: dict[str, Any], plan: Plan, transport: str, log: Callable[[str], None]) -> None:
    """`plan.rounds` rounds, each a sequential and a concurrent block per mode, the order rotating: the machine's
    load in a round falls on every mode."""
    modes = list(subjects)
    for number in range(plan.rounds):
        shift = number % len(modes)
        order = modes[shift:] + modes[:shift]
        log(f"[{transport}] round {number + 1}/{plan.rounds}: {', '.join(order)}")
        for mode in order:
            subjects[mode].round(plan)


def run_transport(transport: str, modes: Sequence[str], root: Path, plan: Plan, cpus: set[int] | None,
                  log: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    """All three modes' servers started, warmed up, measured in interleaved rounds, stopped; then the audit trail
    the "on" server wrote checked against the calls sent to it."""
    issuer = Issuer(root)
    subjects: dict[str, Any] = {}
    servers: list[Any] = []
    policies: dict[str, str | None] = {}
    try:
        for mode in modes:
            port = free_port()
            resource = f"http://127.0.0.1:{port}/mcp"  # the server's URI: its tokens' audience
            policy_file = policy(mode, transport, root, resource, issuer.jwks)
            policies[mode] = policy_file.read_text() if policy_file is not None else None
            argv = server_argv(transport, policy_file)
            log(f"[{transport}] start {mode}: {' '.join(argv[1:])}")
            if transport == "http":
                server: Any = BoundHttpServer(port, argv, deck_env(mode), str(ROOT), cpus)
                servers.append(server)
                tokens: list[str | None] = [None] * (plan.clients + 1)
                if mode.startswith("on"):
                    tokens = [issuer.token(f"bench-client-{i:02d}", resource) for i in range(plan.clients + 1)]
                subjects[mode] = HttpSubject(mode, server, tokens, plan)
            else:
                server = StdioServer(argv, deck_env(mode), str(ROOT), cpus)
                servers.append(server)
                subjects[mode] = StdioSubject(mode, server, plan)
        rounds(subjects, plan, transport, log)
        memory = {mode: subject.server.memory_kb() for mode, subject in subjects.items()}
    except (ServerFailed, OSError) as exc:  # what the HTTP servers said (a stdio server's is in the error already)
        tails = "".join(server.stderr_tail() for server in servers if isinstance(server, HttpServer))
        raise ServerFailed(f"{transport}: {exc}{tails}") from exc
    finally:
        for server in servers:
            server.close()  # the "on" server flushes its audit trail as it stops
    results: dict[str, Any] = {"policies": policies, "memory": memory}
    for row in ("sequential", "concurrent"):
        results[row] = {mode: summary(subject.rows[row]) for mode, subject in subjects.items()}
        results[row]["ratios"] = {
            f"{a}/{b}": ratio(subjects[a].rows[row], subjects[b].rows[row])
            for a, b in RATIOS
            if a in subjects and b in subjects
        }
    results["errors"] = {mode: subject.errors() for mode, subject in subjects.items()}
    results["audit"] = check_audit(root / f"{transport}-audit.jsonl", subjects["on"].calls())
    return results


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {"calls": sum(r["calls"] for r in rows), "rounds": rows}
    for key in ("cpu_us_per_call", "calls_per_s", "p50_us", "p99_us"):
        if key in rows[0]:
            found[key] = statistics.median(r[key] for r in rows)
    found["cpu_sources"] = sorted({r["cpu_source"] for r in rows})
    found["threads_us_per_call"] = {name: statistics.median(r["threads"].get(name, 0.0) for r in rows)
                                    for name in rows[-1]["threads"]}  # fmt: skip
    return found


def ratio(upper: list[dict[str, Any]], lower: list[dict[str, Any]]) -> dict[str, Any]:
    """Server CPU per call of one mode over another's, round by round: the median, and the range; and what the one
    adds to the other (µs), round by round: the median of the differences, and their range."""
    pairs = list(zip(upper, lower, strict=True))
    per_round = [u["cpu_us_per_call"] / w["cpu_us_per_call"] for u, w in pairs]
    added = [u["cpu_us_per_call"] - w["cpu_us_per_call"] for u, w in pairs]
    return {"median": statistics.median(per_round), "min": min(per_round), "max": max(per_round), "rounds": per_round,
            "added_us": statistics.median(added), "added_min": min(added), "added_max": max(added)}  # fmt: skip


def check_audit(path: Path, calls: int) -> dict[str, Any]:
    """The "on" server's trail: one allowed, ok record of echo per call sent, and `tooldeck audit verify` passing."""
    records = [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
    wrong = sum(1 for r in records if (r.get("tool"), r.get("decision"), r.get("outcome")) != ("echo", "allowed", "ok"))
    verified = subprocess.run([TOOLDECK, "audit", "verify", str(path), "--json"], cwd=ROOT, capture_output=True,
                              text=True)  # fmt: skip
    try:
        verdict = json.loads(verified.stdout)
    except ValueError:
        verdict = {"stdout": verified.stdout[-500:], "stderr": verified.stderr[-500:]}
    sample = records[-1] if records else None
    return {"calls": calls, "records": len(records), "wrong_records": wrong, "verify_exit": verified.returncode,
            "verify": verdict, "last_record": sample}  # fmt: skip


# --- cProfile of the "on" server --------------------------------------------------------------------------------


def profile(transport: str, root: Path, plan: Plan, cpus: set[int] | None, log: Callable[[str], None]) -> str:
    """The "on" server run under cProfile (main thread only: the audit writer thread is not in it) for
    `plan.profile_calls` calls, half sequential and half 32 at a time; the top functions by own time."""
    issuer = Issuer(root)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    policy_file = policy("on", transport, root, resource, issuer.jwks)
    output = root / f"{transport}-on.prof"
    argv = [PYTHON, "-m", "cProfile", "-o", str(output), *server_argv(transport, policy_file)]
    log(f"[profile] {transport}: {plan.profile_calls} calls under cProfile")
    half = plan.profile_calls // 2
    if transport == "http":
        with BoundHttpServer(port, argv, deck_env("on"), str(ROOT), cpus) as server:
            tokens: list[str | None] = [
                issuer.token(f"bench-client-{i:02d}", resource) for i in range(plan.clients + 1)
            ]
            subject = HttpSubject("on", server, tokens, replace(plan, warmup=50))
            measure_http.warm_up(subject.connection, half, subject.checker)
            for connection in subject.clients:
                connection.reconnect()  # idle while the sequential calls ran: the server dropped them
            done = 0
            while done < half:
                done += measure_http.clients(server, subject.clients, 0.5, subject.checker)["calls"]
    else:
        with StdioServer(argv, deck_env("on"), str(ROOT), cpus) as stdio:
            stdio.initialize()
            measure.burst(stdio, 1, half, "echo")
            measure.burst(stdio, plan.clients, half, "echo")
    import io

    text = io.StringIO()
    stats = pstats.Stats(str(output), stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(r"tooldeck", 40)
    return text.getvalue()


# --- report -----------------------------------------------------------------------------------------------------


LABELS = {("http", "sequential"): "HTTP sequential", ("http", "concurrent"): "HTTP 32 clients",
          ("stdio", "sequential"): "stdio sequential", ("stdio", "concurrent"): "stdio 32 in flight"}  # fmt: skip


def table(data: dict[str, Any]) -> str:
    modes = data["modes"]
    ratios = [f"{a}/{b}" for a, b in RATIOS if a in modes and b in modes]
    header = ("row", *(f"{mode} µs/call" for mode in modes), "on adds µs", *ratios, "calls/s off", "calls/s on")
    lines = [header]
    for (transport, row), label in LABELS.items():
        if transport not in data["transports"]:
            continue
        r = data["transports"][transport][row]
        lines.append((
            label,
            *(f"{r[mode]['cpu_us_per_call']:.1f}" for mode in modes),
            _added(r["ratios"]["on/off"]),
            *(f"{r['ratios'][key]['median']:.2f}x ({r['ratios'][key]['min']:.2f}-{r['ratios'][key]['max']:.2f})"
              for key in ratios),
            f"{r['off']['calls_per_s']:,.0f}",
            f"{r['on']['calls_per_s']:,.0f}",
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
           for line in lines]  # fmt: skip
    out.append("")
    for transport, found in data["transports"].items():
        seq = found["sequential"]
        out.append(f"{transport} sequential p50 latency (µs): "
                   + ", ".join(f"{mode} {seq[mode]['p50_us']:.1f}" for mode in modes))  # fmt: skip
    out.append("server CPU per call by thread, off -> on (µs):")
    for (transport, row), label in LABELS.items():
        if transport in data["transports"]:
            r = data["transports"][transport][row]
            names = sorted(set(r["off"]["threads_us_per_call"]) | set(r["on"]["threads_us_per_call"]))
            cells = [f"{name} {r['off']['threads_us_per_call'].get(name, 0):.1f} -> "
                     f"{r['on']['threads_us_per_call'].get(name, 0):.1f}" for name in names]  # fmt: skip
            out.append(f"  {label}: " + "; ".join(cells))
    out += ["", "budget:"] + [f"  {c['verdict']}  {c['check']}: {c['measured']}" for c in data["budget"]]
    return "\n".join(out)


def _added(r: dict[str, Any]) -> str:
    return f"{r['added_us']:+.1f} ({r['added_min']:+.1f} to {r['added_max']:+.1f})"


def budget(data: dict[str, Any]) -> list[dict[str, Any]]:
    checks = []
    for (transport, row), label in LABELS.items():
        if transport not in data["transports"]:
            continue
        bound = BUDGET_US[transport]
        r = data["transports"][transport][row]["ratios"]["on/off"]
        checks.append((f"{label}: security on adds <= {bound:g} µs of server CPU per call", r["added_us"] <= bound,
                       f"{_added(r)} (median of {len(r['rounds'])} per-round differences; on/off "
                       f"{r['median']:.2f}x)"))  # fmt: skip
    for transport, found in data["transports"].items():
        audit = found["audit"]
        ok = (audit["records"] == audit["calls"] == audit["verify"].get("records") and audit["wrong_records"] == 0
              and audit["verify_exit"] == 0 and audit["verify"].get("ok") is True)  # fmt: skip
        checks.append((f"{transport} audit trail: one record per call, `tooldeck audit verify` passes", ok,
                       f"{audit['records']:,} records for {audit['calls']:,} calls, {audit['wrong_records']} not "
                       f"an allowed ok echo; verify exit {audit['verify_exit']}"))  # fmt: skip
        errors = sum(e["errors"] for e in found["errors"].values())
        checks.append((f"{transport}: every reply right", errors == 0, f"{errors} wrong"))
    return [{"check": text, "verdict": "PASS" if ok else "FAIL", "measured": measured} for text, ok, measured in checks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (2 rounds, short blocks)")
    parser.add_argument("--json", type=Path, help="also write the raw results to this path")
    parser.add_argument("--transport", choices=("http", "stdio", "both"), default="both")
    parser.add_argument("--breakdown", action="store_true", help="also measure 'on' without its audit trail "
                        "(a fourth server per transport)")  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="after the run, cProfile the 'on' server (each "
                        "transport measured) and print the functions that cost the most")  # fmt: skip
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    transports = ("http", "stdio") if args.transport == "both" else (args.transport,)
    modes = MODES + BREAKDOWN if args.breakdown else MODES
    loadavg_start = os.getloadavg()
    server_cpus, layout = placement.pin("same")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log = lambda text: print(text, flush=True)  # noqa: E731
    started = time.monotonic()
    data: dict[str, Any] = {"timestamp": stamp, "quick": args.quick, "plan": asdict(plan), "cpus": layout,
                            "python": platform.python_version(), "tooldeck_git": tooldeck_git(),
                            "level": LEVEL, "scope": SCOPE, "rate": RATE, "modes": modes, "transports": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tooldeck-security-") as root:
        for transport in transports:
            directory = Path(root) / transport
            directory.mkdir()
            data["transports"][transport] = run_transport(transport, modes, directory, plan, server_cpus, log)
    data["loadavg"] = {"start": loadavg_start, "end": os.getloadavg()}
    data["duration_s"] = round(time.monotonic() - started, 1)
    data["budget"] = budget(data)
    print(report.run_line(data, layout, loadavg_start, args.quick))
    print("server CPU per call of echo (µs; medians of the rounds), and ratios (median of per-round ratios, range):")
    print(table(data))
    for transport, found in data["transports"].items():
        audit = found["audit"]
        print(f"\n{transport} audit trail: {audit['records']:,} records; tooldeck audit verify: "
              f"{json.dumps(audit['verify'])}")  # fmt: skip
    paths = [BENCH / "results" / f"security-{stamp}.json"]
    if args.json:
        paths.append(args.json)
    report.write_json(data, *paths)  # before profiling: a profile that fails loses no measurement
    print("\nraw results: " + ", ".join(str(p) for p in paths), flush=True)
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="tooldeck-security-profile-") as root:
            for transport in transports:
                directory = Path(root) / transport
                directory.mkdir()
                text = profile(transport, directory, plan, server_cpus, log)
                print(f"\n--- cProfile of the 'on' server over {transport} (main thread) ---\n{text}", flush=True)
    return 0 if all(check["verdict"] == "PASS" for check in data["budget"]) else 1


if __name__ == "__main__":
    sys.exit(main())
