"""Rate limits: token buckets behind a small limiter interface, the pipeline step that applies them per principal,
per tool, per principal and tool and globally, and the flood guard the HTTP layer asks before anything else.

A bucket holds at most ``burst`` tokens and refills at ``rate`` tokens per second; a call takes ``cost`` tokens or,
if there are not enough, takes nothing and is told how long until there would be. Nothing queues up.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from ..protocol.errors import RefusedError, ToolError
from ..protocol.record import Record
from .principal import principal_id

RETRY_META = "tooldeck/retryAfter"


class RateLimiter(Protocol):
    """Token buckets by key. Synchronous on purpose: the in-memory one answers in about a microsecond, so a
    coroutine (or a lock the loop awaits) would cost more than the work.

    Both methods raise ``ValueError`` when ``cost`` exceeds ``burst`` (no wait would ever admit it) or ``rate`` or
    ``burst`` is not positive. A limiter may also have ``acquire_all(buckets) -> waits``, taking from several buckets
    atomically (see ``MemoryRateLimiter``): ``RateLimits`` uses it when it is there.
    """

    def acquire(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        """Take ``cost`` tokens from ``key``'s bucket and return 0.0, or take nothing and return the seconds until
        ``cost`` tokens would be there."""
        ...

    def peek(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        """What ``acquire`` would return now, taking nothing (how ``RateLimits`` checks every bucket first)."""
        ...


@runtime_checkable
class AsyncRateLimiter(Protocol):
    """A limiter that must wait for its answer (a networked store: ``limits_redis.RedisRateLimiter``). Same contract
    as ``RateLimiter``, awaited. ``RateLimits`` uses these methods when the limiter has them, so a networked limiter
    implements this (and may implement the synchronous ``RateLimiter`` as well, for code that cannot await). It may
    also have ``acquire_all_async(buckets) -> waits``, ``acquire_all`` awaited: ``RateLimits`` then admits a call
    in one step (one round trip), whatever the number of buckets."""

    async def acquire_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float: ...

    async def peek_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float: ...


def _check(rate: float, burst: int, cost: float) -> None:
    if not rate > 0 or burst < 1 or cost > burst:
        raise ValueError(f"impossible bucket: rate={rate!r}/s, burst={burst!r}, cost={cost!r} (need rate > 0, "
                         "burst >= 1, cost <= burst)")  # fmt: skip


class MemoryRateLimiter:
    """Token buckets in this process's memory, safe to share between threads.

    Buckets refill lazily, when their key is next used. At most ``max_keys`` buckets are kept: each new key first
    evicts the least recently used buckets while they have refilled to full (a full bucket is what a new key starts
    with, so forgetting it loses nothing); past ``max_keys`` the least recently used bucket goes whatever it holds
    (that key starts afresh with a full bucket: the cost of bounded memory).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000) -> None:
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, got {max_keys!r}")
        self.clock = clock
        self.max_keys = max_keys
        # key -> [tokens, updated, rate, burst]; least recently used first
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def acquire(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        _check(rate, burst, cost)
        with self._lock:
            return self._take(key, rate, burst, cost, self.clock())

    def take(self, key: str, rate: float, burst: int) -> float:
        """``acquire`` of one token from a bucket whose rate and burst were checked already (a ``Limit``'s)."""
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None or bucket[2] != rate or bucket[3] != burst:  # new, or its limit changed: the long way
                return self._take(key, rate, burst, 1.0, self.clock())
            now = self.clock()  # a known bucket, the call of every request but a caller's first: _take, inlined
            self._buckets.move_to_end(key)
            tokens = bucket[0] + (now - bucket[1]) * rate
            if tokens > burst:
                tokens = burst
            bucket[1] = now
            if tokens >= 1.0:
                bucket[0] = tokens - 1.0
                return 0.0
            bucket[0] = tokens
            return (1.0 - tokens) / rate

    def peek(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        _check(rate, burst, cost)
        with self._lock:
            return self._wait(key, rate, burst, cost, self.clock())

    def acquire_all(self, buckets: Sequence[tuple[str, float, int, float]]) -> list[float]:
        """Take from every one of ``buckets`` (distinct ``(key, rate, burst, cost)``) or from none, atomically: the
        waits, all 0.0 when taken. ``RateLimits`` prefers this to checking and then taking, when a limiter has it."""
        for _, rate, burst, cost in buckets:
            _check(rate, burst, cost)
        with self._lock:
            now = self.clock()
            waits = [self._wait(key, rate, burst, cost, now) for key, rate, burst, cost in buckets]
            if not any(waits):
                for key, rate, burst, cost in buckets:
                    self._take(key, rate, burst, cost, now)
            return waits

    # The lock is held by the caller of these.

    def _wait(self, key: str, rate: float, burst: int, cost: float, now: float) -> float:
        bucket = self._buckets.get(key)
        if bucket is None:
            return 0.0  # a new key's bucket is full; asking about it does not store it
        tokens = min(burst, bucket[0] + (now - bucket[1]) * rate)
        return 0.0 if tokens >= cost else (cost - tokens) / rate

    def _take(self, key: str, rate: float, burst: int, cost: float, now: float) -> float:
        bucket = self._buckets.get(key)
        if bucket is None:
            self._make_room(now)
            bucket = self._buckets[key] = [float(burst), now, rate, burst]
        else:
            self._buckets.move_to_end(key)
            bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * rate)
            bucket[1], bucket[2], bucket[3] = now, rate, burst
        if bucket[0] >= cost:
            bucket[0] -= cost
            return 0.0
        return (cost - bucket[0]) / rate

    def _make_room(self, now: float) -> None:
        buckets = self._buckets
        # Two full buckets at most per new key: idle keys leave as fast as new ones come, in constant time per call.
        for _ in range(2):
            if not buckets:
                return
            key, (tokens, updated, rate, burst) = next(iter(buckets.items()))
            if tokens + (now - updated) * rate < burst:
                break
            del buckets[key]
        while len(buckets) >= self.max_keys:
            buckets.popitem(last=False)


# --- configuration ------------------------------------------------------------------------------------------------

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0,
          "hour": 3600.0, "d": 86400.0, "day": 86400.0}  # fmt: skip
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+?)s?\s*", re.IGNORECASE)


