"""The MCP revisions tooldeck speaks, and how one is chosen at initialize."""

from __future__ import annotations

LATEST = "2025-11-25"
SUPPORTED: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
# 2025-03-26 is the only supported revision with JSON-RPC batches (removed in 2025-06-18).
BATCHING = frozenset({"2025-03-26"})


def negotiate(requested: str) -> str:
    """The version to answer with: the client's when we speak it, else our latest (the client decides)."""
    return requested if requested in SUPPORTED else LATEST


def accepts_batches(version: str | None) -> bool:
    return version in BATCHING
