"""Approvals of calls by a person, out of the client and the model: by the caller in a browser (levels 8-10 with
``[levels] approval = "url"``), or by another person, an approver, in the operator console (``[approvals]``: four
eyes).

The call waits while its client is sent a URL-mode elicitation naming tooldeck's approval page
(``/approve/<id>``, transports/http/approve.py). The page shows the call — tool, version, level, who calls, the
arguments — and the person approves or denies it by signing in with the same credentials the caller used: the page
checks that they authenticate the caller's own identity (the spec's "verify that the user who opens the URL is the
user who was asked"), so the link alone approves nothing, and what the model could read (the link) is nothing it
could replay. A decision is single-use, bound to (principal, tool@version, arguments digest) like a confirmation
code, and expires with its question (``confirm_timeout``); the call then runs or is refused, and the client is sent
``notifications/elicitation/complete``. A 2026-07-28 call has no process waiting for it (``open(waits=False)``: its
node is ``NOBODY``): its decision is kept in the store (``keep_decision``) until its retry takes it, once
(``decision``; security/levels.py ``_approve_round``).

Four eyes (``[approvals]``: levels, tools): the call waits, up to ``timeout``, in the queue the console shows
(``AccessControl.approvals``, kind "operator"); a principal holding the approver scope, and not the caller,
approves or denies it with a reason (``AccessControl.decide``). The decision is single-use and bound like a
confirmation; the call's audit record says who decided and why.

Across a fleet. What is waiting is kept in the backends' ``ApprovalStore`` (server/backends.py): in this process's
memory, or in Redis when the backends are shared, so every process's console lists the fleet's approvals and every
process's page finds its approval. The call itself waits in the process that runs it (its ``node``). A decision is
made on any process, checked there (scope, not the caller, the page's credentials), then taken out of the store —
the first taker wins, so a second decision anywhere is refused — and delivered to the waiting process
(server/approval_relay.py, over the bus), which settles the call only if the decision is bound to the call it waits
for. A process that no longer answers took its call with it: the decider is told so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    import asyncio

KINDS = ("url", "operator")  # approved by the caller in a browser; by an approver in the console (four eyes)
NOBODY = ""  # the node of an approval no process waits for (a 2026-07-28 call learns its decision when retried)
NOT_WAITING = "no call with this id is waiting for approval (decided, withdrawn or expired)"
TAKEN = "no call with this id is waiting for approval: another decision on it came first (or it was just withdrawn)"
STOPPED = "the call stopped waiting before the decision reached it (withdrawn or expired): it was not run"


WAITING_FOR_APPROVER = "Waiting for an approver (four eyes)"  # the status message of a task that does
APPROVED = "Approved: running"  # and once it is approved


def awaits_approver(record: Any) -> bool:
    """Whether a task (its record) was created to wait for an approver, and has not been admitted since."""
    return bool(record.status_message == WAITING_FOR_APPROVER)


class ApprovalDeferred(Exception):
    """A task-augmented call that waits for an approver (four eyes): its task is created now and waits in the
    background (server/task_manager.py), in ``working`` with a status message that says so, instead of holding the
    request that creates it."""


class Decision(NamedTuple):
    """How a person settled an approval: ``approved`` or not, by whom (a principal's id), and why."""

    approved: bool
    by: str
    reason: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Decision:
        """A decision kept as JSON (the list a ``Decision`` encodes to)."""
        approved, by, reason = data
        return cls(bool(approved), str(by), str(reason))


class Approval:
    """One call waiting for a person's decision, as every process sees it: ``kind`` ("url" or "operator"),
    ``binding`` (principal id, tool@version, arguments digest), ``shown`` (tool, version, level, principal,
    arguments: redacted for an approver), the ``node`` (process) the call waits in, ``expires`` and ``requested``
    (wall-clock seconds), and the page's ``form_token`` (its own form must come back with it: CSRF)."""

    __slots__ = ("binding", "expires", "form_token", "id", "kind", "node", "requested", "shown")

    def __init__(self, approval_id: str, kind: str, binding: tuple[str, str, str], shown: dict[str, Any], node: str,
                 expires: float, requested: float, form_token: str) -> None:  # fmt: skip
        self.id = approval_id
        self.kind = kind
        self.binding = binding
        self.shown = shown
        self.node = node
        self.expires = expires
        self.requested = requested
        self.form_token = form_token

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "binding": list(self.binding), "shown": self.shown,
                "node": self.node, "expires": self.expires, "requested": self.requested,
                "form": self.form_token}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Approval:
        principal, tool, digest = data["binding"]
        return cls(data["id"], data["kind"], (principal, tool, digest), data["shown"], data["node"],
                   float(data["expires"]), float(data["requested"]), data["form"])  # fmt: skip


