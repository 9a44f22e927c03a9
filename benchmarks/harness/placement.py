"""Which CPUs the client and the servers run on. Pinning keeps the scheduler from switching layouts mid-run:
on a VM, a cross-CPU wake-up costs tens of µs per message, so an unpinned ping-pong is bimodal."""

from __future__ import annotations

import os

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
