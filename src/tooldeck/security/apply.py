"""A policy put to work on a server: its authentication for HTTP, its levels, limits, sanitiser and audit trail as
steps of the call pipeline. ``apply_policy(server, policy)`` may be called again: what it installed is replaced.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
from typing import Any

from ..protocol.errors import RefusedError, ToolError
from ..tools.result import CANCELLED, INPUT_REQUIRED, TASK_CREATED
from .policy import Policy


class Installed:
    """What ``apply_policy`` added to a server, so that applying another policy can take it out again."""

    def __init__(self) -> None:
        self.authorizers: list[Any] = []
        self.limiters: list[Any] = []
        self.sanitisers: list[Any] = []
        self.auditors: list[Any] = []
        self.sink: Any = None
        self.service: Any = None  # closes the sink when the server stops


def apply_policy(server: Any, policy: Policy) -> None:
    """Serve ``server`` under ``policy``: levels and roles, the stdio principal, HTTP authentication (and RFC 9728
    metadata), rate limits, input limits, the sanitiser and the audit trail."""
    try:  # first: a policy refused here leaves the server as it was
        http_auth, http_routes, resource_metadata = authentication(policy, scopes_in_use(server))
    except ValueError as exc:  # a setting the policy's schema cannot see is wrong (a resource that is not a URI)
        from .policy import PolicyError

        raise PolicyError(f"{policy.source or 'policy'}: [authentication]: {exc}") from None
    installed: Installed | None = getattr(server, "_security", None)
    pipeline = server.pipeline
    if installed is not None:
        for attribute in ("authorizers", "limiters", "sanitisers", "auditors"):
            steps = getattr(pipeline, attribute)
            for step in getattr(installed, attribute):
                if step in steps:
                    steps.remove(step)
        if installed.sink is not None:
            _close(installed.sink)
        if installed.service in server.services:
            server.services.remove(installed.service)
    installed = Installed()
    server.use_policy(policy)
    server.http_auth, server.http_routes, server.resource_metadata = http_auth, http_routes, resource_metadata
    server.access.resource_metadata = server.resource_metadata

    sanitise = policy.sanitise
    enabled = sanitise.get("enabled", True)
    if enabled:
        installed.limiters.append(InputStep(sanitise))
        installed.sanitisers.append(Sanitiser(server, sanitise))
    pipeline.message_sanitiser = MessageSanitiser() if enabled else None
    for catalog in (server.tools, server.resources, server.templates, server.prompts):
        base = getattr(catalog.wire, "base", catalog.wire)
        catalog.rewire(CleanListing(base) if enabled else base)
    server.http_request_limit = None
    server.http_refusal_auditor = None
    if any(key in policy.limits for key in ("per_principal", "per_tool", "per_principal_tool", "global")):
        installed.limiters.append(rate_limits(policy.limits, server.backends.limiter).step)
    if "http_requests" in policy.limits:
        from .limits import MemoryRateLimiter, RequestRateGuard

        server.http_request_limit = RequestRateGuard(
            MemoryRateLimiter(), policy.limits["http_requests"], policy.limits.get("burst")
        )
    if policy.audit.get("file"):
        try:
            installed.sink = audit_sink(policy.audit, server.node_id if server.backends.shared else None)
        except OSError as exc:  # a directory that does not exist, a file that may not be written
            from .policy import PolicyError

            raise PolicyError(f"{policy.source or 'policy'}: audit.file: {policy.audit['file']}: cannot be opened "
                              f"({exc.strerror or exc})") from None  # fmt: skip
        installed.authorizers.append(AuditGate(installed.sink))
        installed.auditors.append(CallAuditor(installed.sink, policy.audit.get("redact", ()), server.access))
        server.http_refusal_auditor = HttpRefusalAuditor(installed.sink)
        installed.service = _closer(installed.sink)
        server.services.append(installed.service)
    pipeline.authorizers[:0] = installed.authorizers  # first: nothing is asked or counted for a call refused anyway
    pipeline.limiters[:0] = installed.limiters  # before the deck's own limit steps
    pipeline.sanitisers.extend(installed.sanitisers)
    pipeline.auditors.extend(installed.auditors)
    server._security = installed


def authentication(policy: Policy, in_use: Any = None) -> tuple[Any, dict[str, Any], str | None]:
    """The HTTP authentication backend of a policy (None: everyone anonymous), the routes it adds, and the URL of
    the protected resource metadata (for WWW-Authenticate). The metadata's ``scopes_supported`` are the scopes the
    policy's roles grant and those ``in_use()`` gives (what the served tools, resources and prompts need), as they
    are at each request."""
    auth = policy.authentication
    required = bool(auth.get("required", False))
    jwt = auth.get("jwt")
    resource = auth.get("resource") or (_first(jwt["audience"]) if jwt else None)
    metadata_url = routes = None
    if resource is not None:
        from .metadata import metadata_routes, protected_resource_metadata
        from .metadata import metadata_url as url_of

        servers = (jwt or {}).get("authorization_servers") or ([jwt["issuer"]] if jwt else [])
        granted = {scope for scopes in policy.roles.values() for scope in scopes}
        document = protected_resource_metadata(resource, servers, scopes_supported=sorted(granted) or None)
        supported = None if in_use is None else (lambda: granted.union(in_use()))
        metadata_url, routes = url_of(resource), metadata_routes(document, supported)
    backends: list[Any] = []
    if auth.get("tokens"):
        from .tokens import StaticTokens

        backends.append(StaticTokens(auth["tokens"], resource_metadata=metadata_url, required=required))
    if jwt:
        from .jwt import JwtBackend

        options = {key: jwt[key] for key in ("algorithms", "roles_claim", "leeway") if key in jwt}
        backends.append(JwtBackend(jwt["issuer"], jwt["audience"], jwt["jwks"], required=required,
                                   resource_metadata=metadata_url, **options))  # fmt: skip
    backend = None if not backends else backends[0] if len(backends) == 1 else EitherBackend(*backends)
    return backend, routes or {}, metadata_url


def scopes_in_use(server: Any) -> Any:
    """A function giving the scopes the server's tools, resources, templates and prompts need, worked out again only
    when one of those registries changed."""
    catalogs = (server.tools, server.resources, server.templates, server.prompts)
    known: list[Any] = [None, frozenset()]  # the registries' generations, and the scopes found then

    def scopes() -> frozenset[str]:
        generations = tuple(catalog._generation for catalog in catalogs)
        if known[0] != generations:
            needed = frozenset(
                scope for catalog in catalogs for item in catalog for scope in getattr(item, "scopes", ())
            )
            known[:] = [generations, needed]
        return known[1]

    return scopes


class EitherBackend:
    """Static tokens and JWTs side by side: a token with two dots is a JWT; anything else is looked up."""

    def __init__(self, tokens: Any, jwt: Any) -> None:
        self.tokens, self.jwt = tokens, jwt

    def authenticate(self, scope: Any) -> Any:
        token = self.tokens.bearer_token(scope)
        if token is None:
            return self.tokens.authenticate(scope)  # anonymous, or 401 when credentials are required
        backend = self.jwt if token.count(".") == 2 else self.tokens
        return backend.authenticate(scope)


def _first(audience: Any) -> str:
    return audience if isinstance(audience, str) else audience[0]


def rate_limits(limits: dict[str, Any], limiter: Any = None) -> Any:
    """The rate-limit step of a policy's ``[limits]``, taking from ``limiter``'s buckets (the deck's backends' one:
    shared by every process that shares them); None: a limiter of its own, in memory."""
    from .limits import Limit, RateLimits

    burst = limits.get("burst")
    limits = {key: value for key, value in limits.items() if key != "http_requests"}

    def spec(key: str) -> Any:
        return Limit(limits[key], burst) if key in limits else None

    return RateLimits(limiter, per_principal=spec("per_principal"), per_tool=spec("per_tool"),
                      per_principal_tool=spec("per_principal_tool"), global_=spec("global"),
                      anonymous_key=anonymous_key)  # fmt: skip


def anonymous_key(request: Any) -> str | None:
    """Whose bucket an anonymous call takes from: its client's address where the transport knows one (over HTTP a
    new session, or a 2026-07-28 request with none, is no new caller); else its connection (stdio: one client); else
    (a request with neither) the one bucket every anonymous caller nobody can tell apart shares (None)."""
    peer = request.peer
    address = getattr(peer, "address", None)
    if address is not None:
        return f"address:{address}"
    key = getattr(peer, "key", None)
    return None if key is None else f"session:{key}"


class InputStep:
    """Input limits as a limit step: arguments too deep, too long or too large end the call before it runs."""

    def __init__(self, sanitise: dict[str, Any]) -> None:
        options = {"max_depth": "max_depth", "max_string": "max_string", "max_bytes": "max_argument_bytes"}
        # By default a string may be as long as a message may (4 MiB): only a policy makes strings shorter.
        self.options = {"max_string": 4_194_304}
        self.options.update({name: sanitise[key] for name, key in options.items() if key in sanitise})
        self.check = self._first_check  # the module is loaded by the first call, not by start-up
        # With no string or size limit below the message size's, only nesting can be over a limit: flat arguments
        # (the usual kind) need no walk.
        self.flat_is_fine = self.options["max_string"] >= 4_194_304 and self.options.get("max_bytes", 4_194_304) >= (
            4_194_304
        )

    def _first_check(self, arguments: Any) -> str | None:
        from .inputs import InputLimits

        self.check = InputLimits(**self.options).check
        return self.check(arguments)

    def __call__(self, request: Any, call: Any) -> None:
        arguments = call.arguments
        if self.flat_is_fine and type(arguments) is dict:
            for value in arguments.values():
                if type(value) is dict or type(value) is list:
                    break
            else:
                return
        problem = self.check(arguments)
        if problem is not None:
            if call.kind == "tool":
                raise ToolError(f"Invalid arguments for tool {call.name!r}: {problem}")
            raise RefusedError(f"Invalid arguments for {call.kind} {call.name!r}: {problem}", http_status=400)


class CleanListing:
    """A catalog's wire function with tool-supplied titles and descriptions sanitised (listings are cached, so this
    costs once per change, not per request)."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def __call__(self, item: Any) -> Any:
        from .sanitise import sanitise_listing_text

        return sanitise_listing_text(self.base(item))


