#!/usr/bin/env python3
"""security_mutants.py - weaken each check that decides who may do what, one step at a time, and see that a test
fails.

Each mutation below changes one line of a copy of src/ (a level boundary off by one, ``all`` made ``any``, a clock
comparison loosened, a binding field or an owner comparison dropped, a single-use mark skipped, a key left out of a
cache key), then runs the tests named for it with that copy first on the path. A mutation no test catches is a check
the suite does not guard, and each would be a real bypass if it ever happened: the run ends with the survivors and
exit status 1. The tests named are the ones that mirror the module (plus the channel tests where a check is about
a channel); the property tests are left out on purpose, so each check has a direct test of its own.

    scripts/security_mutants.py                     # all of them (a few minutes)
    scripts/security_mutants.py "scopes: any"       # the ones named
    scripts/security_mutants.py --list
    scripts/security_mutants.py --check             # only see that each text to change is still there (a second)

Run it from the repository with the project's Python (the one that runs pytest). Nothing in the tree is changed.
The runner is mutants.py (shared with definition_mutants.py).
"""

from __future__ import annotations

import sys

from mutants import Mutation, main

S = "src/tooldeck/security/"
V = "src/tooldeck/server/"
T = "tests/security/"
LEVELS = [T + "test_levels.py", T + "test_channels.py"]
ROUNDS = [T + "test_levels.py", "tests/server/test_rounds.py", "tests/transports/http/test_rounds.py"]
JWT = [T + "test_jwt.py", T + "test_http_policy.py"]
BEARER = [T + "test_bearer.py", T + "test_http_policy.py"]
TOKENS = [T + "test_tokens.py"]
STATES = [T + "test_request_state.py", "tests/server/test_rounds.py"]
LIMITS = [T + "test_limits.py", T + "test_channels.py"]
APPLY = [T + "test_apply.py", T + "test_inputs.py", T + "test_channels.py", T + "test_http_policy.py"]
AUDIT = [T + "test_apply.py", T + "test_audit_trail.py"]
TASKS = ["tests/server/test_tasks.py", "tests/server/test_task_extension.py", T + "test_channels.py"]
STORES = ["tests/tasks/test_store.py", "tests/tasks/test_sqlite.py"]
SESSIONS = [T + "test_http_policy.py", "tests/transports/http/test_layers.py", T + "test_channels.py"]
CHANNELS = [T + "test_channels.py", "tests/server/test_subscriptions.py"]
MUTATIONS: list[Mutation] = []


def m(name: str, file: str, old: str, new: str, tests: list[str]) -> None:
    MUTATIONS.append(Mutation(name, file, old, new, tests))


