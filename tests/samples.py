"""Values several test modules share: sample enums for typed parameters, and the task status moves of spec §7.4."""

from __future__ import annotations

import enum

T0 = 1764066600.0  # 2025-11-25T10:30:00Z, a task clock's starting point


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


# Spec §7.4, written out rather than derived, plus the same-status moves that carry a new statusMessage.
ALLOWED_MOVES = {
    ("working", "input_required"),
    ("working", "completed"),
    ("working", "failed"),
    ("working", "cancelled"),
    ("input_required", "working"),
    ("input_required", "completed"),
    ("input_required", "failed"),
    ("input_required", "cancelled"),
    ("working", "working"),
    ("input_required", "input_required"),
}
