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
``notifications/elicitation/complete``.

Four eyes (``[approvals]``: levels, tools): the call waits, up to ``timeout``, in the queue the console shows
(``AccessControl.queue``); a principal holding the approver scope, and not the caller, approves or denies it with a
reason (``AccessControl.decide``). The decision is single-use and bound like a confirmation; the call's audit
record says who decided and why.

An approval lives in the process that asked (the call waits there): in a fleet the page must reach that process,
which it does when the balancer keeps a browser's page on one process for the approval's minutes (the id is in
the path); approvals shared through the backends are not yet built.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any, NamedTuple


class Decision(NamedTuple):
    """How a person settled an approval: ``approved`` or not, by whom (a principal's id), and why."""

    approved: bool
    by: str
    reason: str = ""


class Approval:
    """One call waiting for a person's decision."""

    def __init__(self, approval_id: str, binding: tuple[str, str, str], shown: dict[str, Any], expires: float,
                 decided: asyncio.Future[Decision]) -> None:  # fmt: skip
        self.id = approval_id
        self.binding = binding  # (principal id, tool@version, arguments digest)
        self.shown = shown  # what the page shows: tool, version, level, principal, arguments
        self.expires = expires
        self.requested = time.time()  # wall-clock seconds, as the console shows it
        self.decided = decided
        self.form_token = secrets.token_urlsafe(24)  # the page's own form must come back with it (CSRF)


class Approvals:
    """The approvals this process waits on, by id (an unguessable 192-bit value in the page's path)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._open: dict[str, Approval] = {}

    def open(self, binding: tuple[str, str, str], shown: dict[str, Any], ttl: float) -> Approval:
        now = self.clock()
        self._open = {key: found for key, found in self._open.items() if found.expires > now}
        approval_id = secrets.token_urlsafe(24)
        approval = Approval(approval_id, binding, shown, now + ttl, asyncio.get_running_loop().create_future())
        self._open[approval_id] = approval
        return approval

    def pending(self, approval_id: str) -> Approval | None:
        """The approval still waiting for its decision (None: unknown, decided, expired or withdrawn)."""
        found = self._open.get(approval_id)
        if found is None or found.decided.done() or found.expires <= self.clock():
            return None
        return found

    def waiting(self) -> list[Approval]:
        """The approvals still waiting, oldest first."""
        now = self.clock()
        return [found for found in self._open.values() if not found.decided.done() and found.expires > now]

    def decide(self, approval: Approval, decision: Decision) -> bool:
        """Settle ``approval`` once; False if it was settled (or withdrawn) meanwhile."""
        self._open.pop(approval.id, None)
        if approval.decided.done():
            return False
        approval.decided.set_result(decision)
        return True

    def withdraw(self, approval: Approval) -> None:
        """The call stopped waiting (declined, cancelled, timed out): the page can no longer decide it."""
        self._open.pop(approval.id, None)
        if not approval.decided.done():
            approval.decided.cancel()