# --- levels.py: who may call what ---------------------------------------------------------------------------------
L = S + "levels.py"
m(
    "level 1 open to anyone",
    L,
    """        if level == 0 and call.name not in gates[2]:
            if call.kind == "tool":""",
    """        if level <= 1 and call.name not in gates[2]:
            if call.kind == "tool":""",
    LEVELS,
)
m(
    "anonymous not refused",
    L,
    """        if principal is None:
            raise RefusedError(""",
    """        if False:
            raise RefusedError(""",
    LEVELS,
)
m(
    "scopes: any",
    L,
    "if scopes and not self.scopes_of(principal).issuperset(scopes):",
    "if scopes and not self.scopes_of(principal).intersection(scopes):",
    LEVELS,
)
m(
    "scopes only from level 4",
    L,
    "if scopes and not self.scopes_of(principal).issuperset(scopes):",
    "if scopes and level >= 4 and not self.scopes_of(principal).issuperset(scopes):",
    LEVELS,
)
m(
    "scopes not checked at 8-10",
    L,
    "if scopes and not self.scopes_of(principal).issuperset(scopes):",
    "if scopes and level < 8 and not self.scopes_of(principal).issuperset(scopes):",
    LEVELS,
)
m(
    "level 8 unverified",
    L,
    """        if level >= 8:
            if call.kind in NO_ACTION:""",
    """        if level >= 9:
            if call.kind in NO_ACTION:""",
    LEVELS,
)
m(
    "no action: resource reads",
    L,
    'NO_ACTION = frozenset({"completion", "subscription"})',
    'NO_ACTION = frozenset({"completion", "subscription", "resource"})',
    LEVELS,
)
m(
    "no action: prompts",
    L,
    'NO_ACTION = frozenset({"completion", "subscription"})',
    'NO_ACTION = frozenset({"completion", "subscription", "prompt"})',
    LEVELS,
)
m(
    "no action remembered as admitted",
    L,
    """            if call.kind in NO_ACTION:  # authorization is enough (and never remembered: see _admitted)
                return None""",
    """            if call.kind in NO_ACTION:  # authorization is enough (and never remembered: see _admitted)
                self._admitted = (principal, item, self.policy)
                return None""",
    LEVELS,
)
m(
    "verified call remembered as admitted",
    L,
    """            return self._verify(request, call, principal, level, f"{call.kind} {call.name!r}")""",
    """            self._admitted = (principal, item, self.policy)
            return self._verify(request, call, principal, level, f"{call.kind} {call.name!r}")""",
    LEVELS,
)
m(
    "admitted: principal not in key",
    L,
    "if admitted[1] is item and admitted[0] is principal and admitted[2] is self.policy and item is not None:",
    "if admitted[1] is item and admitted[2] is self.policy and item is not None:",
    LEVELS,
)
m(
    "admitted: policy not in key",
    L,
    "if admitted[1] is item and admitted[0] is principal and admitted[2] is self.policy and item is not None:",
    "if admitted[1] is item and admitted[0] is principal and item is not None:",
    LEVELS,
)
m(
    "admitted: item not in key",
    L,
    "if admitted[1] is item and admitted[0] is principal and admitted[2] is self.policy and item is not None:",
    "if admitted[0] is principal and admitted[2] is self.policy and item is not None:",
    LEVELS,
)
m(
    "scopes_of: policy not in key",
    L,
    "if last[0] is principal and last[1] is self.policy:",
    "if last[0] is principal:",
    LEVELS,
)
m(
    "roles: one role grants every role's scopes",
    S + "policy.py",
    "            scopes.update(self.roles.get(role, ()))",
    "            scopes.update(*self.roles.values())",
    [*LEVELS, T + "test_policy.py"],
)
m(
    "level_of ignores the default",
    L,
    'return int(self.policy.levels["default"] if level is None else level)',
    "return int(level or 0)",
    LEVELS,
)
m(
    "can_use: level 1 open",
    L,
    "        if level == 0:\n            return True",
    "        if level <= 1:\n            return True",
    LEVELS,
)
m(
    "can_use: anonymous",
    L,
    """        if principal is None:
            return False
        scopes""",
    """        if principal is None:
            return not getattr(item, "scopes", ())
        scopes""",
    LEVELS,
)
m(
    "can_use: any scope",
    L,
    "return not scopes or set(scopes) <= self.scopes_of(principal)",
    "return not scopes or bool(set(scopes) & self.scopes_of(principal))",
    LEVELS,
)
m(
    "hides nothing",
    L,
    'return bool(self.policy.levels["hide_unusable"]) and not self.can_use(principal, item)',
    "return False",
    LEVELS,
)
m(
    "view key: scopes left out",
    L,
    "return (True, self.scopes_of(principal) & known[3])",
    "return (True, frozenset())",
    LEVELS,
)
m(
    "view key: anonymous as authenticated",
    L,
    """        if principal is None:
            return (False, frozenset())""",
    """        if principal is None:
            return (True, frozenset())""",
    LEVELS,
)
m(
    "view key: level 1 not guarded",
    L,
    "guarded = any((default if level is None else level) > 0 for level in levels)",
    "guarded = any((default if level is None else level) > 1 for level in levels)",
    LEVELS,
)
m(
    "view key: catalog change not seen",
    L,
    "if known is None or known[0] != generation or known[1] is not self.policy:",
    "if known is None or known[1] is not self.policy:",
    LEVELS,
)
m(
    "view key: policy change not seen",
    L,
    "if known is None or known[0] != generation or known[1] is not self.policy:",
    "if known is None or known[0] != generation:",
    LEVELS,
)
m(
    "announcements: scopes not in memo key",
    L,
    "key = (principal is not None, self.scopes_of(principal))",
    "key = principal is not None",
    [*LEVELS, "tests/server/test_session.py"],
)
m(
    "recent auth: future counts",
    L,
    "-CLOCK_SKEW <= self.clock() - auth_time <= window",
    "self.clock() - auth_time <= window",
    LEVELS,
)
m(
    "recent auth: window plus a skew",
    L,
    "-CLOCK_SKEW <= self.clock() - auth_time <= window",
    "-CLOCK_SKEW <= self.clock() - auth_time <= window + CLOCK_SKEW",
    LEVELS,
)
m("recent auth: ten minutes of skew", L, "CLOCK_SKEW = 60.0", "CLOCK_SKEW = 600.0", LEVELS)
m(
    "confirm off still asks",
    L,
    'if not self.policy.levels["confirm"] or self.ask is None:',
    "if self.ask is None:",
    LEVELS,
)
m(
    "binding: principal dropped",
    L,
    'binding = (str(getattr(principal, "id", principal)), f"{call.name}@{version}"',
    'binding = ("", f"{call.name}@{version}"',
    LEVELS,
)
m(
    "binding: subject for identity",
    L,
    'binding = (str(getattr(principal, "id", principal)), f"{call.name}@{version}"',
    'binding = (str(getattr(principal, "subject", principal)), f"{call.name}@{version}"',
    LEVELS,
)
m(
    "binding: tool dropped",
    L,
    'binding = (str(getattr(principal, "id", principal)), f"{call.name}@{version}"',
    'binding = (str(getattr(principal, "id", principal)), ""',
    LEVELS,
)
m(
    "binding: version dropped",
    L,
    'binding = (str(getattr(principal, "id", principal)), f"{call.name}@{version}"',
    'binding = (str(getattr(principal, "id", principal)), f"{call.name}@"',
    ROUNDS,
)
m(
    "binding: arguments dropped",
    L,
    "arguments_digest(call.arguments))\n        rounds",
    '"")\n        rounds',
    LEVELS,
)
m(
    "code not redeemed",
    L,
    "confirmed = self.confirmations.redeem(given, binding) if given is not None else False",
    "confirmed = given is not None",
    LEVELS,
)
m(
    "answered code not spent",
    L,
    """            self.confirmations.spend(code)
        else:
            await rounds.spend()""",
    """            pass
        else:
            await rounds.spend()""",
    LEVELS,
)
m(
    "failed question's code not spent",
    L,
    """        except ClientRequestError as exc:
            if rounds is None:
                self.confirmations.spend(code)""",
    """        except ClientRequestError as exc:
            if rounds is None:
                pass""",
    LEVELS,
)
m(
    "cancelled question's code not spent",
    L,
    """        except BaseException:  # cancelled, or the time-out ran out: the code dies with the question
            if rounds is None:
                self.confirmations.spend(code)""",
    """        except BaseException:  # cancelled, or the time-out ran out: the code dies with the question
            if rounds is None:
                pass""",
    LEVELS,
)
m(
    "codes outlive their time",
    L,
    "return entry is not None and entry[0] == binding and entry[1] > self.clock()",
    "return entry is not None and entry[0] == binding",
    LEVELS,
)
m(
    "2026 state not spent",
    L,
    "rounds.spend()  # single use",
    "pass  # single use",
    ROUNDS,
)

