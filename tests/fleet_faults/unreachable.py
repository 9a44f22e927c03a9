"""What a request that needs Redis is told while Redis is stopped: ``Unreachable(url)`` equals the one-line message
``the shared backend <url> is unreachable: <cause>`` for each cause a stopped server gives (refused at connect, or
lost under a command already written), so it can stand in an expected JSON-RPC error."""

from __future__ import annotations

import re

CAUSES = ("Connection refused", "Connection reset by peer", "the connection was lost", "Connection closed by server.")


class Unreachable:
    def __init__(self, url: str) -> None:
        causes = "|".join(re.escape(cause) for cause in CAUSES)
        self.pattern = re.compile(rf"the shared backend {re.escape(url)} is unreachable: (?:{causes})(?:: .*)?")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.pattern.fullmatch(other) is not None

    def __hash__(self) -> int:
        return hash(self.pattern.pattern)

    def __repr__(self) -> str:
        return f"Unreachable({self.pattern.pattern!r})"