class ApprovalStore(Protocol):
    """The approvals waiting in a deck's processes, by id (an unguessable 192-bit value), each until its expiry."""

    async def add(self, approval: Approval) -> None:
        """Keep ``approval`` until it expires (or is taken or deleted)."""
        ...

    async def get(self, approval_id: str) -> Approval | None:
        """The approval still waiting (None: unknown, decided, withdrawn or expired)."""
        ...

    async def waiting(self) -> list[Approval]:
        """Every approval still waiting, in every process, oldest first."""
        ...

    async def take(self, approval_id: str) -> Approval | None:
        """Remove the approval: it, if this call removed it — of any number of takers, at once or later, one only."""
        ...

    async def delete(self, approval_id: str) -> None:
        """The call stopped waiting (withdrawn, timed out): forget it."""
        ...

    async def miss(self, approval_id: str) -> int:
        """One more wrong sign-in on the approval's page: how many there were, on every process."""
        ...

    async def keep_decision(self, approval_id: str, decision: Decision, ttl: float) -> None:
        """Keep the decision on an approval no process waits for, ``ttl`` seconds at most, for its call's retry."""
        ...

    async def decision(self, approval_id: str) -> Decision | None:
        """The decision kept for ``approval_id``, given once (then forgotten); None if none was kept (yet)."""
        ...


