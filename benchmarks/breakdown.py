"""Where a call's instructions go: the hot paths of `instructions.py` counted again with the request answered at
each layer in turn, so that the differences between the counts are what each layer costs.

Usage: .venv/bin/python benchmarks/breakdown.py [--calls N] [--only PATH,...] [--src DIR]

Each count is callgrind's, as `instructions.py` takes it (N calls less none, fresh processes, one hash seed, the
client's side included), and every cut answers each call with the same bytes as the whole server does, checked on
the warm-up calls. The cuts, from the least to the whole:

- floor: the deck's HTTP app replaced by an ASGI app that reads the body, parses it and answers the same response
  (orjson, two `send`s), or over stdio a connection that answers each line from its reader: what the harness's
  client and any server at all cost.
- transport: tooldeck's transport (HTTP: the app, the guard, the exchange, the session registry, the channel, the
  JSON response; stdio: the line reader, the batched writes), each request answered where it would reach the
  session (a 2025 request: `Session.receive_inline`, `Session.receive`) or its request peer (`RequestPeer.serve`).
- dispatch: the session or the request peer as well (the lifecycle, the method table, the request context, the
  runner; a 2026-07-28 request's envelope and per-request state), the call answered where the pipeline begins
  (`Pipeline.call_tool`, which returns the tool's result at once).
- pipeline: the pipeline with every security default off (`[sanitise] enabled = false`, `[levels] default = 0`):
  the tool's lookup, its arguments checked, the tool run, its result built and checked.
- whole: the deck as it ships (no policy): the level check, input limits and the sanitiser on.

With security on (http-secured: JWT, a level-5 tool with a scope, a rate limit, the audit trail) two more: the "on"
policy without `[audit]`, then with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(1, str(BENCH / "servers"))  # the floors' own answers (floor_server.py)

import instructions  # noqa: E402
from eras_micro import callgrind_per_call  # noqa: E402
from floor_server import reply_to, text_result  # noqa: E402

CUTS = {
    "stdio-session": ("floor", "transport", "dispatch", "pipeline", "whole"),
    "http-session": ("floor", "transport", "dispatch", "pipeline", "whole"),
    "http-stateless": ("floor", "transport", "dispatch", "pipeline", "whole"),
    "http-secured": ("whole", "on-no-audit", "on"),
}
WHAT = {
    "transport": "the transport",
    "dispatch": "the session or request peer, the method, the runner",
    "pipeline": "the pipeline and the tool, security defaults off",
    "whole": "the security defaults (levels, input limits, sanitiser)",
    "on-no-audit": "JWT, the level-5 scope check, the rate limit",
    "on": "the audit trail",
}
DECK = BENCH / "servers" / "tooldeck_server.py"
FIRST = {"floor": "the harness's client, and parsing and answering"}  # what the first count of a path is
OFF = "[sanitise]\nenabled = false\n\n[levels]\ndefault = 0\n"


MODERN = {
    "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "bench", "version": "1.0.0"}},
}


def result_of(text: str, modern: bool) -> dict[str, Any]:
    """The echo's CallToolResult as the deck answers it (checked against the whole server's on the warm-up): the
    floor's, and for a 2026-07-28 request what that revision's result carries besides."""
    result = text_result(text)
    return {**result, **MODERN} if modern else result


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """What the floor cuts answer a message with (None for a notification): the floor's answer
    (``floor_server.reply_to``), a 2026-07-28 call's result as that revision's."""
    reply = reply_to(message, [], {"name": "bench", "version": "1.0.0"})
    if reply is not None and "_meta" in message.get("params", {}):
        reply["result"] = {**reply["result"], **MODERN}
    return reply


# --- the cuts, applied in the child before its deck is loaded -------------------------------------------------------


def cut(name: str, directory: Path) -> None:
    from tooldeck.protocol import jsonrpc
    from tooldeck.server.peer import RequestPeer
    from tooldeck.server.pipeline import Pipeline
    from tooldeck.server.session import Session

    if name == "floor":
        import tooldeck.transports.stdio

        replace(instructions, "load_app", lambda *args: FloorApp())
        replace(instructions, "load_deck", lambda *args: None)
        replace(tooldeck.transports.stdio, "Connection", FloorConnection)
    elif name == "transport":

        def answer_inline(self: Any, request: Any) -> Any:
            if request.method != "tools/call":
                return receive_inline(self, request)
            self._direct(jsonrpc.result(request.id, result_of(request.params["arguments"]["text"], False)))
            return None

        def answer(self: Any, obj: Any) -> None:
            if type(obj) is dict and obj.get("method") == "tools/call":
                self._direct(jsonrpc.result(obj["id"], result_of(obj["params"]["arguments"]["text"], False)))
            else:
                receive(self, obj)

        def serve(self: Any, request: Any, env: Any, principal: Any, *, inline: bool = False) -> None:
            self._reply(jsonrpc.result(request.id, result_of(request.params["arguments"]["text"], True)))

        receive, receive_inline = Session.receive, Session.receive_inline
        replace(Session, "receive_inline", answer_inline)
        replace(Session, "receive", answer)
        replace(RequestPeer, "serve", serve)
    elif name == "dispatch":
        from tooldeck.tools.result import build_result

        async def call_tool(self: Any, rctx: Any, tool: Any, arguments: Any, **_: Any) -> Any:
            return build_result(tool, arguments["text"])

        replace(Pipeline, "call_tool", call_tool)
    elif name == "pipeline":
        policy = directory / "off.toml"
        policy.write_text(OFF)
        load_app, load_deck = instructions.load_app, instructions.load_deck

        def deck_off(*args: Any) -> Any:
            deck = load_deck(*args)
            deck.apply_policy(policy)
            return deck

        replace(instructions, "load_app", lambda *args: load_app(*args) if args else load_app(DECK, policy))
        replace(instructions, "load_deck", deck_off)
    elif name == "on-no-audit":
        import security

        policy = security.policy
        replace(security, "policy", lambda mode, *args: policy("on-no-audit" if mode == "on" else mode, *args))


def replace(owner: Any, name: str, new: Any) -> None:
    """``owner.name = new``, for a name ``owner`` has: a cut whose seam was renamed fails instead of cutting nothing."""
    if not hasattr(owner, name):
        raise SystemExit(f"breakdown: {owner!r} has no {name} to replace (was it renamed?)")
    setattr(owner, name, new)


class FloorApp:
    """An ASGI app that answers the harness with the deck's bytes and does nothing else."""

    def __init__(self) -> None:
        self.deck = FloorDeck()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        reply = answer(orjson.loads((await receive())["body"]))
        if reply is None:  # notifications/initialized
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = orjson.dumps(reply)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if "serverInfo" in reply.get("result", ()):  # initialize: the session the harness's calls name
            headers.append((b"mcp-session-id", b"floor"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class FloorDeck:
    async def open_backends(self) -> None:
        pass

    def bind_loop(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class FloorConnection:
    """A stdio connection that answers each line the harness writes with the deck's bytes and does nothing else:
    the handshake read and answered with blocking I/O, then the calls from a reader on the event loop."""

    def __init__(self, deck: Any, stdin_fd: int, stdout_fd: int, limit: Any) -> None:
        self.stdin_fd, self.stdout_fd = stdin_fd, stdout_fd

    def handshake(self) -> bool:
        data = b""
        while data.count(b"\n") < 2:
            data += os.read(self.stdin_fd, 1 << 16)
        os.write(self.stdout_fd, orjson.dumps(answer(orjson.loads(data.partition(b"\n")[0]))) + b"\n")
        return True

    async def serve(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        done = loop.create_future()
        buffer = b""

        def readable() -> None:
            nonlocal buffer
            data = os.read(self.stdin_fd, 1 << 16)
            if not data:
                loop.remove_reader(self.stdin_fd)
                done.set_result(None)
                return
            *lines, buffer = (buffer + data).split(b"\n")
            os.write(self.stdout_fd, b"".join(orjson.dumps(answer(orjson.loads(line))) + b"\n" for line in lines))

        os.set_blocking(self.stdin_fd, False)
        loop.add_reader(self.stdin_fd, readable)
        await done
        os.close(self.stdout_fd)


# --- the child and the parent -----------------------------------------------------------------------------------


def child(path: str, name: str, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tooldeck-breakdown-") as directory:
        cut(name, Path(directory))
        if path == "http-secured" and name == "whole":
            path = "http-session"  # the same call without a policy: what security on adds is counted over it
        instructions.child(path, count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=instructions.CALLS, help="calls per count (default 300)")
    parser.add_argument("--only", help="comma-separated paths (default: all): " + ", ".join(CUTS))
    parser.add_argument("--src", type=Path, help="import tooldeck from DIR (as instructions.py --src)")
    parser.add_argument("--child", nargs=3, metavar=("PATH", "CUT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
        os.environ["PYTHONPATH"] = str(args.src.resolve())
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    paths = args.only.split(",") if args.only else list(CUTS)
    unknown = [path for path in paths if path not in CUTS]
    if unknown:
        parser.error(f"unknown path {', '.join(unknown)}; the paths: {', '.join(CUTS)}")
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    import tooldeck

    os.environ[instructions.EXPECT] = str(Path(tooldeck.__file__).parent)
    jobs = [(path, name) for path in paths for name in CUTS[path]]
    with tempfile.TemporaryDirectory(prefix="tooldeck-breakdown-pyc-") as cache:
        os.environ["PYTHONPYCACHEPREFIX"] = cache  # compiled once, outside valgrind (see instructions.measure)
        for path, name in jobs:
            done = subprocess.run(
                [sys.executable, __file__, "--child", path, name, "0"], capture_output=True, text=True
            )
            if done.returncode:
                raise SystemExit(f"{path} {name}: the child failed: {done.stderr[-2000:]}")

        def one(job: tuple[str, str]) -> float:
            path, name = job
            calls = args.calls * instructions.SCALE.get(path, 1)
            return callgrind_per_call(valgrind, [__file__, "--child", path, name], calls)

        with ThreadPoolExecutor(max_workers=2) as pool:
            found = dict(zip(jobs, pool.map(one, jobs), strict=True))
    for path in paths:
        print(f"\n{path}: {instructions.PATHS[path]}")
        print(f"  {'answered after':<13} {'instructions':>12}  {'the layer adds':>14}  the layer")
        before = None
        for name in CUTS[path]:
            count = found[path, name]
            adds = "" if before is None else f"{count - before:+,.0f}"
            layer = WHAT[name] if before is not None else FIRST.get(name, "the same call without a policy")
            print(f"  {name:<13} {count:>12,.0f}  {adds:>14}  {layer}")
            if before is not None and count <= before:
                print(f"  (the {name} cut costs no more than the one before it: does it still cut where it says?)")
            before = count
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
