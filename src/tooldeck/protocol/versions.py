"""The MCP revisions tooldeck speaks, and how one is chosen at initialize.

Two eras: the legacy revisions (``SUPPORTED``) are negotiated once, by ``initialize``, for a session; the modern ones
(``MODERN``, from 2026-07-28) are named by every request in its ``_meta`` and never go through ``initialize``.
"""

from __future__ import annotations

LATEST = "2025-11-25"
SUPPORTED: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
# 2025-03-26 is the only supported revision with JSON-RPC batches (removed in 2025-06-18).
BATCHING = frozenset({"2025-03-26"})
# The stateless revisions: what server/discover lists and what -32022 names as supported (modern ones only, as both
# official SDKs do: 2025-11-25 cannot be spoken through the per-request envelope).
MODERN: tuple[str, ...] = ("2026-07-28",)
MODERN_SET = frozenset(MODERN)


def negotiate(requested: str) -> str:
    """The version to answer with: the client's when we speak it, else our latest (the client decides)."""
    return requested if requested in SUPPORTED else LATEST


def accepts_batches(version: str | None) -> bool:
    return version in BATCHING


def is_modern(version: str | None) -> bool:
    return version in MODERN_SET