class MemoryApprovalStore:
    """The approvals of one process (or of the decks sharing this record in one process). Each is kept as JSON, as a
    shared store keeps it: what a reader gets is never the object the waiting call holds."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._open: dict[str, dict[str, Any]] = {}
        self._misses: dict[str, int] = {}
        self._decided: dict[str, tuple[list[Any], float]] = {}  # id -> (the decision, as JSON, and its expiry)

    async def add(self, approval: Approval) -> None:
        now = self.clock()
        for gone in [key for key, found in self._open.items() if found["expires"] <= now]:
            del self._open[gone]
            self._misses.pop(gone, None)
        self._open[approval.id] = approval.to_json()

    async def get(self, approval_id: str) -> Approval | None:
        found = self._open.get(approval_id)
        if found is None or found["expires"] <= self.clock():
            return None
        return Approval.from_json(found)

    async def waiting(self) -> list[Approval]:
        now = self.clock()
        found = [Approval.from_json(data) for data in self._open.values() if data["expires"] > now]
        return sorted(found, key=lambda approval: approval.requested)

    async def take(self, approval_id: str) -> Approval | None:
        found = self._open.pop(approval_id, None)
        self._misses.pop(approval_id, None)
        if found is None or found["expires"] <= self.clock():
            return None
        return Approval.from_json(found)

    async def delete(self, approval_id: str) -> None:
        self._open.pop(approval_id, None)
        self._misses.pop(approval_id, None)

    async def miss(self, approval_id: str) -> int:
        count = self._misses[approval_id] = self._misses.get(approval_id, 0) + 1
        return count

    async def keep_decision(self, approval_id: str, decision: Decision, ttl: float) -> None:
        now = self.clock()
        self._decided = {key: kept for key, kept in self._decided.items() if kept[1] > now}
        self._decided[approval_id] = (list(decision), now + ttl)

    async def decision(self, approval_id: str) -> Decision | None:
        kept = self._decided.pop(approval_id, None)
        if kept is None or kept[1] <= self.clock():
            return None
        return Decision.from_json(kept[0])


# How a decision reaches the process a call waits in: (node, approval id, binding, decision) -> whether the call was
# still waiting there for that binding, or None when the process did not answer (server/approval_relay.py).
Relay = Callable[[str, str, tuple[str, str, str], Decision], Awaitable[bool | None]]


class Approvals:
    """This process's end: the calls waiting here (each a future, settled once), the fleet's approvals in ``store``,
    and decisions on any of them. ``node``: this process; ``relay``: how a decision reaches another one (None:
    every approval waits in this process)."""

    def __init__(self, store: ApprovalStore, node: str = "", relay: Relay | None = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.store = store
        self.node = node
        self.relay = relay
        self.clock = clock
        self._waits: dict[str, tuple[tuple[str, str, str], asyncio.Future[Decision]]] = {}

    async def open(self, kind: str, binding: tuple[str, str, str], shown: dict[str, Any], ttl: float, *,
                   waits: bool = True) -> Approval:  # fmt: skip
        """A call waits for a decision from now on, for ``ttl`` seconds at most (``wait``); with ``waits`` False,
        no process waits for it (a 2026-07-28 call: its retry asks the store for the decision, ``decision``)."""
        import asyncio
        import secrets  # here: the module costs start-up time and only levels 8-10 need it

        now = self.clock()
        approval = Approval(secrets.token_urlsafe(24), kind, binding, shown, self.node if waits else NOBODY,
                            now + ttl, now, secrets.token_urlsafe(24))  # fmt: skip
        if waits:
            self._waits[approval.id] = (binding, asyncio.get_running_loop().create_future())
        try:
            await self.store.add(approval)
        except BaseException:
            self._waits.pop(approval.id, None)
            raise
        return approval

    async def wait(self, approval: Approval, timeout: float) -> Decision | None:
        """The decision on ``approval``, a call of this process; None when none came within ``timeout`` seconds."""
        import asyncio

        try:
            return await asyncio.wait_for(asyncio.shield(self._waits[approval.id][1]), timeout)
        except TimeoutError:
            return None

    async def withdraw(self, approval: Approval) -> None:
        """The call stops waiting (decided, declined, cancelled, timed out): nobody can decide it any more."""
        found = self._waits.pop(approval.id, None)
        if found is None or found[1].done():
            return  # decided: its decider took it out of the store
        found[1].cancel()
        try:
            await self.store.delete(approval.id)
        except Exception:  # the store cannot be reached: the approval expires there on its own
            pass

    async def close(self, approval_id: str) -> None:
        """An approval no process waits for (a 2026-07-28 call's) that will never be used: out of the store, so its
        page takes no decision for a call that was refused."""
        try:
            await self.store.delete(approval_id)
        except Exception:  # the store cannot be reached: the approval expires there on its own
            pass

    def settle(self, approval_id: str, binding: tuple[str, str, str], decision: Decision) -> bool:
        """Give ``decision`` to the call waiting here for ``approval_id``, if that call's binding is ``binding``:
        whether it was still waiting for it."""
        found = self._waits.get(approval_id)
        if found is None or found[1].done() or found[0] != binding:
            return False
        found[1].set_result(decision)
        return True

    async def decision(self, approval_id: str) -> Decision | None:
        """The decision kept for an approval no process waited for: given once; None when there is none (yet)."""
        return await self.store.decision(approval_id)

    async def find(self, approval_id: str, kind: str) -> Approval | None:
        """The approval of ``kind`` still waiting, in any process (None: unknown, decided, withdrawn or expired)."""
        found = await self.store.get(approval_id)
        return found if found is not None and found.kind == kind else None

    async def waiting(self, kind: str) -> list[Approval]:
        """The approvals of ``kind`` still waiting, in every process, oldest first."""
        return [found for found in await self.store.waiting() if found.kind == kind]

    async def decide(self, approval: Approval, decision: Decision) -> str | None:
        """Settle ``approval`` (checked by the caller: who may decide it) once, in whichever process it waits: None
        once the call has the decision, else why it has not (decided first elsewhere, gone, its process gone)."""
        if await self.store.take(approval.id) is None:
            return TAKEN
        if approval.node == NOBODY:  # a 2026-07-28 call: its retry reads the decision (levels.py)
            await self.store.keep_decision(approval.id, decision, max(1.0, approval.expires - self.clock()))
            return None
        if approval.node == self.node or self.relay is None:
            settled: bool | None = self.settle(approval.id, approval.binding, decision)
        else:
            settled = await self.relay(approval.node, approval.id, approval.binding, decision)
        if settled is None:
            return (f"the process the call waits in ({approval.node}) did not answer: the call ended with it, and "
                    "was not run")  # fmt: skip
        return None if settled else STOPPED