def parse_rate(text: str) -> float:
    """Tokens per second of a rate written ``N/unit``: "10/s", "600/minute", "1000/hour" (units s, sec, second, m,
    min, minute, h, hour, d, day, also plural)."""
    match = _RATE.fullmatch(text)
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f'invalid rate {text!r}: write N/unit with unit s, minute, hour or day, as in "600/minute"')
    count = float(match.group(1))
    if count <= 0:
        raise ValueError(f"invalid rate {text!r}: the count must be more than 0")
    return count / unit


class Limit(Record):
    """One limit: ``rate`` (tokens per second, or ``N/unit`` text) and ``burst``, how many calls may come at once.
    ``burst`` defaults to N of ``N/unit`` (a per-second number: that number rounded up), at least 1."""

    __slots__ = ("rate", "burst", "text")

    def __init__(self, rate: str | float, burst: int | None = None) -> None:
        if isinstance(rate, str):
            self.rate = parse_rate(rate)
            self.text = rate.strip()
            default = float(rate.split("/")[0])
        else:
            if isinstance(rate, bool) or not rate > 0 or math.isinf(rate):
                raise ValueError(f"invalid rate {rate!r}: tokens per second must be a number more than 0")
            self.rate = float(rate)
            self.text = f"{rate:g}/s"
            default = self.rate
        self.burst = max(1, math.ceil(default)) if burst is None else burst
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ValueError(f"invalid burst {burst!r} for rate {self.text}: it must be a whole number, at least 1")

    @classmethod
    def of(cls, spec: Limit | str | float) -> Limit:
        return spec if isinstance(spec, Limit) else cls(spec)


LimitSpec = Limit | str | float


# --- refusals -----------------------------------------------------------------------------------------------------


def retry_in(seconds: float) -> float:
    """``seconds`` rounded up to a tenth (at least 0.1), so a caller that waits what it was told is admitted."""
    return max(0.1, math.ceil(seconds * 10 - 1e-9) / 10)


def retry_meta(retry_after: float) -> dict[str, float]:
    """The ``_meta`` of a refused call's isError result: ``{"tooldeck/retryAfter": seconds}``, as in the message."""
    return {RETRY_META: retry_in(retry_after)}


def _message(label: str, limit: Limit, retry_after: float) -> str:
    return f"Rate limit exceeded ({label}: {limit.text}); retry in {retry_in(retry_after):.1f} s"


