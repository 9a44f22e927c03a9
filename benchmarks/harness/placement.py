"""Which CPUs the client and the servers run on. Pinning keeps the scheduler from switching layouts mid-run:
on a VM, a cross-CPU wake-up costs tens of µs per message, so an unpinned ping-pong is bimodal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

LAYOUTS = {
    "same": "client and server (all its threads) on one CPU",
    "split": "client on one CPU, server (all its threads) on another",
    "none": "not pinned",
}


def pin(layout: str) -> tuple[set[int] | None, str]:
    """Pin this process (the client) for `layout`; return the CPU set for servers, and what was done."""
    cpus = sorted(os.sched_getaffinity(0))
    if layout == "none":
        return None, LAYOUTS["none"]
    if layout == "split" and len(cpus) < 2:
        layout = "same"  # one usable CPU: nothing to split
    client = {cpus[0]}
    server = {cpus[1]} if layout == "split" else client
    os.sched_setaffinity(0, client)
    return server, f"{layout}: {LAYOUTS[layout]} (client CPU {cpus[0]}, server CPU {min(server)})"


@contextmanager
def yielding() -> Iterator[None]:
    """Run the block with this process (the client) as a batch process (SCHED_BATCH), then restore its policy.

    For the HTTP 32-client blocks, where the client shares the server's CPU. A normal process woken by a reply may
    preempt the server in the middle of its burst of work (Linux favours the task that just woke); a batch process
    never preempts on wake-up, and runs when the server has nothing left to do, so the server's bursts run to
    their end as they would with its clients on other machines. It still takes its share of the CPU, which is
    the same for every server. Where the policy cannot be changed the block runs as it is.
    """
    try:
        policy = os.sched_getscheduler(0)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, os.sched_param(0))
