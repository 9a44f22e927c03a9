"""A deck for `tooldeck serve --http --workers N --backend redis://...`: its one tool says which process answered."""

import os

from tooldeck import Deck

deck = Deck("workers")


@deck.tool
def whoami() -> str:
    """The process that answered: its pid and its node id."""
    return f"{os.getpid()} {deck.node_id}"