class RateLimitedError(ToolError):
    """A tools/call refused by a rate limit: an isError result. ``retry_after`` is in seconds (exact; the message
    and ``retry_meta`` round it up to a tenth)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimitRefusedError(RefusedError):
    """A resources/read or prompts/get refused by a rate limit: a JSON-RPC error (-32000, HTTP 429) whose ``data``
    is ``retry_meta(retry_after)``."""

    def __init__(self, message: str, retry_after: float) -> None:
        # Made here for reads and gets, and by the pipeline for a tools/call refused as a task is created.
        headers = [(b"retry-after", retry_after_header(retry_after).encode())]
        super().__init__(message, retry_meta(retry_after), http_status=429, headers=headers)
        self.retry_after = retry_after


# --- the pipeline step --------------------------------------------------------------------------------------------


class RateLimits:
    """Which limits apply, and the limit step of the call pipeline (``step``).

    Buckets, by key: ``per_principal`` "principal:<id>" (every call of one caller), ``per_tool`` "tool:<name>" (one
    tool, all callers; ``tools`` sets it per tool name instead), ``per_principal_tool`` "principal:<id>/tool:<name>"
    and ``global_`` "global" (every call). Resources and prompts count against the principal and global buckets.
    An anonymous request is "anonymous:<key>" in place of "principal:<id>", ``anonymous_key`` being a string or a
    function of the request (its session id, say; "anonymous" when it returns None): anonymous callers share that
    bucket unless told apart.

    A call is admitted only if every bucket it counts against has the tokens, and then takes from all of them. With
    a limiter that has ``acquire_all`` (``MemoryRateLimiter``) or ``acquire_all_async`` (``RedisRateLimiter``) that is
    one atomic step. With any other, all buckets are checked (``peek``) before any is taken from, and two calls racing
    between the check and the take can both pass the check and then one find a bucket empty: it is refused, and the
    tokens it took from the buckets before that one stay taken. That errs towards refusing, never towards admitting
    more than a limit allows.
    """

    def __init__(
        self,
        limiter: RateLimiter | AsyncRateLimiter | None = None,
        *,
        per_principal: LimitSpec | None = None,
        per_tool: LimitSpec | None = None,
        tools: dict[str, LimitSpec] | None = None,
        per_principal_tool: LimitSpec | None = None,
        global_: LimitSpec | None = None,
        anonymous_key: str | Callable[[Any], str | None] = "anonymous",
    ) -> None:
        self.limiter = limiter if limiter is not None else MemoryRateLimiter()
        self.per_principal = None if per_principal is None else Limit.of(per_principal)
        self.per_tool = None if per_tool is None else Limit.of(per_tool)
        self.tools = {name: Limit.of(spec) for name, spec in (tools or {}).items()}
        self.per_principal_tool = None if per_principal_tool is None else Limit.of(per_principal_tool)
        self.global_ = None if global_ is None else Limit.of(global_)
        self.anonymous_key = anonymous_key
        self._async = isinstance(self.limiter, AsyncRateLimiter)
        self._acquire_all: Callable[[list[tuple[str, float, int, float]]], list[float]] | None = (
            None if self._async else getattr(self.limiter, "acquire_all", None)
        )
        self._acquire_all_async: Callable[[list[tuple[str, float, int, float]]], Awaitable[list[float]]] | None = (
            getattr(self.limiter, "acquire_all_async", None) if self._async else None
        )
        # The common policy, one limit per principal on the in-memory limiter: a lean path with the same outcome.
        only_principal = per_principal is not None and not (per_tool or tools or per_principal_tool or global_)
        self._principal_only = only_principal and type(self.limiter) is MemoryRateLimiter
        self._last_caller: tuple[Any, str] = (None, "")  # the last principal object and its caller_key

    def caller_key(self, request: Any) -> str:
        """ "principal:<id>", or "anonymous:<key>" for a request nobody authenticated."""
        principal = request.principal
        if principal is not None:
            last = self._last_caller
            if last[0] is principal:  # a session's calls come from one principal object: its key is worked out once
                return last[1]
            known = f"principal:{principal_id(principal)}"
            self._last_caller = (principal, known)
            return known
        key = self.anonymous_key if isinstance(self.anonymous_key, str) else self.anonymous_key(request)
        return f"anonymous:{key if key is not None else 'anonymous'}"

    def buckets(self, request: Any, call: Any) -> list[tuple[str, str, Limit]]:
        """(key, label, limit) of every bucket ``call`` counts against, in the order they are taken from."""
        found: list[tuple[str, str, Limit]] = []
        caller = None
        if self.per_principal is not None:
            caller = self.caller_key(request)
            found.append((caller, "per principal", self.per_principal))
        if call.kind == "tool":
            tool_limit = self.tools.get(call.name, self.per_tool)
            if tool_limit is not None:
                found.append((f"tool:{call.name}", "per tool", tool_limit))
            if self.per_principal_tool is not None:
                caller = caller or self.caller_key(request)
                found.append((f"{caller}/tool:{call.name}", "per principal and tool", self.per_principal_tool))
        if self.global_ is not None:
            found.append(("global", "global", self.global_))
        return found

    def step(self, request: Any, call: Any) -> Awaitable[None] | None:
        """Admit ``call`` or raise: ``RateLimitedError`` (an isError result) for a tool, ``RateLimitRefusedError``
        (-32000, HTTP 429) for a resource or prompt. Returns an awaitable only when the limiter is asynchronous."""
        if self._principal_only:
            principal = request.principal
            last = self._last_caller
            key = last[1] if principal is not None and last[0] is principal else self.caller_key(request)
            limit = self.per_principal
            wait = self.limiter.take(key, limit.rate, limit.burst)  # type: ignore[union-attr]
            if wait:
                self._refuse((key, "per principal", limit), wait, call)  # type: ignore[arg-type]
            return None
        buckets = self.buckets(request, call)
        if not buckets:
            return None
        if self._async:
            return self._step_async(buckets, call)
        if self._acquire_all is not None and len(buckets) > 1:
            waits = self._acquire_all([(key, limit.rate, limit.burst, 1.0) for key, _, limit in buckets])
            self._refuse_if_waiting(buckets, waits, call)
            return None
        limiter = cast(RateLimiter, self.limiter)
        if len(buckets) > 1:
            waits = [limiter.peek(key, limit.rate, limit.burst) for key, _, limit in buckets]
            self._refuse_if_waiting(buckets, waits, call)
        for index, (key, _, limit) in enumerate(buckets):
            wait = limiter.acquire(key, limit.rate, limit.burst)
            if wait:
                self._refuse(buckets[index], wait, call)
        return None

    async def _step_async(self, buckets: list[tuple[str, str, Limit]], call: Any) -> None:
        if self._acquire_all_async is not None:
            waits = await self._acquire_all_async([(key, limit.rate, limit.burst, 1.0) for key, _, limit in buckets])
            self._refuse_if_waiting(buckets, waits, call)
            return
        limiter = cast(AsyncRateLimiter, self.limiter)
        if len(buckets) > 1:
            waits = [await limiter.peek_async(key, limit.rate, limit.burst) for key, _, limit in buckets]
            self._refuse_if_waiting(buckets, waits, call)
        for index, (key, _, limit) in enumerate(buckets):
            wait = await limiter.acquire_async(key, limit.rate, limit.burst)
            if wait:
                self._refuse(buckets[index], wait, call)

    def _refuse_if_waiting(self, buckets: list[tuple[str, str, Limit]], waits: list[float], call: Any) -> None:
        longest = max(range(len(waits)), key=waits.__getitem__)
        if waits[longest]:  # the longest wait is when every bucket would admit: name that limit
            self._refuse(buckets[longest], waits[longest], call)

    @staticmethod
    def _refuse(bucket: tuple[str, str, Limit], wait: float, call: Any) -> None:
        message = _message(bucket[1], bucket[2], wait)
        if call.kind == "tool":
            raise RateLimitedError(message, wait)
        raise RateLimitRefusedError(message, wait)


# --- the HTTP flood guard -----------------------------------------------------------------------------------------


class RequestRateGuard:
    """One limit on HTTP requests per key (a client address, a principal), asked before a request is read: its
    bucket is "http:<key>". ``check`` returns 0.0 (admitted) or the seconds to put in ``Retry-After``."""

    def __init__(self, limiter: RateLimiter, rate: str | float, burst: int | None = None) -> None:
        self.limiter = limiter
        self.limit = Limit(rate, burst)

    def check(self, key: str) -> float:
        return self.limiter.acquire(f"http:{key}", self.limit.rate, self.limit.burst)


def retry_after_header(seconds: float) -> str:
    """The ``Retry-After`` value of a 429: whole seconds, rounded up, at least 1 (it is sent only on a refusal)."""
    return str(max(1, math.ceil(seconds - 1e-9)))
