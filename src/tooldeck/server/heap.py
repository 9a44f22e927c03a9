"""The garbage collector's settings for a process that serves a deck: ``settle``, called by ``run_stdio`` and
``run_http`` (each worker of ``--workers``, too) once the deck is loaded and before the first request.

- **What start-up made is frozen** (``gc.freeze``): the modules, the deck, its compiled validators. They live as long
  as the process, and without this every full collection walks them again. In a forked worker the collector then
  never writes to the parent's pages either, so they stay shared.
- **The youngest generation is collected after 10,000 allocations, not 700.** A call that waits (for Redis, a
  worker thread, the client) holds its frames, futures and request objects across the await; with 32 calls in flight
  the default threshold collects several times per batch, walks those objects while they are alive and moves them
  to the older generations, where they are walked again. Counted under callgrind, with Redis as the shared backend
  and 32 calls in flight: 19,000 instructions per call less (of 279,000); a call that never waits is unchanged.
  Objects without reference cycles are freed at once by their reference counts either way; only cyclic garbage
  waits longer to be found, at most 10,000 container objects of it.

A program that runs the deck inside a server of its own (``deck.http_app()`` under another ASGI server) keeps its
own settings: only tooldeck's own serving entry points call this.
"""

from __future__ import annotations

import gc

YOUNGEST = 10_000  # allocations (less deallocations) of container objects between collections of generation 0


def settle() -> None:
    """Freeze what exists now and raise the youngest generation's threshold (the older two are left as they are)."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNGEST, middle, oldest)