# --- principal.py: identities -------------------------------------------------------------------------------------
m(
    "identity without method",
    S + "principal.py",
    'self.id = f"{method}:{subject}" if issuer is None else f"{method}:{issuer}#{subject}"',
    'self.id = subject if issuer is None else f"{method}:{issuer}#{subject}"',
    LEVELS,
)
m(
    "identity without issuer",
    S + "principal.py",
    'self.id = f"{method}:{subject}" if issuer is None else f"{method}:{issuer}#{subject}"',
    'self.id = f"{method}:{subject}"',
    LEVELS,
)

# --- jwt.py, jwks.py: token verification -------------------------------------------------------------------------
J = S + "jwt.py"
m(
    "jwt: any known algorithm",
    J,
    "if not isinstance(alg, str) or alg not in self.algorithms:",
    "if not isinstance(alg, str) or alg not in ALGORITHMS:",
    JWT,
)
m("jwt: the key's alg ignored", J, "if key.alg is not None and key.alg != alg:", "if False:", JWT)
m(
    "jwt: issuer unchecked",
    J,
    "audience=self.audience, issuer=self.issuer",
    "audience=self.audience, issuer=None",
    JWT,
)
m(
    "jwt: audience unchecked",
    J,
    '_OPTIONS: Any = {"verify_exp": False,',
    '_OPTIONS: Any = {"verify_aud": False, "verify_exp": False,',
    JWT,
)
m("jwt: empty sub", J, 'if not claims["sub"]:', 'if claims["sub"] is None:', JWT)
m("jwt: exp at the boundary", J, "if now >= exp + leeway:", "if now > exp + leeway:", JWT)
m("jwt: exp twice the leeway", J, "if now >= exp + leeway:", "if now >= exp + 2 * leeway:", JWT)
m(
    "jwt: nbf twice the leeway",
    J,
    "if nbf is not None and nbf > now + leeway:",
    "if nbf is not None and nbf > now + 2 * leeway:",
    JWT,
)
m(
    "jwt: iat twice the leeway",
    J,
    "if iat is not None and iat > now + leeway:",
    "if iat is not None and iat > now + 2 * leeway:",
    JWT,
)
m(
    "jwt: future auth_time",
    J,
    "if auth_time is not None and auth_time > now + leeway:",
    "if auth_time is not None and auth_time > now + 2 * leeway:",
    JWT,
)
m(
    "jwt cache: past expiry",
    J,
    "if now < until and cached_kid in keys.keys and now - keys.fetched_at < keys.cache_ttl:",
    "if cached_kid in keys.keys and now - keys.fetched_at < keys.cache_ttl:",
    JWT,
)
m(
    "jwt cache: kid withdrawn",
    J,
    "if now < until and cached_kid in keys.keys and now - keys.fetched_at < keys.cache_ttl:",
    "if now < until and now - keys.fetched_at < keys.cache_ttl:",
    JWT,
)
m(
    "jwt cache: key set age",
    J,
    "if now < until and cached_kid in keys.keys and now - keys.fetched_at < keys.cache_ttl:",
    "if now < until and cached_kid in keys.keys:",
    JWT,
)
m(
    "jwt cache: remembered past the leeway",
    J,
    'self.remember(digest, principal, float(claims["exp"]) + self.leeway, kid)',
    'self.remember(digest, principal, float(claims["exp"]) + 2 * self.leeway, kid)',
    JWT,
)
m("jwt principal: no issuer", J, 'method="jwt", issuer=self.issuer,', 'method="jwt", issuer=None,', JWT)
m(
    "jwks: stale set kept twice as long",
    S + "jwks.py",
    "elif self.clock() - self.fetched_at >= self.cache_ttl:",
    "elif self.clock() - self.fetched_at >= 2 * self.cache_ttl:",
    JWT,
)