class Sanitiser:
    """The output sanitiser as a pipeline step: every result's text, and what the results link to, made safe."""

    def __init__(self, server: Any, sanitise: dict[str, Any]) -> None:
        self.server = server
        self.max_bytes = sanitise.get("max_result_bytes")
        self.oversize = sanitise.get("oversize", "truncate")
        if self.oversize not in ("truncate", "error"):  # (the policy's schema allows no other; sanitise() trusts it)
            raise ValueError(f"oversize: expected 'truncate' or 'error', got {self.oversize!r}")
        self.schemes: frozenset[str] | None = None
        self._seen: tuple[int, int] = (-1, -1)
        self._sanitise: Any = None

    def __call__(self, request: Any, call: Any, result: dict[str, Any]) -> dict[str, Any]:
        sanitise = self._sanitise
        if sanitise is None:
            from .sanitise import sanitise  # loaded by the first result (its patterns cost start-up ~10 ms)

            self._sanitise = sanitise
        return sanitise(result, self.max_bytes, self.oversize, self._schemes)

    def _schemes(self) -> frozenset[str]:
        """The schemes links may use: the web's and file:, and those of the deck's own resources and templates
        (found again only when either catalog changed)."""
        resources, templates = self.server.resources, self.server.templates
        seen = (resources._generation, templates._generation)
        if self.schemes is None or seen != self._seen:
            from .sanitise import ALLOWED_SCHEMES

            own = {r.uri.split(":", 1)[0].lower() for r in resources} | {
                t.uri_template.text.split(":", 1)[0].lower() for t in templates
            }
            self.schemes, self._seen = frozenset(ALLOWED_SCHEMES) | own, seen
        return self.schemes


