"""The seed documents tests read: from ``../shared/seeds/`` beside the repository when it is there (the source),
else the copy in ``tests/data/`` (a checkout on its own)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "seeds"
TOOL_DEFINITION = "002_d1c6451212701c28.txt"
COPY = DATA / "seed-002-tool-definition.txt"


def tool_definition_seed() -> Path:
    shared = SHARED / TOOL_DEFINITION
    return shared if shared.exists() else COPY


def seed_calculator() -> dict[str, Any]:
    """The specification's example tool definition, exactly as it is written there."""
    text = tool_definition_seed().read_text()
    example = text[text.index("## Example Tool Definition") :]
    block = re.search(r"```json\n(.*?)```", example, re.S)
    assert block is not None
    return orjson.loads(block.group(1))  # type: ignore[no-any-return]
