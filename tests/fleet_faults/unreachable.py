"""What a request that needs Redis is told while Redis is stopped: ``Unreachable(url)`` equals the one-line message
``the shared backend <url> is unreachable: <cause>`` for each cause a stopped server gives (refused at connect, lost
under a command already written, or still loading its data once started again), so it can stand in an expected
JSON-RPC error."""

from __future__ import annotations

import re

CAUSES = (  # as regular expressions
    r"Connection refused",  # nothing listens: the server is stopped
    r"Connection reset by peer",
    r"the connection was lost(?:: .*)?",  # a command written before the server went away (engine/wire.py)
    r"Connection closed by server\.",
    r"(?:Redis|Valkey) is loading the dataset in memory",  # started again, and reading its data back
)


class Unreachable:
    def __init__(self, url: str) -> None:
        causes = "|".join(CAUSES)
        self.pattern = re.compile(rf"the shared backend {re.escape(url)} is unreachable: (?:{causes})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.pattern.fullmatch(other) is not None

    def __hash__(self) -> int:
        return hash(self.pattern.pattern)

    def __repr__(self) -> str:
        return f"Unreachable({self.pattern.pattern!r})"