class MessageSanitiser:
    """The output sanitiser for what a running tool sends besides its result: its log and progress notifications and
    its questions (elicitation, sampling), in both eras, from the loop or a worker thread (``sanitise_message``)."""

    def __init__(self) -> None:
        self._sanitise: Any = None

    def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        sanitise = self._sanitise
        if sanitise is None:
            from .sanitise import sanitise_message  # loaded by the first message, as the result sanitiser is

            sanitise = self._sanitise = sanitise_message
        return sanitise(method, params)


def audit_sink(audit: dict[str, Any], node: str | None = None) -> Any:
    """The sink of a policy's ``[audit]``; ``node``: this process's id when several processes serve the deck: each
    keeps a trail of its own, ``audit.jsonl`` becoming ``audit.<node>.jsonl`` (one writer per chain)."""
    from .audit_file import FileAuditSink
    from .audit_sinks import StderrAuditSink

    if audit["file"] == "-":
        return StderrAuditSink()
    options = {key: audit[key] for key in ("max_bytes", "backups", "fsync") if key in audit}
    import os

    if node is not None:
        base, extension = os.path.splitext(audit["file"])
        audit = {**audit, "file": f"{base}.{node}{extension}"}

    if not os.path.isdir(os.path.dirname(audit["file"]) or "."):  # said of the trail, not of its lock file
        import errno

        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), audit["file"])
    return FileAuditSink(audit["file"], **options)


class AuditGate:
    """The admission step of an audit trail: while the trail cannot be written, every call is refused before it runs
    (an isError result for tools/call; 503 elsewhere), and each refusal first tries the trail again, so calls run
    again as soon as it can be written. (The refusal reaches the call auditor like any other, which, the trail
    being down, has it counted rather than kept.)"""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def __call__(self, request: Any, call: Any) -> None:
        sink = self.sink
        if sink.problem is not None:  # one attribute read while the trail works
            problem = sink.admit()
            if problem is not None:
                from .audit_chain import AuditUnavailableError

                raise AuditUnavailableError(problem)