# --- bearer.py, tokens.py: credentials ----------------------------------------------------------------------------
B = S + "bearer.py"
m(
    "bearer: query token after &",
    B,
    'if query.startswith(b"access_token=") or b"&access_token=" in query:',
    'if query.startswith(b"access_token="):',
    BEARER,
)
m(
    "bearer: two Authorization headers",
    B,
    'if len(headers) < len(raw_headers) and sum(1 for name, _ in raw_headers if name == b"authorization") > 1:',
    "if False:",
    BEARER,
)
m(
    "bearer: one character too long",
    B,
    "7 < len(raw) <= MAX_TOKEN_LENGTH + 7",
    "7 < len(raw) <= MAX_TOKEN_LENGTH + 8",
    BEARER,
)
m(
    "bearer: required ignored",
    B,
    """        if token is None:
            if self.required:""",
    """        if token is None:
            if False:""",
    BEARER,
)
K = S + "tokens.py"
m(
    "tokens: not constant time",
    K,
    "if hmac.compare_digest(digest, entry.digest):",
    "if digest == entry.digest:",
    TOKENS,
)
m("tokens: stops at the match", K, "                found = entry\n", "                return entry\n", TOKENS)
m("tokens: duplicate hash", K, "            if entry.digest in seen:", "            if False:", TOKENS)

# --- request_state.py and rounds.py: the sealed 2026-07-28 state --------------------------------------------------
R = S + "request_state.py"
m(
    "state: tag prefix only",
    R,
    "if not hmac.compare_digest(given, self._tag(body)):",
    "if not hmac.compare_digest(given[:8], self._tag(body)[:8]):",
    STATES,
)
m("state: expiry plus a minute", R, 'if not now < payload["e"]:', 'if not now < payload["e"] + 60:', STATES)
m("state: principal unchecked", R, 'if payload["p"] != principal_id:', "if False:", STATES)
m("state: request unchecked", R, 'if payload["r"] != request:', "if False:", STATES)
m(
    "state: single use skipped",
    R,
    """        if not await self.spent.spend(f"request-state:{payload['n']}", payload["e"]):""",
    """        if False:""",
    STATES,
)
m(
    "state: spent forgotten a minute early",
    S + "spent.py",
    "while spent and next(iter(spent.values())) <= now:",
    "while spent and next(iter(spent.values())) <= now + 60:",
    [T + "test_spent.py", *STATES],
)
m(
    "state: digest without arguments",
    R,
    "orjson.dumps([method, name, arguments], option",
    "orjson.dumps([method, name], option",
    STATES,
)
m(
    "rounds: state sealed for nobody",
    V + "rounds.py",
    "        self.principal = rctx.principal\n",
    "        self.principal = None\n",
    [*STATES, "tests/transports/http/test_rounds.py"],
)
m(
    "rounds: digest without arguments",
    V + "rounds.py",
    'self._digest = request_digest(method, str(params.get("name")), params.get("arguments") or {})',
    'self._digest = request_digest(method, str(params.get("name")), {})',
    STATES,
)
m(
    "rounds: an answer counts for another question",
    V + "rounds.py",
    "if answer is not None and answer[0] == digest:",
    "if answer is not None:",
    ROUNDS,
)
m(
    "rounds: spend does not mark",
    V + "rounds.py",
    "            await self.server.request_states().spend(self.raw, principal_id(self.principal), self.digest)",
    "            self.server.request_states().open(self.raw, principal_id(self.principal), self.digest)",
    ROUNDS,
)

# --- limits.py: buckets -------------------------------------------------------------------------------------------
LI = S + "limits.py"
m(
    "bucket: refill twice as fast",
    LI,
    "tokens = bucket[0] + (now - bucket[1]) * rate",
    "tokens = bucket[0] + (now - bucket[1]) * rate * 2",
    LIMITS,
)
m(
    "bucket: burst not capped",
    LI,
    """            if tokens > burst:
                tokens = burst""",
    """            if False:
                tokens = burst""",
    LIMITS,
)
m(
    "bucket: burst not capped (long way)",
    LI,
    "bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * rate)",
    "bucket[0] = bucket[0] + (now - bucket[1]) * rate",
    LIMITS,
)
m("bucket: part of a token is enough", LI, "        if bucket[0] >= cost:", "        if bucket[0] > cost - 1:", LIMITS)
m(
    "bucket: peek says yes early",
    LI,
    "return 0.0 if tokens >= cost else (cost - tokens) / rate",
    "return 0.0 if tokens > cost - 1 else (cost - tokens) / rate",
    LIMITS,
)
m(
    "bucket: only the first checked",
    LI,
    "waits = [self._wait(key, rate, burst, cost, now) for key, rate, burst, cost in buckets]",
    "waits = [self._wait(key, rate, burst, cost, now) for key, rate, burst, cost in buckets[:1]]",
    LIMITS,
)
m(
    "limiter: peek only the first",
    LI,
    "waits = [limiter.peek(key, limit.rate, limit.burst) for key, _, limit in buckets]",
    "waits = [limiter.peek(key, limit.rate, limit.burst) for key, _, limit in buckets[:1]]",
    LIMITS,
)
m("bucket: the longest wait ignored", LI, "        if waits[longest]:", "        if waits[0]:", LIMITS)
m(
    "limiter: acquire's refusal ignored",
    LI,
    """            wait = limiter.acquire(key, limit.rate, limit.burst)
            if wait:""",
    """            wait = limiter.acquire(key, limit.rate, limit.burst)
            if False:""",
    LIMITS,
)
m(
    "limiter: async refusal ignored",
    LI,
    """            wait = await limiter.acquire_async(key, limit.rate, limit.burst)
            if wait:""",
    """            wait = await limiter.acquire_async(key, limit.rate, limit.burst)
            if False:""",
    LIMITS,
)
m(
    "limit: burst one more",
    LI,
    "self.burst = max(1, math.ceil(default)) if burst is None",
    "self.burst = max(1, math.ceil(default) + 1) if burst is None",
    LIMITS,
)
m(
    "caller key: subject only",
    LI,
    'known = f"principal:{principal_id(principal)}"',
    "known = f\"principal:{getattr(principal, 'subject', principal)}\"",
    LIMITS,
)
m(
    "caller key: per principal object",
    LI,
    'known = f"principal:{principal_id(principal)}"',
    'known = f"principal:{principal_id(principal)}:{id(principal)}"',
    LIMITS,
)

