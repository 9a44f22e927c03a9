from __future__ import annotations

import pytest

from tooldeck.protocol import versions


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_supported_versions_are_echoed(version: str) -> None:
    assert versions.negotiate(version) == version


@pytest.mark.parametrize("version", ["2024-11-05", "2099-01-01", "1.0.0", ""])
def test_other_versions_get_the_latest(version: str) -> None:
    assert versions.negotiate(version) == "2025-11-25"


def test_only_2025_03_26_batches() -> None:
    assert versions.accepts_batches("2025-03-26")
    assert not versions.accepts_batches("2025-06-18")
    assert not versions.accepts_batches("2025-11-25")
    assert not versions.accepts_batches(None)
