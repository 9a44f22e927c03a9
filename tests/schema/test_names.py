"""Type names for messages (schema/names.py): JSON Schema's words with the right article, never "a int"."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tooldeck.schema.names import a_type_name, type_name


@pytest.mark.parametrize(
    ("value", "name", "with_article"),
    [
        (3, "integer", "an integer"),
        (True, "boolean", "a boolean"),
        (1.5, "number", "a number"),
        ("x", "string", "a string"),
        ({}, "object", "an object"),
        ([], "array", "an array"),
        ((1,), "array", "an array"),
        (None, "null", "null"),
        (pathlib.PurePosixPath("a"), "PurePosixPath", "a PurePosixPath object"),
        (ValueError("x"), "ValueError", "a ValueError object"),
        (int, "class", "a class"),
        (len, "function", "a function"),
        (lambda: 1, "function", "a function"),
    ],
)
def test_names(value: Any, name: str, with_article: str) -> None:
    assert type_name(value) == name
    assert a_type_name(value) == with_article