# --- apply.py: the policy's steps ---------------------------------------------------------------------------------
A = S + "apply.py"
m(
    "anonymous keyed by session",
    A,
    """    if address is not None:
        return f"address:{address}"
    key = getattr(peer, "key", None)""",
    """    key = getattr(peer, "key", None)""",
    APPLY,
)
m(
    "inputs: flat ignores max_string",
    A,
    'self.flat_is_fine = self.options["max_string"] >= 4_194_304 and',
    "self.flat_is_fine = True and",
    APPLY,
)
m(
    "inputs: flat ignores max_bytes",
    A,
    'and self.options.get("max_bytes", 4_194_304) >= (',
    "and 4_194_304 >= (",
    APPLY,
)
m(
    "inputs: lists count as flat",
    A,
    "if type(value) is dict or type(value) is list:",
    "if type(value) is dict:",
    APPLY,
)
m(
    "inputs: tools only",
    A,
    """        arguments = call.arguments
        if self.flat_is_fine""",
    """        arguments = call.arguments
        if call.kind != "tool":
            return
        if self.flat_is_fine""",
    APPLY,
)
m("audit gate: open while down", A, "        if sink.problem is not None:  #", "        if False:  #", AUDIT)
m(
    "audit gate: retry result ignored",
    A,
    """            problem = sink.admit()
            if problem is not None:""",
    """            problem = sink.admit()
            if False:""",
    AUDIT,
)
m(
    "audit trail: a failed write answered as written",
    S + "audit_sinks.py",
    """        if problem is None:
            return None
        if loop is None:""",
    """        if True:
            return None
        if loop is None:""",
    [T + "test_audit_sinks.py", T + "test_audit_trail.py"],
)
m("policy: required dropped", A, 'required = bool(auth.get("required", False))', "required = False", APPLY)
m(
    "policy: algorithms dropped",
    A,
    'for key in ("algorithms", "roles_claim", "leeway") if key in jwt}',
    'for key in ("roles_claim", "leeway") if key in jwt}',
    [*APPLY, T + "test_policy.py"],
)

# --- tasks: owners ------------------------------------------------------------------------------------------------
N = V + "task_manager.py"
m(
    "task lookup: owner unchecked",
    N,
    "return record if record is not None and record.owner == owner else None",
    "return record",
    TASKS,
)
m(
    "task lookup: anonymous sees all",
    N,
    "return record if record is not None and record.owner == owner else None",
    "return record if record is not None and (owner is None or record.owner == owner) else None",
    TASKS,
)
m("task created unbound", N, "            owner=owner,\n", "            owner=None,\n", TASKS)
m(
    "task opened without admission",
    N,
    "        if admit and self.pipeline.admits:",
    "        if False:",
    TASKS,
)
m(
    "task cancel: no owner",
    N,
    """        record = await self._find(rctx, params)
        if record.is_terminal:""",
    """        record = await self.store.get(params.get("taskId"), self.clock()) or await self._find(rctx, params)
        if record.is_terminal:""",
    TASKS,
)
m(
    "task result: no owner",
    N,
    """        record = await self._find(rctx, params)
        while not record.is_terminal:""",
    """        record = await self.store.get(params.get("taskId"), self.clock()) or await self._find(rctx, params)
        while not record.is_terminal:""",
    TASKS,
)
m(
    "task list: anyone's",
    N,
    "records = await self.store.list(rctx.owner(), now,",
    "records = await self.store.list(None, now,",
    TASKS,
)
m(
    "task extension: one owner for all",
    V + "task_extension.py",
    'return EXTENSION if owner is None else f"{EXTENSION}|{owner}"',
    "return EXTENSION",
    TASKS,
)
m(
    "memory store: cursor of another owner",
    "src/tooldeck/tasks/memory.py",
    "if cursor is None or cursor.owner != owner or cursor.is_expired(now):",
    "if cursor is None or cursor.is_expired(now):",
    STORES,
)
Q = "src/tooldeck/tasks/sqlite.py"
m(
    "sqlite store: list of every owner",
    Q,
    '_LIST = f"SELECT {_SELECT} FROM tasks WHERE owner IS :owner AND {_LIVE}',
    '_LIST = f"SELECT {_SELECT} FROM tasks WHERE {_LIVE}',
    STORES,
)
m(
    "sqlite store: page after of every owner",
    Q,
    'f"SELECT {_SELECT} FROM tasks WHERE owner IS :owner AND {_LIVE} AND (created_at, task_id) >',
    'f"SELECT {_SELECT} FROM tasks WHERE {_LIVE} AND (created_at, task_id) >',
    STORES,
)
m(
    "sqlite store: cursor of another owner",
    Q,
    "SELECT created_at FROM tasks WHERE task_id = :id AND owner IS :owner AND",
    "SELECT created_at FROM tasks WHERE task_id = :id AND",
    STORES,
)

