"""Tests for schema/paths.py: JSON paths and value previews in messages."""

from typing import Any

import pytest

from tooldeck.protocol.paths import find, format_path, path_key, preview


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([], "$"),
        (["location"], "$.location"),
        (["items", 2, "name"], "$.items[2].name"),
        (["odd key"], '$["odd key"]'),
        (["0"], '$["0"]'),
        (['quote"d'], '$["quote\\"d"]'),
        (["_private", "x1"], "$._private.x1"),
        ([0, 1], "$[0][1]"),
    ],
)
def test_format_path(parts: list[str | int], expected: str) -> None:
    assert format_path(parts) == expected


def test_path_key_orders_indices_numerically() -> None:
    paths: list[list[str | int]] = [["a", 10], ["a", 2], [], ["a"], ["b"]]
    assert sorted(paths, key=path_key) == [[], ["a"], ["a", 2], ["a", 10], ["b"]]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, "3"),
        ("x", '"x"'),
        (None, "null"),
        ({"a": [1, 2]}, '{"a":[1,2]}'),
        ("y" * 70, '"' + "y" * 56 + "..."),
        (object, "<class 'object'>"),
    ],
)
def test_preview(value: Any, expected: str) -> None:
    assert preview(value) == expected


def test_find_walks_dicts_lists_tuples_and_dataclasses_depth_first() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    value = {"a": [1, (2, Point(3.0, -1.0))], "b": -2}
    assert find(value, lambda v: type(v) in (int, float) and v < 0) == (["a", 1, 1, "y"], -1.0)
    assert find(value, lambda v: v == "missing") is None
