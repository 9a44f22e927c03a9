"""Security levels (seed 002), enforced on every call that runs user code: the pipeline's authorize step.

    level 0      anyone
    level 1-3    an authenticated principal
    level 4-7    ... with the item's scopes (its own, or granted by its roles)
    level 8-10   ... and the call verified: a recent authentication (auth_time within the policy's window), or the
                 user's confirmation through elicitation, bound to this principal, tool@version and arguments
                 (in a 2026-07-28 request an input-required round trip: the code and its binding travel in the
                 sealed, single-use requestState, so no process memory is needed)

A tool whose level, or whose name, the policy's ``[approvals]`` lists (four eyes) needs an authenticated caller and
waits instead for another person's decision in the operator console (approvals.py): an approver's decision takes
the place of the caller's own verification.

A tool's level is its own, else the policy's default; scopes are checked whenever an item declares them (at any
level above 0). Refusals say what would allow the call: 401 without credentials, 403 with the spec's step-up
``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`` for missing scopes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from ..protocol.errors import ClientRequestError, RefusedError, ToolError
from .policy import Policy

CONFIRM_TTL = 300.0  # seconds a confirmation code is good for
# Calls that run no action of the item's: they need its level's caller and scopes, not a per-call verification.
NO_ACTION = frozenset({"completion", "subscription"})
CLOCK_SKEW = 60.0  # seconds an auth_time may be ahead of this server's clock and still count as recent
APPROVAL_ROUNDS = 3  # 2026-07-28: how many times a link is asked for before a call nobody approved is refused


class Confirmations:
    """Confirmation codes, each single-use, short-lived and bound to (principal, tool@version, arguments digest): a
    client that replays an accepted answer for other arguments, another tool or another principal is refused."""

    def __init__(self, ttl: float = CONFIRM_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._open: dict[str, tuple[tuple[str, str, str], float]] = {}

    def issue(self, binding: tuple[str, str, str]) -> str:
        now = self.clock()
        self._open = {code: entry for code, entry in self._open.items() if entry[1] > now}  # drop the expired
        code = self.new_code()
        while code in self._open:
            code = self.new_code()
        self._open[code] = (binding, now + self.ttl)
        return code

    @staticmethod
    def new_code() -> str:
        import secrets  # here: the module costs start-up time and only levels 8-10 need it

        return f"{secrets.randbelow(10**6):06d}"

    def spend(self, code: str) -> None:
        """The code of a confirmation that was declined, cancelled or never answered: it can no longer be redeemed."""
        self._open.pop(code, None)

    def redeem(self, code: Any, binding: tuple[str, str, str]) -> bool:
        """True once for a code issued for ``binding`` and not expired; the code is spent either way."""
        entry = self._open.pop(code, None) if isinstance(code, str) else None
        return entry is not None and entry[0] == binding and entry[1] > self.clock()


class AccessControl:
    """The authorize step for a policy: ``await control(request, call)`` refuses (raises) or returns.

    ``ask`` is how a confirmation reaches the user: ``await ask(request, call, message, schema, timeout)`` returns
    the elicitation result (``.action``, ``.content``) or raises ClientRequestError (the deck passes one that goes
    through a Context). ``resource_metadata``: the URL of this server's RFC 9728 document, for 401/403 headers.
    """

    def __init__(
        self,
        policy: Policy,
        ask: Callable[..., Any] | None = None,
        resource_metadata: str | None = None,
        confirmations: Confirmations | None = None,
        clock: Callable[[], float] = time.time,
        ask_url: Callable[..., Any] | None = None,
        approvals: Callable[[], Any] | None = None,
    ) -> None:
        self.policy = policy
        self.ask = ask
        self.ask_url = ask_url  # ``await ask_url(request, call, message, url, elicitation_id, timeout)``: URL mode
        self._approvals_of = approvals  # -> approvals.Approvals over the deck's backends (None: kept here, in memory)
        self._approvals: Any = None
        self._gates: tuple[Any, frozenset[int], frozenset[str]] = (None, frozenset(), frozenset())
        self.resource_metadata = resource_metadata
        self.confirmations = confirmations or Confirmations()
        self.clock = clock
        self._restricted: dict[int, tuple[int, Policy, bool, frozenset[str]]] = {}  # per catalog, per change
        self._last: tuple[Any, Policy | None, frozenset[str]] = (None, None, frozenset())
        # The last (principal, item, policy) admitted below level 8: its next call needs no check (nothing it depends
        # on can change without a new object: principals, tools and policies are replaced, not edited).
        self._admitted: tuple[Any, Any, Any] = (None, None, None)

    @property
    def approvals(self) -> Any:
        """approvals.Approvals: the calls waiting for a person (in a browser, or an approver's: four eyes), listed
        and decided in every process that shares the deck's backends; made on first use."""
        if self._approvals_of is not None:
            return self._approvals_of()
        if self._approvals is None:
            from .approvals import Approvals, MemoryApprovalStore

            self._approvals = Approvals(MemoryApprovalStore())
        return self._approvals

    def level_of(self, item: Any) -> int:
        level = getattr(item, "security_level", None)
        return int(self.policy.levels["default"] if level is None else level)

    def scopes_of(self, principal: Any) -> frozenset[str]:
        """The policy's ``scopes_of``, worked out once per principal object: a session's calls come from one."""
        last = self._last
        if last[0] is principal and last[1] is self.policy:
            return last[2]
        granted = self.policy.scopes_of(principal)
        self._last = (principal, self.policy, granted)
        return granted

    def view_key(self, principal: Any, catalog: Any) -> Any:
        """The visibility class of ``principal`` for ``catalog`` — (authenticated, the scopes it has among those the
        catalog's items need) — or None when the principal sees everything (nothing is hidden)."""
        if not self.policy.levels["hide_unusable"]:
            return None
        generation = catalog._generation
        known = self._restricted.get(id(catalog))
        if known is None or known[0] != generation or known[1] is not self.policy:
            default = self.policy.levels["default"]
            levels = [getattr(item, "security_level", None) for item in catalog]
            guarded = any((default if level is None else level) > 0 for level in levels)
            needed = frozenset(scope for item in catalog for scope in getattr(item, "scopes", ()))
            known = self._restricted[id(catalog)] = (generation, self.policy, guarded, needed)
        if not known[2]:
            return None
        if principal is None:
            return (False, frozenset())
        return (True, self.scopes_of(principal) & known[3])

    def can_use(self, principal: Any, item: Any) -> bool:
        """Whether ``principal`` could ever call ``item`` (per-call verification aside): what lists show it."""
        level = self.level_of(item)
        if level == 0:
            return True
        if principal is None:
            return False
        scopes = getattr(item, "scopes", ())
        return not scopes or set(scopes) <= self.scopes_of(principal)

    def hides(self, principal: Any, item: Any) -> bool:
        """Whether ``item`` is left out of ``principal``'s lists (``hide_unusable``): then every answer about it is the
        one a name that does not exist gets."""
        return bool(self.policy.levels["hide_unusable"]) and not self.can_use(principal, item)

    def asks(self, item: Any) -> bool:
        """Whether a call of ``item`` may stop to ask the user to confirm it (levels 8-10 with confirmation on): its
        answer must then be able to stream, so the question reaches the client while the call waits."""
        level = getattr(item, "security_level", None)
        if level is None:
            level = self.policy.levels["default"]
        return level >= 8 and self.ask is not None and bool(self.policy.levels["confirm"])

    def sees_any(self, principal: Any, items: list[Any], memo: dict[Any, bool] | None = None) -> bool:
        """Whether the lists ``principal`` gets show any of ``items`` (what changed: an item's old or new form), so
        that a change it cannot see is not announced to it. Everything shows when ``hide_unusable`` is off.
        ``memo``: answers of one announcement by visibility class (authenticated, scopes), shared by its sessions."""
        if not self.policy.levels["hide_unusable"]:
            return True
        key = (principal is not None, self.scopes_of(principal))
        found = None if memo is None else memo.get(key)
        if found is None:
            found = any(self.can_use(principal, item) for item in items)
            if memo is not None:
                memo[key] = found
        return found

    def __call__(self, request: Any, call: Any) -> Any:
        """None when the call may go on; a coroutine to await when it needs verification (levels 8-10); raises
        RefusedError otherwise. Sync on purpose: level 0, the common case, costs one attribute read."""
        item = call.item
        principal = request.principal
        admitted = self._admitted
        if admitted[1] is item and admitted[0] is principal and admitted[2] is self.policy and item is not None:
            return None
        level = getattr(item, "security_level", None)
        if level is None:
            level = self.policy.levels["default"]
        gates = self._gates if self._gates[0] is self.policy else self._gates_of(self.policy)
        if level == 0 and call.name not in gates[2]:
            if call.kind == "tool":  # (a tool is its name: its next call from this principal needs no check)
                self._admitted = (principal, item, self.policy)
            return None
        if principal is None:
            raise RefusedError(
                f"{call.kind} {call.name!r} needs an authenticated caller (security level {level}); send credentials",
                http_status=401,
                headers=self._challenge(),
            )
        scopes = getattr(item, "scopes", ())
        if scopes and not self.scopes_of(principal).issuperset(scopes):
            self._refuse_scopes(call, level, tuple(scopes), self.scopes_of(principal))
        if call.kind == "tool" and (level in gates[1] or call.name in gates[2]):
            if call.defers_approval:  # a task being created: it waits for the approver in the background
                from .approvals import ApprovalDeferred

                raise ApprovalDeferred(f"tool {call.name!r} waits for an approver")
            return self._four_eyes(request, call, principal, level, f"tool {call.name!r}")
        if level >= 8:
            if call.kind in NO_ACTION:  # authorization is enough (and never remembered: see _admitted)
                return None
            return self._verify(request, call, principal, level, f"{call.kind} {call.name!r}")
        self._admitted = (principal, item, self.policy)
        return None

    def _gates_of(self, policy: Policy) -> tuple[Any, frozenset[int], frozenset[str]]:
        """The levels and tool names the policy's ``[approvals]`` sends to an approver, for ``policy``."""
        approvals = policy.approvals
        self._gates = (policy, frozenset(approvals["levels"]), frozenset(approvals["tools"]))
        return self._gates

    async def _four_eyes(self, request: Any, call: Any, principal: Any, level: int, label: str) -> None:
        """Wait for an approver's decision (approvals.py): the call runs once another person approves it."""
        from .audit import arguments_digest, redact

        item = call.item
        version = getattr(item, "version", None) or ""
        caller = str(getattr(principal, "id", principal))
        binding = (caller, f"{call.name}@{version}", arguments_digest(call.arguments))
        timeout = float(self.policy.approvals["timeout"])
        shown = {"tool": call.name, "version": version, "level": level, "principal": caller,
                 "arguments": redact(call.arguments, getattr(item, "input_schema", None),
                                     self.policy.audit.get("redact", ())),
                 "session": getattr(request.peer, "key", None)}  # fmt: skip
        approvals = self.approvals
        approval = await approvals.open("operator", binding, shown, timeout)
        try:
            decision = await approvals.wait(approval, timeout)
        finally:
            await approvals.withdraw(approval)
        if decision is None:
            raise ToolError(f"{label} was not run: no approver decided within {timeout:g} s")
        reason = f": {decision.reason}" if decision.reason else ""
        if not decision.approved:
            raise ToolError(f"{label} was not run: {decision.by} denied it{reason}")
        call.approval = f"approved by {decision.by}{reason}"

    async def decide(self, approval_id: str, approver: Any, approved: bool, reason: str = "") -> str | None:
        """An approver's decision on a call waiting for one (four eyes), in this process or another one that shares
        the deck's backends: None once the call has it, else why not (no such call waiting, not an approver, the
        caller themself, decided first elsewhere, or the process the call waits in is gone)."""
        from .approvals import NOT_WAITING, Decision

        approvals = self.approvals
        approval = await approvals.find(approval_id, "operator")
        if approval is None:
            return NOT_WAITING
        scope = self.policy.approvals["scope"]
        if approver is None or scope not in self.scopes_of(approver):
            return f"deciding needs the {scope!r} scope"
        who = str(getattr(approver, "id", approver))
        if who == approval.binding[0]:
            return "a call cannot be approved by its own caller: another approver must decide"
        return await approvals.decide(approval, Decision(approved, who, reason.strip()))

    def _refuse_scopes(self, call: Any, level: int, scopes: tuple[str, ...], granted: frozenset[str]) -> None:
        missing = sorted(set(scopes) - granted)
        raise RefusedError(
            f"{call.kind} {call.name!r} needs the scope{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(security level {level}); ask for a token that grants {' '.join(scopes)}",
            http_status=403,
            headers=self._challenge(error="insufficient_scope", scope=" ".join(scopes)),
        )

    async def _verify(self, request: Any, call: Any, principal: Any, level: int, label: str) -> None:
        window = self.policy.levels["recent_auth_seconds"]
        auth_time = getattr(principal, "auth_time", None)
        # Recent, and not ahead of the clock by more than a clock skew (a token backend refuses such a token; a
        # principal from anywhere else must not pass as authenticated recently for as long as it lives).
        if window and auth_time is not None and -CLOCK_SKEW <= self.clock() - auth_time <= window:
            return
        if not self.policy.levels["confirm"] or self.ask is None:
            raise RefusedError(self._unverifiable(label, level, window), http_status=403)
        item = call.item
        version = getattr(item, "version", None) or ""
        from .audit import arguments_digest  # levels 8-10 only

        binding = (str(getattr(principal, "id", principal)), f"{call.name}@{version}", arguments_digest(call.arguments))
        rounds = getattr(request, "rounds", None)  # a 2026-07-28 request: the confirmation is a round trip
        if self.policy.levels["approval"] == "url":
            origin = getattr(request.peer, "origin", None)  # an HTTP session's page address: approvals need one
            url_mode = "url" in ((request.client_capabilities or {}).get("elicitation") or {})
            if origin is not None and url_mode and self.ask_url is not None:
                if rounds is None:
                    await self._approve(request, call, principal, level, label, binding, version, origin)
                else:  # 2026-07-28: no process waits; the retry reads the decision
                    await self._approve_round(request, call, level, label, binding, version, origin, rounds)
                return
            if self.policy.levels["without_url"] == "refuse":
                raise RefusedError(f"{label} needs a person's approval in a browser (security level {level}); it "
                                   "needs a client that supports URL-mode elicitation, over HTTP",
                                   http_status=403)  # fmt: skip
        if rounds is None:
            code = self.confirmations.issue(binding)
        else:  # no process memory: the code and its binding travel in the sealed requestState
            code, bound = rounds.memo("confirmation", lambda: [Confirmations.new_code(), list(binding)])
        shown = orjson.dumps(call.arguments, option=orjson.OPT_INDENT_2).decode()
        message = (
            f"Confirm this call (security level {level}):\n{call.name}{'@' + version if version else ''}\n"
            f"arguments: {shown}\nTo run it, enter the code {code}."
        )
        schema = {"type": "object", "properties": {"code": {"type": "string", "title": "Confirmation code"}},
                  "required": ["code"]}  # fmt: skip
        try:
            answer = await self.ask(request, call, message, schema, float(self.policy.levels["confirm_timeout"]))
        except ClientRequestError as exc:
            if rounds is None:
                self.confirmations.spend(code)
            if "does not support" in str(exc) or "only URL-mode" in str(exc):
                raise RefusedError(self._unverifiable(label, level, window), http_status=403) from None
            raise ToolError(f"{label} was not run: the confirmation failed ({exc})") from None
        except BaseException:  # cancelled, or the time-out ran out: the code dies with the question
            if rounds is None:
                self.confirmations.spend(code)
            raise
        # An answer spends its question, whatever it says: a declined code or state cannot be accepted later.
        given = (answer.content or {}).get("code") if answer.action == "accept" else None
        if rounds is None:
            confirmed = self.confirmations.redeem(given, binding) if given is not None else False
            self.confirmations.spend(code)
        else:
            await rounds.spend()  # single use: a replayed retry is refused (-32602) before anything runs
            confirmed = given == code and bound == list(binding)
        if answer.action != "accept":
            raise ToolError(f"{label} was not run: the user did not confirm it ({answer.action})")
        if not confirmed:
            raise ToolError(f"{label} was not run: the confirmation code does not match this call")

    async def _approve(self, request: Any, call: Any, principal: Any, level: int, label: str,
                       binding: tuple[str, str, str], version: str, origin: str) -> None:  # fmt: skip
        """Approval in a browser (approvals.py): the client is asked to open the page; the call waits for the
        person's decision there, then the client hears the elicitation is complete."""
        timeout = float(self.policy.levels["confirm_timeout"])
        approvals = self.approvals
        approval = await approvals.open("url", binding, _shown(call, version, level, binding), timeout)
        message = _ask_approval(call, version, level, "Open the page, check the call, and approve or deny it there.")
        ask_url = self.ask_url
        assert ask_url is not None  # _verify comes here only with one
        try:
            answer = await ask_url(request, call, message, f"{origin}/approve/{approval.id}", approval.id, timeout)
            if answer.action != "accept":
                raise ToolError(f"{label} was not run: the user did not open the approval page ({answer.action})")
            decision = await approvals.wait(approval, timeout)
            if decision is None:
                raise ToolError(f"{label} was not run: nobody approved it within {timeout:g} s")
            approved = decision.approved
        except ClientRequestError as exc:
            raise ToolError(f"{label} was not run: the approval could not be asked for ({exc})") from None
        finally:
            await approvals.withdraw(approval)
        request.peer.send({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                           "params": {"elicitationId": approval.id}}, request.request_id)  # fmt: skip
        if not approved:
            raise ToolError(f"{label} was not run: the approver denied it")
        call.approval = "approved by its caller on the approval page"

    async def _approve_round(self, request: Any, call: Any, level: int, label: str, binding: tuple[str, str, str],
                             version: str, origin: str, rounds: Any) -> None:  # fmt: skip
        """Approval in a browser for a 2026-07-28 request, where no process waits: the first round opens the approval
        (kept in the backends' store, fleet-wide) and ends input-required with the link, its id sealed in the
        requestState; a retry that says the user opened it takes the decision from the store (once). Not decided
        yet: the link is asked again, ``APPROVAL_ROUNDS`` times at most, then the call is refused."""
        timeout = float(self.policy.levels["confirm_timeout"])
        approvals = self.approvals
        kept = rounds.memos.get("approval")
        if kept is None:
            shown = _shown(call, version, level, binding)
            opened = await approvals.open("url", binding, shown, timeout, waits=False)
            kept = rounds.memo("approval", lambda: [opened.id, 0])
        approval_id, attempt = kept
        message = _ask_approval(call, version, level, "Open the page, check the call, approve or deny it there, then "
                                "retry.")  # fmt: skip
        url = f"{origin}/approve/{approval_id}"
        ask_url = self.ask_url
        assert ask_url is not None  # _verify comes here only with one
        answer = await ask_url(request, call, message, url, approval_id, timeout, key=f"approval-{attempt}")
        if answer.action != "accept":
            await approvals.close(approval_id)
            raise ToolError(f"{label} was not run: the user did not open the approval page ({answer.action})")
        await rounds.spend()  # each retry's state once: a replayed retry is refused (-32602) before anything runs
        decision = await approvals.decision(approval_id)
        if decision is None:
            if await approvals.find(approval_id, "url") is None:  # decided meanwhile (taken, not yet kept), or gone
                decision = await approvals.decision(approval_id)
            elif attempt + 1 < APPROVAL_ROUNDS:
                kept[1] = attempt + 1  # the next round's state asks again, under a new key: this round ends here
                await ask_url(request, call, message, url, approval_id, timeout, key=f"approval-{attempt + 1}")
                raise AssertionError("a question asked under a new key is answered by a later round, not this one")
        if decision is None:
            await approvals.close(approval_id)
            raise ToolError(f"{label} was not run: nobody approved it on its page (or it expired)")
        if not decision.approved:
            raise ToolError(f"{label} was not run: the approver denied it")
        call.approval = "approved by its caller on the approval page"

    def _unverifiable(self, label: str, level: int, window: float) -> str:
        ways = ["a client that supports elicitation (to confirm the call)"] if self.policy.levels["confirm"] else []
        if window:
            ways.append(f"a token from an authentication in the last {window:g} s")
        allow = " or ".join(ways) or "a policy that allows confirmation or recent authentication ([levels])"
        return f"{label} needs per-call verification (security level {level}); it needs {allow}"

    def _challenge(self, **params: str) -> list[tuple[bytes, bytes]]:
        parts = [f'{name}="{value}"' for name, value in params.items()]
        if self.resource_metadata:
            parts.append(f'resource_metadata="{self.resource_metadata}"')
        value = "Bearer " + ", ".join(parts) if parts else "Bearer"
        return [(b"www-authenticate", value.encode())]


def _shown(call: Any, version: str, level: int, binding: tuple[str, str, str]) -> dict[str, Any]:
    """What the approval page shows of a call."""
    return {"tool": call.name, "version": version, "level": level, "principal": binding[0],
            "arguments": call.arguments}  # fmt: skip


def _ask_approval(call: Any, version: str, level: int, then: str) -> str:
    """The message that asks the user to open a call's approval page."""
    return f"{call.name}{'@' + version if version else ''} needs your approval (security level {level}). {then}"
