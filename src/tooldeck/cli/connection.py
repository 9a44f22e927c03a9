"""The client commands' end of an MCP session: requests out with their answers routed back by id, notifications to a
callback, the server's pings answered. Three ways to the server: a deck in this process (a session of its
own), a server command on stdio (a child process), and a URL (``http_connection.py``); ``client.py`` opens
the one a command's words name.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..protocol import versions
from ..protocol.codec import encode
from ..protocol.errors import TargetError

CLIENT_INFO = {"name": "tooldeck-cli", "version": "1"}


class RemoteError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.code = error.get("code")
        self.message = str(error.get("message", "error"))
        self.data = error.get("data")
        super().__init__(f"{self.code}: {self.message}")


@dataclass
class Place:
    """Where the server is: a TARGET served in process, a URL, or a command to run (at most one of them)."""

    target: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)


class Connection:
    """An initialized client session; subclasses move the messages (``_send`` out, ``_received`` in)."""

    interactive = False  # a person at the terminal answers form elicitations (set before initialize)

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self.on_notification: Callable[[dict[str, Any]], None] = lambda message: None
        self.server: dict[str, Any] = {}  # the initialize result
        self._failure: TargetError | None = None  # why the connection ended, once it has

    def new_id(self) -> int:
        return next(self._ids)

    async def request(self, method: str, params: dict[str, Any] | None = None, request_id: Any = None) -> Any:
        """The result of ``method``; a JSON-RPC error raises ``RemoteError``."""
        if self._failure is not None:
            raise self._failure
        request_id = self.new_id() if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self._send(message)
            response = await future
        finally:
            self._waiting.pop(request_id, None)
        if "error" in response:
            raise RemoteError(response["error"] if isinstance(response["error"], dict) else {})
        return response.get("result", {})

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def start(self) -> None:
        """Whatever must happen before initialize (starting a child process)."""

    async def initialize(self) -> None:
        capabilities: dict[str, Any] = {"elicitation": {"form": {}}} if self.interactive else {}
        params = {"protocolVersion": versions.LATEST, "capabilities": capabilities, "clientInfo": CLIENT_INFO}
        self.server = await self.request("initialize", params)
        self._negotiated(str(self.server.get("protocolVersion", versions.LATEST)))
        await self.notify("notifications/initialized")

    def _negotiated(self, version: str) -> None:
        """The protocol version the server chose, before anything else is sent."""

    def capability(self, *path: str) -> bool:
        """Whether the server declared ``path`` (``capability("tasks", "requests", "tools", "call")``)."""
        node: Any = self.server.get("capabilities", {})
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True

    async def listen(self) -> None:
        """Starts receiving messages that belong to no request in flight, where the transport needs that (HTTP)."""

    def _received(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" in message:
            if "id" not in message:
                self.on_notification(message)
            else:
                task = asyncio.get_running_loop().create_task(self._answer(message))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
            return
        future = self._waiting.get(message.get("id"))
        if future is not None and not future.done():
            future.set_result(message)

    async def _answer(self, request: dict[str, Any]) -> None:
        """Pings get their empty result, form elicitations the person's answer (when there is a person); this client
        offers nothing else (no sampling or roots)."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if request["method"] == "ping":
            reply["result"] = {}
        elif request["method"] == "elicitation/create" and self.interactive:
            reply["result"] = await self.elicit(request.get("params") or {})
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {request['method']}"}
        try:
            await self._send(reply)
        except TargetError:
            pass  # the connection is gone; whatever waits on it says so

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        from .elicit import answer

        if params.get("mode", "form") != "form":
            return {"action": "decline"}  # only form mode is offered
        return await asyncio.to_thread(answer, params)

    def _lost(self, error: TargetError) -> None:
        """The connection ended: every request still waiting, and every later one, fails with ``error``."""
        self._failure = self._failure or error
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)

    async def _send(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        for task in list(self._answering):
            task.cancel()


class MemoryConnection(Connection):
    """A deck served in this process by a session of its own; messages still cross as JSON bytes, both ways, as in
    the memory transport."""

    def __init__(self, target: str | None) -> None:
        super().__init__()
        from ..loader import load_deck
        from ..server.session import Session

        deck = load_deck(target)
        self.session = Session(deck, self._from_server, principal=deck.local_principal())

    def _from_server(self, message: Any, related: Any = None) -> None:
        self._received(orjson.loads(encode(message)))

    async def _send(self, message: dict[str, Any]) -> None:
        self.session.receive(orjson.loads(orjson.dumps(message)))

    async def aclose(self) -> None:
        await super().aclose()
        if tasks := self.session.close():
            await asyncio.wait(tasks, timeout=5)


class StdioConnection(Connection):
    """Any MCP server command, run as a child process speaking newline-delimited JSON on its stdin and stdout. Its
    stderr is kept (the last 64 KiB) and shown only when the command fails: a server's log is not the output."""

    def __init__(self, command: list[str]) -> None:
        super().__init__()
        self.command = command
        self._stderr = bytearray()
        self._readers: list[asyncio.Task[None]] = []
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=64 * 1024 * 1024,
                start_new_session=True,  # Ctrl-C reaches this client, which cancels and closes the child properly
            )
        except OSError as exc:
            raise TargetError(f"cannot run {self.command[0]!r}: {exc.strerror or exc}") from None
        self._readers = [
            asyncio.get_running_loop().create_task(self._read_stdout()),
            asyncio.get_running_loop().create_task(self._read_stderr()),
        ]

    async def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            if not line.strip():
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:  # the spec allows nothing but messages on stdout: waiting would hang
                text = line.decode(errors="replace").strip()[:80]
                self._lost(TargetError(f"the server command wrote {text!r} on stdout, which is not an MCP message"))
                return
            for item in message if isinstance(message, list) else [message]:
                self._received(item)
        self._lost(await self._gone())

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self._stderr += chunk
            del self._stderr[: max(0, len(self._stderr) - 65536)]

    async def _gone(self) -> TargetError:
        """Why the child stopped answering: its exit status and the last line of its stderr."""
        assert self.process is not None
        status = await self.process.wait()
        await asyncio.wait(self._readers[1:], timeout=2)  # the rest of stderr, for the message
        return TargetError(self._ended(status))

    def _ended(self, status: int) -> str:
        lines = [line for line in self._stderr.decode(errors="replace").splitlines() if line.strip()]
        said = f": {lines[-1].strip()}" if lines else ""
        return f"the server command {' '.join(self.command)!r} exited with status {status} before answering{said}"

    def stderr_text(self) -> str:
        return self._stderr.decode(errors="replace")

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        if self.process.returncode is not None or self.process.stdin.is_closing():
            raise await self._gone()
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        try:
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise await self._gone() from None

    async def aclose(self) -> None:
        """Closes stdin (the spec's stdio shutdown), then waits a moment, terminates, kills."""
        await super().aclose()
        process = self.process
        if process is None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        for stop in (None, process.terminate, process.kill):
            if process.returncode is not None:
                break
            if stop is not None:
                try:
                    stop()
                except ProcessLookupError:
                    break
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                continue
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
