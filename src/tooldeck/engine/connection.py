"""One process's connection to the shared Redis or Valkey: ``Engine``, from a ``redis://`` URL.

An ``Engine`` holds one multiplexed connection for the commands of every call (``wire.py``: scripts, reads and
single-use marks, pipelined and written together), a pool of further connections (``redis.asyncio``, parsed by
hiredis) for everything else and for TLS, the key prefix every key
and channel of this deck starts with, the Lua scripts the primitives run, and what is made once per engine
(``attached``: the hub, one subscriber connection). Every primitive reaches Redis through ``reaching()``, which turns a lost or
refused connection into ``BackendUnavailableError``: one line, naming the server and the cause.

Reconnecting needs nothing of the caller. A command that finds its pooled connection broken (Redis restarted) is
retried once on a new one, so a server that is back is used again at once; a command while the server is away fails
within ``timeout`` seconds, and the next command tries again. Only a lost connection is retried, never a timeout:
a command that timed out may have run, and running a take or a spend twice would be wrong. What must be written
again once the server is back (a key ring's keys, after a restart that lost them) is registered with ``when_back``
and run when the hub's subscriber connection is made again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import BackendUnavailableError
from .wire import Wire, bulk, pack

T = TypeVar("T")
log = logging.getLogger("tooldeck.engine")

DEFAULT_PREFIX = "tooldeck:"
MIN_VERSION = (7, 2)  # Redis 7.2 or newer; every Valkey reports 7.2.4 or newer as its redis_version
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)  # BusyLoadingError (a restart) is a ConnectionError
_SCHEMES = {"redis": "redis", "rediss": "rediss", "unix": "unix", "valkey": "redis", "valkeys": "rediss"}


class Prepared(NamedTuple):
    """A command packed once (``Script.prepare``), to be sent as often as it is needed: ``args`` are its arguments
    (for an engine with no line, which sends them through its pool), ``packed`` the same in RESP."""

    args: tuple[Any, ...]
    packed: bytes


class Script:
    """A Lua script run by its digest (EVALSHA): ``Engine.check`` loads it once; a server that has forgotten it (a
    restart, ``SCRIPT FLUSH``) answers NOSCRIPT, is given the script and asked again. A call made again and again
    with the same keys and arguments (a rate limit's buckets) is ``prepare``d once and ``run``."""

    def __init__(self, engine: Engine, source: str) -> None:
        self.engine = engine
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        command = self.engine.command
        try:
            return await command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await self.load()
            return await command("EVALSHA", self.sha, len(keys), *keys, *args)

    def prepare(self, keys: Sequence[str], args: Sequence[Any] = ()) -> Prepared:
        command = ("EVALSHA", self.sha, len(keys), *keys, *args)
        return Prepared(command, pack(command))

    async def run(self, prepared: Prepared) -> Any:
        """``__call__`` for a ``prepare``d call."""
        command = self.engine.command_packed
        try:
            return await command(prepared)
        except NoScriptError:
            await self.load()
            return await command(prepared)

    def send(self, prepared: Prepared) -> asyncio.Future[Any] | None:
        """``run`` without a coroutine: the command written now (``Wire.send_packed``) and its answer's future, its
        failures the line's own (``OSError``, ``NoScriptError``: the caller says what they mean); None where the
        engine has no line up (then ``run``)."""
        wire = self.engine.wire
        return None if wire is None else wire.send_packed(prepared.packed)

    def head(self, keys: Sequence[str], args: Sequence[Any], last: int) -> tuple[Prepared, int]:
        """The call with ``keys`` and ``args`` but for its ``last`` arguments, packed once, for ``soon_with``: a
        call whose last arguments change (a session's mark: its time) packs only those each time."""
        command = ("EVALSHA", self.sha, len(keys), *keys, *args)
        return Prepared(command, bulk(command)), len(command) + last

    def soon_with(self, head: tuple[Prepared, int], last: tuple[Any, ...]) -> asyncio.Future[Any] | None:
        """``soon`` for the call ``head`` and its ``last`` arguments."""
        prepared, count = head
        wire = self.engine.wire
        if wire is None:
            return None
        return wire.send_packed_soon(b"*%d\r\n%s%s" % (count, prepared.packed, bulk(last)))

    def soon(self, keys: Sequence[str], args: Sequence[Any] = ()) -> asyncio.Future[Any] | None:
        """Send the script with the other commands of this turn of the loop and return its answer's future, not
        waited for (``Engine.send_soon``); None when that cannot be done (then call it). Its failures are the
        line's own (``OSError``, ``NoScriptError``): the caller says what they mean."""
        return self.engine.send_soon("EVALSHA", self.sha, len(keys), *keys, *args)

    async def load(self) -> None:
        await self.engine.command("SCRIPT", "LOAD", self.source)


class Engine:
    """A connection to one Redis or Valkey, shared by every seam of one process (``from_url`` makes one). Its
    connections belong to the event loop that first used them: one engine per loop, closed on it (``aclose``)."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX, name: str = "redis",
                 wire: Wire | None = None) -> None:  # fmt: skip
        self.client = client
        self.wire = wire  # the multiplexed line of the hot commands (engine/wire.py); None: the pool carries them
        self.prefix = prefix
        self.name = name  # the server's URL without credentials: what messages show
        self._scripts: dict[str, Script] = {}
        self._attached: dict[str, Any] = {}
        self._when_back: list[Callable[[], Awaitable[None]]] = []
        self.observe_bus: Callable[[float], None] | None = None  # told each bus message's delivery, in seconds

    @classmethod
    def from_url(cls, url: str, *, prefix: str | None = None, timeout: float = 2.0,
                 max_connections: int | None = None) -> Engine:  # fmt: skip
        """An engine for ``redis://[user:password@]host[:port][/db][?prefix=name:]`` (``rediss://`` for TLS,
        ``unix:///path/redis.sock?db=0`` for a socket; ``valkey://`` and ``valkeys://`` are read as ``redis://`` and
        ``rediss://``). ``prefix`` (or the URL's ``prefix``) starts every key and channel, so several decks can share
        one server: "tooldeck:" unless told. ``timeout``: seconds to connect, and to wait for an answer, before a
        command fails with ``BackendUnavailableError``. ``max_connections``: the most the pool opens (the client's
        default unless told); a command that finds them all busy waits for one to come free, within ``timeout``.
        Nothing is connected until the first command."""
        parts = urlsplit(url)
        scheme = _SCHEMES.get(parts.scheme.lower())
        if scheme is None:
            raise ValueError(f"not a Redis URL: {_without_credentials(url)!r} (write redis://host:port/db)")
        shown = _without_credentials(url)
        try:
            parts.port  # noqa: B018 - a port that is not a number raises here, not at the first command
        except ValueError:
            raise ValueError(f"{shown!r}: the port is not a number (write redis://host:port/db)") from None
        if scheme != "unix" and parts.path.strip("/") and not parts.path.strip("/").isdigit():
            raise ValueError(f"{shown!r}: the database is not a number (write redis://host:port/db)")
        query = parse_qsl(parts.query, keep_blank_values=True)
        named = [value for key, value in query if key == "prefix"]
        rest = urlencode([(key, value) for key, value in query if key != "prefix"])
        once = Retry(
            ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1, supported_errors=(RedisConnectionError,)
        )
        # A blocking pool: with the client's plain one, a command beyond max_connections in flight is refused at
        # once ("Too many connections"), as if the server were away, which a busy process is not.
        pool = aioredis.BlockingConnectionPool.from_url(
            urlunsplit((scheme, parts.netloc, parts.path, rest, "")),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=once,
            max_connections=max_connections,
            timeout=timeout,
        )
        client = aioredis.Redis.from_pool(pool)  # closing the client closes its pool
        chosen = prefix if prefix is not None else (named[-1] if named else DEFAULT_PREFIX)
        wire = None
        if scheme != "rediss":  # TLS: the pool's connections carry every command
            dbs = [value for key, value in query if key == "db"] if scheme == "unix" else [parts.path.strip("/")]
            db = int(dbs[-1]) if dbs and dbs[-1].isdigit() else 0
            wire = Wire(parts._replace(scheme=scheme), db=db, timeout=timeout)
        return cls(client, prefix=chosen, name=_without_credentials(urlunsplit((scheme, *parts[1:3], "", ""))),
                   wire=wire)  # fmt: skip

    async def command(self, *args: Any) -> Any:
        """Run one command on the engine's multiplexed line (``wire.py``): the answer as Redis gave it (bulk strings
        as bytes, ``OK`` as b"OK"). A lost or stuck connection is ``BackendUnavailableError``."""
        try:  # as reaching() does, without a context manager on the hot path
            if self.wire is None:
                return await self.client.execute_command(*args)
            return await self.wire.command(*args)
        except UNREACHABLE as exc:
            raise self.unavailable(exc) from exc

    async def command_packed(self, prepared: Prepared) -> Any:
        """``command`` for a command packed once (``Prepared``)."""
        try:
            if self.wire is None:
                return await self.client.execute_command(*prepared.args)
            return await self.wire.command_packed(prepared.packed)
        except UNREACHABLE as exc:
            raise self.unavailable(exc) from exc

    def send_soon(self, *args: Any) -> asyncio.Future[Any] | None:
        """Send one command with the others of this turn of the loop, its answer not waited for: the future (its
        failures ``OSError``s), or None where the engine has no line up (TLS, or not connected yet)."""
        return None if self.wire is None else self.wire.send_soon(*args)

    def key(self, *parts: str) -> str:
        """The full name of a key or channel: the prefix, then ``parts`` joined by ":"."""
        return self.prefix + ":".join(parts)

    def script(self, source: str) -> Script:
        """The engine's ``Script`` for ``source`` (one per source, however many seams ask)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = Script(self, source)
        return script

    @contextmanager
    def reaching(self) -> Iterator[None]:
        """Run Redis commands: a connection that cannot be made or was lost becomes ``BackendUnavailableError``."""
        try:
            yield
        except UNREACHABLE as exc:
            raise self.unavailable(exc) from exc

    def unavailable(self, exc: BaseException) -> BackendUnavailableError:
        return BackendUnavailableError(f"the shared backend {self.name} is unreachable: {cause_of(exc)}")

    async def check(self) -> None:
        """Make sure the server answers and is new enough, and load the scripts made so far: what a process does
        before it serves. Raises ``BackendUnavailableError`` saying why not."""
        with self.reaching():
            info = await self.client.info("server")
        version = str(info.get("redis_version", "0"))
        numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
        if numbers < MIN_VERSION:
            raise BackendUnavailableError(
                f"the shared backend {self.name} is Redis {version}: tooldeck needs Redis 7.2 or newer, or Valkey"
            )
        for script in list(self._scripts.values()):
            await script.load()

    def when_back(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Have ``callback`` awaited each time the server is reached again after it was lost (``came_back``)."""
        self._when_back.append(callback)

    async def came_back(self) -> None:
        """The server answers again after it was lost (the hub says so, as it subscribes again): run what
        ``when_back`` registered, each failure one line in the log."""
        for callback in list(self._when_back):
            try:
                await callback()
            except Exception as exc:
                log.warning("after %s came back, %s failed: %s", self.name, getattr(callback, "__qualname__", callback),
                            cause_of(exc))  # fmt: skip

    def attached(self, name: str, make: Callable[[], T]) -> T:
        """The one ``name`` of this engine, made by ``make`` the first time (``Hub.of``); ``aclose`` closes it."""
        if name not in self._attached:
            self._attached[name] = make()
        return self._attached[name]

    async def aclose(self) -> None:
        """Close what is attached (the hub sends what it has to send), then every connection; the engine cannot be
        used again."""
        for item in reversed(list(self._attached.values())):
            close = getattr(item, "aclose", None)
            if close is not None:
                await close()
        self._attached.clear()
        if self.wire is not None:
            self.wire.close()
        await self.client.aclose()


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def cause_of(exc: BaseException) -> str:
    """What went wrong, in a few words on one line: the system's words for a socket error ("Connection refused"),
    else the client's message."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno)
        seen = seen.__cause__ or seen.__context__
    return " ".join(str(exc).split()) or type(exc).__name__
