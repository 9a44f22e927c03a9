"""``tooldeck serve``: a deck, a tool definition file or a directory of them, over stdio or Streamable HTTP, with a
short banner on stderr once it is ready (``--quiet``: none)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..protocol.errors import RegistrationError, TargetError

if TYPE_CHECKING:
    import argparse

log = logging.getLogger("tooldeck.serve")


def serve(args: argparse.Namespace) -> int:
    from ..security.keys import environment_key

    try:
        environment_key()  # refused now, not at the first question a 2026-07-28 client is asked
    except ValueError as exc:
        raise TargetError(str(exc)) from None

    if getattr(args, "watch", False) and args.log_level == "warning":
        # What the watcher applies is worth a line each at the default level, as its refusals are.
        logging.getLogger("tooldeck.manifest").setLevel(logging.INFO)

    store = getattr(args, "task_store", None)
    if store is not None:
        from ..tasks.specs import check_store_spec

        try:
            check_store_spec(store)
        except ValueError as exc:
            raise TargetError(str(exc)) from None
    backends = _backends(args)
    if getattr(args, "http", False):
        from ..tasks.specs import default_store_path
        from ..transports.http.server import run_http

        deck = _load(args)
        if backends is not None:
            deck.use_backends(backends)
        if getattr(args, "node_id", None) is not None:
            deck.node_id = args.node_id  # before the policy: the audit trail is named after it
        _policy(deck, args)
        for flag, turn_on in (("metrics", deck.use_metrics), ("tracing", deck.use_tracing)):
            if getattr(args, flag, False):
                try:
                    turn_on()
                except RegistrationError as exc:
                    raise TargetError(f"--{flag}: {exc}") from None
        if getattr(args, "console", False):
            deck.use_console(operator_scope=args.operator_scope)
        if deck.http_auth is None and args.host not in _LOOPBACK:
            log.warning("serving %s on %s without authentication: anyone who can reach it can call its tools "
                        "(give --policy with [authentication])", deck.name, args.host)  # fmt: skip
        if args.workers > 1 and not deck.backends.shared:
            raise TargetError(f"--workers {args.workers} runs {args.workers} processes, which must share their state: "
                              "give --backend redis://HOST:PORT/DB (or a deck whose backends are shared)")  # fmt: skip
        if deck.backends.tasks is None:
            deck.backends.tasks = store or f"sqlite:{default_store_path(deck.name)}"
        run_http(
            deck,
            on_listening=None if getattr(args, "quiet", False) else _announcer(deck, args),
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            allowed_hosts=args.allow_host,
            allowed_origins=args.allow_origin,
            stateless=args.stateless,
            json_response=args.json_response,
            max_body_bytes=args.max_message_bytes,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            max_connections=args.max_connections,
            max_backlog=args.max_backlog,
            trusted_proxies=args.trusted_proxy,
            healthz_path=args.healthz_path,
            readyz_path=args.readyz_path,
            access_log=args.access_log,
            **({"metrics_path": args.metrics_path} if args.metrics_path else {}),
            operator_scope=args.operator_scope,
            workers=args.workers,
        )
        return 0
    from ..transports.stdio import claim_stdout, run_stdio

    out_fd = claim_stdout()  # before the target is imported: its import-time prints must not reach the client
    deck = _load(args)
    if backends is not None:
        deck.use_backends(backends)
    _policy(deck, args)
    if store is not None and deck.backends.tasks is None:
        deck.backends.tasks = store
    if not getattr(args, "quiet", False):
        from .banner import stdio_banner, write

        write(stdio_banner(deck, args.target, getattr(args, "policy", None), _naming(args)))
    drain = getattr(args, "drain_timeout", None)
    run_stdio(deck, max_message_bytes=args.max_message_bytes, stdout_fd=out_fd,
              **({"drain_timeout": drain} if drain is not None else {}))  # fmt: skip
    return 0


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _backends(args: argparse.Namespace) -> Any:
    """The spec ``--backend`` gives, checked before the deck is loaded (a bad one is one line); None without it."""
    spec = getattr(args, "backend", None)
    if spec is None:
        return None
    from ..server.backends import backends_from_spec

    try:
        backends_from_spec(spec)
    except RegistrationError as exc:
        raise TargetError(f"--backend: {exc}") from None
    return spec


def _load(args: argparse.Namespace) -> Any:
    from ..loader import load_deck

    return load_deck(args.target, watch=getattr(args, "watch", False), name=getattr(args, "name", None),
                     version=getattr(args, "deck_version", None))  # fmt: skip


def _naming(args: argparse.Namespace) -> list[str]:
    """``--name``/``--deck-version`` as given, for the banner's command (the Inspector then serves the same deck)."""
    words = []
    for flag, value in (
        ("--name", getattr(args, "name", None)),
        ("--deck-version", getattr(args, "deck_version", None)),
    ):
        if value is not None:
            words += [flag, value]
    return words


def _announcer(deck: Any, args: argparse.Namespace) -> Any:
    """What prints the banner once the HTTP server listens (only then is the port of ``--port 0`` known)."""

    def announce(url: str, bound: str | None) -> None:
        from .banner import http_banner, write

        write(http_banner(deck, url, getattr(args, "policy", None), bound))

    return announce


def _policy(deck: Any, args: argparse.Namespace) -> None:
    path = getattr(args, "policy", None)
    if path is None:
        return
    from ..security.audit_chain import AuditError
    from ..security.policy import PolicyError

    try:
        deck.apply_policy(path)
    except (PolicyError, AuditError) as exc:  # an audit trail another server writes, or that cannot be opened
        raise TargetError(str(exc)) from None
