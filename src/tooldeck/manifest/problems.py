"""What is wrong with a tool definition file, said as ``file: $.json.path: what`` — one Problem per reason, and the
DefinitionError that carries them all; and ManagerError, what the tool manager cannot do."""

from __future__ import annotations

from ..protocol.errors import TooldeckError
from ..protocol.record import Record


class Problem(Record):
    """One thing wrong with a definition file: where (file, JSON path) and what."""

    __slots__ = ("file", "path", "message")

    def __init__(self, file: str, path: str, message: str) -> None:
        self.file = file
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {"file": self.file, "path": self.path, "message": self.message}


class DefinitionError(TooldeckError):
    """A definition (or a set of them) that cannot be served as given; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


class ManagerError(TooldeckError):
    """An operation the tool manager cannot do (rolling back with no earlier version, unregistering an unknown id)."""