# --- HTTP sessions: bound to the principal that opened them -------------------------------------------------------
H = "src/tooldeck/transports/http/sessions.py"
m(
    "session: bound by subject",
    H,
    "return principal is opener or principal_id(principal) == principal_id(opener)",
    "return principal is opener or str(principal) == str(opener)",
    SESSIONS,
)
m(
    "session: anyone's",
    H,
    "return principal is opener or principal_id(principal) == principal_id(opener)",
    "return True",
    SESSIONS,
)
m(
    "session fast path: not bound",
    H,
    """        if principal is not opener and not _bound_to(http_session, principal):  # (the same object: bound)
            return None  # lookup says why not""",
    """        if False:  # (the same object: bound)
            return None  # lookup says why not""",
    SESSIONS,
)
m(
    "session lookup: not bound",
    H,
    """        if not _bound_to(http_session, principal):
            refusal = HttpError(403""",
    """        if False:
            refusal = HttpError(403""",
    SESSIONS,
)
m(
    "session fast path: old token's scopes kept",
    H,
    """        if principal is not None:  # the same subject, perhaps with a fresher token: its scopes count from now on
            http_session.session.state.principal = principal""",
    """        if False:  # the same subject, perhaps with a fresher token: its scopes count from now on
            http_session.session.state.principal = principal""",
    SESSIONS,
)

# --- channels: completion, subscription, updates ------------------------------------------------------------------
C = V + "methods/completion.py"
m(
    "completion: hidden prompt known",
    C,
    """        if item is None or server.access.hides(rctx.principal, item):
            raise InvalidParamsError(f"Unknown prompt: {name}")""",
    """        if item is None:
            raise InvalidParamsError(f"Unknown prompt: {name}")""",
    CHANNELS,
)
m(
    "completion: hidden template known",
    C,
    """        if item is None or server.access.hides(rctx.principal, item):
            raise InvalidParamsError(f"Unknown resource template: {uri}")""",
    """        if item is None:
            raise InvalidParamsError(f"Unknown resource template: {uri}")""",
    CHANNELS,
)
m(
    "completion: not admitted",
    C,
    """    if pipeline.admits:
        await pipeline.admit_or_refuse(rctx, call)
    await standing_heard""",
    """    await standing_heard""",
    CHANNELS,
)
P = V + "methods/resources.py"
m(
    "subscribe: hidden resource known",
    P,
    """    if item is None or server.access.hides(rctx.principal, item):
        raise ResourceNotFoundError""",
    """    if item is None:
        raise ResourceNotFoundError""",
    CHANNELS,
)
m(
    "subscribe: not admitted",
    P,
    """    if pipeline.admits:
        await pipeline.admit_or_refuse(rctx, call)
    rctx.state.subscriptions.add""",
    """    rctx.state.subscriptions.add""",
    CHANNELS,
)
m(
    "read: static resource not admitted",
    P,
    """        if pipeline.admits:
            await pipeline.admit_or_refuse(rctx, call)
        value = source.value""",
    """        value = source.value""",
    LEVELS,
)
m(
    "new policy keeps the views",
    V + "core.py",
    "            catalog.forget_views()  #",
    "            pass  #",
    LEVELS,
)
m(
    "listen stream outlives its token",
    V + "subscriptions.py",
    "        if expires_at is not None:  # the stream lives no longer",
    "        if False:  # the stream lives no longer",
    [*CHANNELS, "tests/transports/http/test_listen.py"],
)
m(
    "updates: sent without read access",
    V + "session.py",
    "if self.server.may_read(self.state.principal, uri, subscribed):",
    "if True:",
    CHANNELS,
)
m(
    "updates: checked against the subscription",
    V + "core.py",
    """        item = self.readable_item(uri)
        if item is None and under is not None:""",
    """        item = self.readable_item(under or uri)
        if item is None and under is not None:""",
    CHANNELS,
)


