"""The deck of the era tests (tests/eras.py) with two tools that change what it announces: ``grow`` adds a tool
(every listener of tool-list changes hears it) and ``touch`` says a resource changed; served over stdio or HTTP."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, where eras.py lives

from eras import era_deck

deck = era_deck()


@deck.tool
def grow(name: str) -> str:
    """Add a tool called ``name``."""
    deck.add_tool(lambda: name, name=name, description="Added while serving.")
    return f"added {name}"


@deck.tool
def touch(uri: str) -> str:
    """Announce that the resource at ``uri`` changed."""
    deck.notify_resource_updated(uri)
    return f"touched {uri}"