class CallAuditor:
    """One audit record per tools/call, per completion (a completer is user code) and per refused call of any kind
    (``tool`` is ``<kind>:<name>`` for all but tools: ``completion:prompt:review``, ``resource:notes://a``). When the
    call ends it notes the facts (the arguments as JSON); the sink makes the record from them (redaction, digest,
    encoding) and writes it at once (with fsync "each", together with the others of the loop turn, and the call
    awaits what ``write`` returns): the record is written before the answer leaves."""

    def __init__(self, sink: Any, redact: Any, access: Any) -> None:
        from .audit import CallRecords, canonical_arguments

        self.canonical = canonical_arguments  # noted as JSON: a tool still running in a thread cannot change them
        self.sink = sink
        self.records = CallRecords(redact, access.level_of)
        # A sink that can write the records of a busy loop turn together is told when the server is busy
        self.together = "together" in inspect.signature(sink.write).parameters

    def __call__(self, request: Any, call: Any, result: dict[str, Any] | None) -> Any:
        refusal = call.refusal
        kind = call.kind
        if refusal is None and kind != "tool" and kind != "completion":
            return None  # resources, prompts and subscriptions are recorded when refused; their reads are not calls
        if refusal is not None:
            decision, reason, outcome = "refused", str(refusal), "refused"
        else:
            decision, reason = "allowed", call.approval  # who approved it, if a person had to
            if result is INPUT_REQUIRED:  # a 2026-07-28 round that stopped at a question (the client answers next)
                outcome = "input_required"
            elif result is TASK_CREATED:  # answered with a task; its work is recorded again when it ends
                outcome = "task_created"
            elif result is CANCELLED:  # its run was stopped: nobody is answered, and what it began is recorded
                outcome = "cancelled"
            else:
                outcome = "error" if result is not None and result.get("isError") else "ok"
        facts = (time.time(), request.request_id, getattr(request.peer, "key", None), request.principal,
                 call.name if kind == "tool" else f"{kind}:{call.name}", call.item, decision, reason, outcome,
                 (time.monotonic() - call.started) * 1000, self.canonical(call.arguments), _trace_id())  # fmt: skip
        sink = self.sink
        record = functools.partial(self.records.encode, facts)
        if self.together and request.server.busy():  # other requests wait: written with the others of the turn
            outcome = sink.write(record, refusal=refusal is not None, together=True)
        else:
            outcome = sink.write(record, refusal=refusal is not None)
        if outcome is None and sink.problem is None:  # written at once (an awaited write is counted where awaited)
            metrics = request.server.metrics
            if metrics is not None:
                metrics.audit_records.inc()
        return outcome


def _trace_id() -> str | None:
    """The trace of the span current while the call is recorded (tracing on: server/tracing.py), else None. Read
    from OpenTelemetry only once something imported it: a deck without tracing pays a dict lookup."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class HttpRefusalAuditor:
    """One audit record per HTTP request refused before it reached the protocol: no or bad credentials (401), and a
    session named by another principal than the one that opened it (403). Returns what the sink's ``write`` does:
    the refusal is answered once its record is written."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def __call__(self, scope: Any, refusal: Any, principal: Any = None, session: Any = None) -> Any:
        client = scope.get("client")
        facts = (time.time(), scope.get("method"), scope.get("path"), client[0] if client else None, refusal.status,
                 refusal.message, principal, session)  # fmt: skip
        return self.sink.write(functools.partial(self._record, facts), refusal=True)

    @staticmethod
    def _record(facts: tuple[Any, ...]) -> dict[str, Any]:
        from .audit_chain import format_time

        now, method, path, address, status, message, principal, session = facts
        return {"time": format_time(now), "event": "http-refused", "method": method, "path": path,
                "client": address, "principal": principal.subject if principal is not None else None,
                "auth": principal.method if principal is not None else None, "session": session, "status": status,
                "decision": "refused", "reason": message}  # fmt: skip


def _closer(sink: Any) -> Any:
    async def close_on_shutdown() -> None:
        import asyncio

        try:
            await asyncio.Event().wait()  # until the server stops and cancels its services
        finally:
            _close(sink)

    return close_on_shutdown


def _close(sink: Any) -> None:
    """Close a trail; records it could not write are logged (the sink says how many and why), not raised."""
    from .audit_chain import AuditError

    try:
        sink.close()
    except AuditError as exc:
        import logging

        logging.getLogger("tooldeck.audit").error("%s", exc)