# --- the fleet: who a caller is behind a balancer, spends across processes, what a task call leaves in the trail --
FORWARDED = ["tests/transports/http/test_forwarded.py"]
H = "src/tooldeck/transports/http/"
m(
    "forwarded: believed from any peer",
    H + "forwarded.py",
    "if not self.networks or peer is None or not self.trusts(peer):",
    "if not self.networks or peer is None:",
    FORWARDED,
)
m(
    "forwarded: the client's own words believed",
    H + "forwarded.py",
    'for hop in reversed(raw.decode("latin-1").split(",")):',
    'for hop in raw.decode("latin-1").split(","):',
    FORWARDED,
)
m(
    "forwarded: a malformed hop skipped",
    H + "forwarded.py",
    "                return found  # a proxy wrote something that is no address: believe no further",
    "                continue",
    FORWARDED,
)
m(
    "redis spend: any answer spends",
    "src/tooldeck/engine/spent.py",
    "        return done is not None",
    "        return True",
    ["tests/engine/test_spent.py", T + "test_spent.py"],
)
m(
    "redis limit: a take whose line is lost admits the call",
    "src/tooldeck/engine/bucket.py",
    "            raise self.engine.unavailable(exc) from exc\n        return [float(wait) for wait in waits]",
    "            return [0.0 for _ in buckets]\n        return [float(wait) for wait in waits]",
    [T + "test_limits_redis.py"],
)
m(
    "redis limit: a take the server could not run admits the call",
    "src/tooldeck/engine/bucket.py",
    "            return await self.take(buckets)\n        except UNREACHABLE",
    "            return [0.0 for _ in buckets]\n        except UNREACHABLE",
    [T + "test_limits_redis.py"],
)
m(
    "audit: a busy turn's batch that could not be written answered as written",
    S + "audit_sinks.py",
    '        batch.settle(problem)\n        if problem is None and self.fsync == "interval":',
    '        batch.settle(None)\n        if problem is None and self.fsync == "interval":',
    [*AUDIT, T + "test_audit_sinks.py"],
)
m(
    "task call: created without a record",
    V + "task_manager.py",
    "        if not pipeline.auditors:\n            return None",
    "        if True:\n            return None",
    [T + "test_audit_trail.py"],
)

m(
    "session ended elsewhere: the tool runs before the store's word",
    V + "pipeline.py",
    "        if pending is not None and not pending.done():  # whether the session still stands: heard before the run",
    "        if False:",
    ["tests/transports/http/test_fleet_sessions.py"],
)
m(
    "session ended elsewhere: the store's word ignored",
    H + "sessions.py",
    "        elif found == 0:  # ended by some process: the work of the request stops before it runs user code",
    "        elif False:",
    ["tests/transports/http/test_fleet_sessions.py"],
)

A = "src/tooldeck/transports/http/approve.py"
APPROVALS = [T + "test_approvals.py"]
m(
    "approval page: any credentials approve",
    A,
    '        return principal is not None and hmac.compare_digest(str(getattr(principal, "id", "")), principal_id)',
    "        return principal is not None",
    APPROVALS,
)
m(
    "approval page: the form's token unchecked",
    A,
    '        if not hmac.compare_digest(form.get("form", ""), approval.form_token) or decision not in ("approve", "deny"):',
    '        if decision not in ("approve", "deny"):',
    APPROVALS,
)
m(
    "approval page: wrong credentials never deny",
    A,
    "            if tries >= TRIES:",
    "            if False:",
    APPROVALS,
)
m(
    "approval: the call runs when denied",
    "src/tooldeck/security/levels.py",
    '        if not approved:\n            raise ToolError(f"{label} was not run: the approver denied it")',
    '        if False:\n            raise ToolError(f"{label} was not run: the approver denied it")',
    APPROVALS,
)

FOUR_EYES = [T + "test_four_eyes.py"]
m(
    "four eyes: a listed level runs unapproved",
    L,
    '        if call.kind == "tool" and (level in gates[1] or call.name in gates[2]):',
    '        if call.kind == "tool" and call.name in gates[2]:',
    FOUR_EYES,
)
m(
    "four eyes: a listed tool of level 0 runs unapproved",
    L,
    "        if level == 0 and call.name not in gates[2]:",
    "        if level == 0:",
    FOUR_EYES,
)
m(
    "four eyes: the caller approves their own call",
    L,
    "        if who == approval.binding[0]:",
    "        if False:",
    FOUR_EYES,
)
m(
    "four eyes: no approver scope needed",
    L,
    "        if approver is None or scope not in self.scopes_of(approver):",
    "        if approver is None:",
    FOUR_EYES,
)
m(
    "four eyes: a denied call runs",
    L,
    '        if not decision.approved:\n            raise ToolError(f"{label} was not run: {decision.by} denied it{reason}")',
    '        if False:\n            raise ToolError(f"{label} was not run: {decision.by} denied it{reason}")',
    FOUR_EYES,
)

