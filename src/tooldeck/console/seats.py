"""Who is signed in to the console: its seats (console sessions), kept where every process of a fleet finds them.

A seat is opened at sign-in (or, with no authentication, at a loopback client's first page) and named by a random
id in its cookie; it holds who signed in and the CSRF token of their forms. Each read renews its idle time (``IDLE``);
it lasts ``LIFETIME`` in all, however busy. ``MemorySeats`` keeps the seats in this process (``MAX_SEATS`` at most,
the least recently used going first). With a shared backend (Redis) ``RedisSeats`` keeps them in Redis, each a JSON
value that expires when it has been idle too long: a browser signed in through one process is signed in on all of
them, and a sign-out on one ends the seat on all of them. What a shared seat keeps of a person is what a
``Principal`` says of them (subject, how and by whom authenticated, scopes and roles; not a token's other claims).
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Protocol

from ..security.principal import Principal

IDLE = 1800.0  # seconds a console session lasts without a request
LIFETIME = 12 * 3600.0  # seconds a console session lasts at most
MAX_SEATS = 1000  # console sessions one process keeps at most (MemorySeats)


class Seat:
    """One person's console session: who they are and the CSRF token their forms carry. ``principal`` None: the
    local operator (no authentication, a loopback client). Times are seconds since the epoch (one clock for a fleet)."""

    __slots__ = ("id", "principal", "csrf", "started", "seen", "new")

    def __init__(self, principal: Any) -> None:
        self.new = True  # its cookie is still to be sent
        self.id = secrets.token_urlsafe(32)
        self.principal = principal
        self.csrf = secrets.token_urlsafe(32)
        self.started = self.seen = time.time()

    @property
    def who(self) -> str:
        return "local operator" if self.principal is None else str(getattr(self.principal, "id", self.principal))

    def expired(self, now: float) -> bool:
        return now - self.seen > IDLE or now - self.started > LIFETIME

    def to_dict(self) -> dict[str, Any]:
        principal = self.principal
        if principal is not None and not isinstance(principal, Principal):
            raise TypeError(f"a console seat shared by a fleet keeps a Principal, not {type(principal).__name__}")
        return {"id": self.id, "csrf": self.csrf, "started": self.started,
                "principal": None if principal is None else {
                    "subject": principal.subject, "scopes": sorted(principal.scopes), "roles": sorted(principal.roles),
                    "method": principal.method, "issuer": principal.issuer, "auth_time": principal.auth_time,
                    "expires_at": principal.expires_at}}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seat:
        seat = cls.__new__(cls)
        seat.id, seat.csrf, seat.started, seat.new = data["id"], data["csrf"], data["started"], False
        seat.seen = time.time()  # read just now (a read renews the seat)
        found = data.get("principal")
        seat.principal = None if found is None else Principal(
            found["subject"], scopes=found["scopes"], roles=found["roles"], method=found["method"],
            issuer=found["issuer"], auth_time=found["auth_time"], expires_at=found["expires_at"])  # fmt: skip
        return seat


class Seats(Protocol):
    async def open(self, principal: Any) -> Seat:
        """A new seat for ``principal`` (None: the local operator)."""
        ...

    async def get(self, seat_id: str) -> Seat | None:
        """The live seat of that id, renewed (None: no such seat, or it expired)."""
        ...

    async def end(self, seat_id: str) -> None:
        """Sign the seat out (everywhere its store is seen)."""
        ...


class MemorySeats:
    """The seats of this process."""

    def __init__(self) -> None:
        self.seats: dict[str, Seat] = {}

    async def open(self, principal: Any) -> Seat:
        now = time.time()
        seats = [seat for seat in self.seats.values() if not seat.expired(now)]
        if len(seats) >= MAX_SEATS:  # a client that never keeps its cookie opens a seat each time: the oldest go
            seats = sorted(seats, key=lambda seat: seat.seen)[len(seats) - MAX_SEATS + 1 :]
        self.seats = {seat.id: seat for seat in seats}
        seat = Seat(principal)
        self.seats[seat.id] = seat
        return seat

    async def get(self, seat_id: str) -> Seat | None:
        seat = self.seats.get(seat_id)
        if seat is None:
            return None
        now = time.time()
        if seat.expired(now):
            self.seats.pop(seat_id, None)
            return None
        seat.seen = now
        return seat

    async def end(self, seat_id: str) -> None:
        self.seats.pop(seat_id, None)


class RedisSeats:
    """The seats of a fleet, in Redis (``engine``: the deck's shared connection): one JSON value each, expiring
    ``IDLE`` seconds after it was last read or written."""

    def __init__(self, engine: Any) -> None:
        from ..engine.values import JsonValues

        self.values = JsonValues(engine, "console-seat", ttl=IDLE)

    async def open(self, principal: Any) -> Seat:
        seat = Seat(principal)
        await self.values.put(seat.id, seat.to_dict())
        return seat

    async def get(self, seat_id: str) -> Seat | None:
        data = await self.values.get(seat_id)
        if type(data) is not dict:
            return None
        seat = Seat.from_dict(data)
        if seat.expired(seat.seen):  # past its lifetime, however busy
            await self.values.delete(seat_id)
            return None
        return seat

    async def end(self, seat_id: str) -> None:
        await self.values.delete(seat_id)
