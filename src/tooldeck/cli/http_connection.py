"""A client session over Streamable HTTP (httpx, imported only for ``--url``): each message is a POST whose answer
comes as JSON or as an SSE stream (the server's notifications and requests about it first, then the response); the
session id the server gives at initialize goes on every later request, and the session is DELETEd at the end.
``listen()`` opens the GET stream, where a task's progress arrives once its POST has been answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from ..protocol.errors import TargetError
from .connection import Connection

JSON_AND_SSE = "application/json, text/event-stream"


class HttpConnection(Connection):
    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__()
        self.url = url
        # No read timeout: a tool may run for minutes before its answer (or its next SSE event) arrives.
        timeout = httpx.Timeout(30.0, read=None)
        self.http = httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._listener: asyncio.Task[None] | None = None
        self._posts: set[asyncio.Task[None]] = set()

    def _headers(self, accept: str = JSON_AND_SSE) -> dict[str, str]:
        headers = {"accept": accept, "content-type": "application/json"}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    def _negotiated(self, version: str) -> None:
        self.protocol_version = version  # the MCP-Protocol-Version header of every later request

    async def _send(self, message: dict[str, Any]) -> None:
        """Notifications and responses are posted here and now. A request's POST goes on in the background: its SSE
        stream may carry the call's notifications after the response (a task's progress), and ``request`` returns
        as soon as the response is in."""
        future = self._waiting.get(message.get("id")) if "method" in message and "id" in message else None
        if future is None:
            await self._post(message)
            return
        post = asyncio.get_running_loop().create_task(self._post(message))
        self._posts.add(post)
        post.add_done_callback(lambda done: self._posted(done, message, future))

    def _posted(self, post: asyncio.Task[None], message: dict[str, Any], future: asyncio.Future[Any]) -> None:
        self._posts.discard(post)
        if future.done():
            return
        if post.cancelled():
            future.cancel()
        elif (error := post.exception()) is not None:
            future.set_exception(error)
        else:
            future.set_exception(
                TargetError(f"{self.url}: the server ended its answer to {message['method']} without a response")
            )

    async def _post(self, message: dict[str, Any]) -> None:
        try:
            async with self.http.stream(
                "POST", self.url, content=orjson.dumps(message), headers=self._headers()
            ) as response:
                if message.get("method") == "initialize" and "mcp-session-id" in response.headers:
                    self.session_id = response.headers["mcp-session-id"]
                await self._answer_of(response, message)
        except httpx.HTTPError as exc:
            raise TargetError(self._unreachable(exc)) from None

    async def _answer_of(self, response: httpx.Response, message: dict[str, Any]) -> None:
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.status_code == 202 or ("id" in message and "method" not in message and response.is_success):
            return  # a notification or a response, accepted
        if not response.is_success:
            body = await response.aread()
            self._refused(response, body, message)
        if kind == "text/event-stream":
            async for data in _sse_data(response.aiter_lines()):
                self._received_data(data)
        else:
            self._received_data(await response.aread())

    def _received_data(self, data: bytes | str) -> None:
        try:
            decoded = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise TargetError(f"{self.url}: the server's answer is not JSON: {str(data)[:80]!r}") from None
        for item in decoded if isinstance(decoded, list) else [decoded]:
            self._received(item)

    def _refused(self, response: httpx.Response, body: bytes, message: dict[str, Any]) -> None:
        """A 4xx/5xx: a JSON-RPC error in the body answers the request (-> RemoteError); else one line that says
        what went wrong and what to try."""
        said = ""
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("error"), dict):
            said = str(decoded["error"].get("message", ""))
        elif body.strip():
            said = body.decode(errors="replace").strip().splitlines()[0][:200]
        status = response.status_code
        if status in (401, 403):
            raise TargetError(f"{self.url}: HTTP {status} {response.reason_phrase}: {self._denied(response, said)}")
        if status == 404 and self.session_id:
            raise TargetError(f"{self.url}: the server no longer knows this session (HTTP 404); run the command again")
        if status == 404:
            raise TargetError(f"{self.url}: HTTP 404: no MCP endpoint here (tooldeck serves at http://HOST:PORT/mcp)")
        if isinstance(decoded, dict) and "id" in decoded and "method" in message and "id" in message:
            decoded["id"] = message["id"]  # an error answer without an id (the request could not be read)
            self._received(decoded)
            return
        raise TargetError(f"{self.url}: HTTP {status} {response.reason_phrase}{f': {said}' if said else ''}")

    def _denied(self, response: httpx.Response, said: str) -> str:
        """What a 401 or 403 means, from what the server said: credentials missing or refused (401), a scope the
        token lacks (403 with the spec's ``insufficient_scope`` step-up), or anything else the server refuses (its
        own words: a confirmation a script cannot give, another principal's session, a foreign Origin)."""
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 401:
            has_token = "authorization" in {k.lower() for k in self.http.headers}
            hint = (
                "the token was refused: check --token"
                if has_token
                else "the server wants credentials: give --token TOKEN (or --header 'Authorization: ...')"
            )
        elif 'error="insufficient_scope"' in challenge:
            scope = re.search(r'scope="([^"]*)"', challenge)
            hint = "the token lacks a scope the call needs" + (f" ({scope.group(1)})" if scope else "")
        else:
            return said or "the server refused the request without saying why"
        return f"{hint}; the server says: {said}" if said else hint

    def _unreachable(self, exc: httpx.HTTPError) -> str:
        if isinstance(exc, httpx.ConnectError):
            return f"cannot connect to {self.url}: connection refused or unreachable (is the server running?)"
        if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return f"{self.url}: not an http:// or https:// URL ({exc})"
        return f"{self.url}: {type(exc).__name__}: {exc}"

    async def listen(self) -> None:
        """Opens the session's GET stream (once) and returns when the server has answered it: messages that belong
        to no open POST (a task's progress, log and status notifications) arrive there, not lost."""
        if self._listener is not None or not self.session_id:
            return
        opened = asyncio.Event()
        self._listener = asyncio.get_running_loop().create_task(self._listen(opened))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(opened.wait(), 5)

    async def _listen(self, opened: asyncio.Event) -> None:
        try:
            async with self.http.stream("GET", self.url, headers=self._headers("text/event-stream")) as response:
                opened.set()
                if response.status_code != 200:
                    return  # a server without the stream (405) simply sends those messages nowhere
                async for data in _sse_data(response.aiter_lines()):
                    self._received_data(data)
        except (httpx.HTTPError, TargetError):
            return
        finally:
            opened.set()

    async def aclose(self) -> None:
        await super().aclose()
        streams = [*self._posts, *([self._listener] if self._listener else [])]
        for stream in streams:
            stream.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        try:
            if self.session_id:
                await self.http.delete(self.url, headers=self._headers(), timeout=5.0)
        except httpx.HTTPError:
            pass  # the session expires on its own
        finally:
            await self.http.aclose()


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event (``data:`` lines joined; ``event:``, ``id:``, ``retry:`` and comments
    are not needed by a client that does not resume)."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if "".join(data).strip():  # an event without data (a priming event, for resumption) carries nothing
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if "".join(data).strip():
        yield "\n".join(data)