P = S + "approvals.py"
SHARED_APPROVALS = [T + "test_approvals_store.py", T + "test_approvals_fleet.py"]
m(
    "approvals: the memory store's take leaves the approval",
    P,
    "        found = self._open.pop(approval_id, None)\n        self._misses.pop(approval_id, None)\n        if found",
    "        found = self._open.get(approval_id)\n        self._misses.pop(approval_id, None)\n        if found",
    SHARED_APPROVALS,
)
m(
    "approvals: the Redis store's take leaves the approval",
    S + "approvals_redis.py",
    "redis.call('DEL', KEYS[1], KEYS[3])",
    "redis.call('DEL', KEYS[3])",
    SHARED_APPROVALS,
)
m(
    "approvals: a second decision not refused",
    P,
    "        if await self.store.take(approval.id) is None:\n            return TAKEN",
    "        if False:\n            return TAKEN",
    SHARED_APPROVALS,
)
m(
    "approvals: a decision bound to another call settles it",
    P,
    "        if found is None or found[1].done() or found[0] != binding:",
    "        if found is None or found[1].done():",
    SHARED_APPROVALS,
)
m(
    "approvals: an approver's call decided on the caller's own page",
    P,
    "        return found if found is not None and found.kind == kind else None",
    "        return found",
    SHARED_APPROVALS,
)
m(
    "approvals: the waiting process trusts the binding it is sent",
    V + "approval_relay.py",
    '    return approvals.settle(args["id"], (binding[0], binding[1], binding[2]), decision)',
    '    found = approvals._waits.get(args["id"])\n'
    '    return approvals.settle(args["id"], found[0] if found else ("", "", ""), decision)',
    SHARED_APPROVALS,
)

C = "src/tooldeck/console/app.py"
CONSOLE = ["tests/console/test_console.py"]
m(
    "console: no CSRF token needed",
    C,
    '        if seat.csrf and not hmac.compare_digest(form.get("csrf", ""), seat.csrf):',
    "        if False:",
    CONSOLE,
)
m(
    "console: no operator scope needed to sign in",
    C,
    '        if not self.is_operator(principal):\n            await self.audit(principal, "sign-in"',
    '        if False:\n            await self.audit(principal, "sign-in"',
    CONSOLE,
)
m(
    "console: a bearer token without the operator scope let in",
    C,
    "            if not self.is_operator(principal):\n                return None, (403,",
    "            if False:\n                return None, (403,",
    CONSOLE,
)
m(
    "console: open to anyone with no authentication",
    C,
    "            if not _loopback(scope):",
    "            if False:",
    CONSOLE,
)
m(
    "console: the session cookie readable by scripts",
    C,
    'value = f"{COOKIE}={seat.id}; Path={self.path}; HttpOnly; SameSite=Strict;',
    'value = f"{COOKIE}={seat.id}; Path={self.path}; SameSite=Strict;',
    CONSOLE,
)
m(
    "console: a sign-out on one process of a fleet leaves the seat signed in on the others",
    "src/tooldeck/console/seats.py",
    """    async def end(self, seat_id: str) -> None:
        await self.values.delete(seat_id)""",
    """    async def end(self, seat_id: str) -> None:
        pass""",
    CONSOLE,
)
m(
    "console: a shared seat outlives its lifetime",
    "src/tooldeck/console/seats.py",
    "        if seat.expired(seat.seen):  # past its lifetime, however busy",
    "        if False:  # past its lifetime, however busy",
    CONSOLE,
)

m(
    "four eyes: a task runs without its approver",
    "src/tooldeck/server/task_manager.py",
    "        self.launch(rctx, record.task_id, tool, arguments, admitted=not awaits_approver(record))",
    "        self.launch(rctx, record.task_id, tool, arguments)",
    FOUR_EYES,
)
m(
    "four eyes: a 2026-07-28 task runs without its approver",
    "src/tooldeck/server/task_extension.py",
    "    manager.launch(rctx, record.task_id, tool, arguments, admitted=not awaits_approver(record))",
    "    manager.launch(rctx, record.task_id, tool, arguments)",
    FOUR_EYES,
)
m(
    "approvals: a 2026-07-28 call's declined approval left open on its page",
    S + "levels.py",
    """        if answer.action != "accept":
            await approvals.close(approval_id)""",
    """        if answer.action != "accept":
            pass""",
    [T + "test_approvals.py"],
)
m(
    "four eyes: a task taken over while waiting runs unapproved",
    "src/tooldeck/server/takeover.py",
    "                rerun(manager, record, tool, waited=awaits_approver(seen))",
    "                rerun(manager, record, tool)",
    ["tests/server/test_tasks_fleet.py"],
)

m(
    "approval (2026): a retry's state replayed",
    "src/tooldeck/security/levels.py",
    "        await rounds.spend()  # each retry's state once: a replayed retry is refused (-32602) before anything runs",
    "        pass",
    APPROVALS,
)
m(
    "approval (2026): a denied call runs",
    "src/tooldeck/security/levels.py",
    '        if not decision.approved:\n            raise ToolError(f"{label} was not run: the approver denied it")\n'
    '        call.approval = "approved by its caller on the approval page"\n\n    def _unverifiable',
    '        if False:\n            raise ToolError(f"{label} was not run: the approver denied it")\n'
    '        call.approval = "approved by its caller on the approval page"\n\n    def _unverifiable',
    APPROVALS,
)


if __name__ == "__main__":
    sys.exit(main(MUTATIONS, sys.argv[1:], "security-mutants-"))
