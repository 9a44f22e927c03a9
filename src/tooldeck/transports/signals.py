"""SIGHUP reloads the policy of a serving deck (``Deck.reload_policy``), over stdio and HTTP alike: one log line
says which file now serves, or why the new one was refused (``file:line: what``) while the one before keeps serving.
Sessions stay open. Where there is no SIGHUP (Windows), or the loop runs outside the main thread, nothing is
installed."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

log = logging.getLogger("tooldeck.policy")


def reload_on_hangup(loop: asyncio.AbstractEventLoop, deck: Any) -> None:
    """Have SIGHUP reload ``deck``'s policy on ``loop`` (a deck with no policy file says so and goes on)."""
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None or not hasattr(deck, "reload_policy"):
        return
    try:
        loop.add_signal_handler(hangup, reload_now, deck)
    except (ValueError, RuntimeError):  # a loop outside the main thread (a server run in a thread) has no signals
        log.debug("SIGHUP does not reload the policy: this loop is not in the main thread")


def reload_now(deck: Any) -> bool:
    """Reload ``deck``'s policy and log how it went; True when the new one serves."""
    try:
        source = deck.reload_policy()
    except Exception as exc:  # PolicyError (file:line: what), or the audit trail's file that cannot be opened
        log.error("policy not reloaded: %s; the policy loaded before serves on", exc)
        return False
    log.warning("policy reloaded from %s", source)
    return True
