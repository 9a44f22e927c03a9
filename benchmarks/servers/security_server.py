"""The security benchmark's deck: one async tool, ``echo(text: str) -> str``, as in the main benchmark.

Environment (optional): BENCH_SECURITY_LEVEL=N gives echo security level N and, above 0, the scope ``bench:call``
(without it echo declares no level, so it gets the policy's ``[levels] default``). Everything else (authentication,
limits, sanitiser, audit) comes from the policy file: `tooldeck serve benchmarks/servers/security_server.py
[--http ...] [--policy FILE]`.
"""

import os

from tooldeck import Deck

SCOPE = "bench:call"
LEVEL = int(os.environ.get("BENCH_SECURITY_LEVEL", "0"))

deck = Deck("bench-security", version="1.0.0")


@deck.tool(**({"security_level": LEVEL, "scopes": [SCOPE]} if LEVEL else {}))
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    deck.run()
