"""Tests for schema/docstring.py: Google, NumPy and Sphinx parameter sections."""

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck.schema.docstring import cleandoc, parse_docstring

GOOGLE = """Fetch a page.

    Follows redirects.

    Args:
        url (str): The address to fetch.
        timeout: Seconds to wait before
            giving up.
        *headers: Extra headers.

    Returns:
        The page body.

    Raises:
        TimeoutError: when it takes too long.
    """

NUMPY = """Fetch a page.

    Parameters
    ----------
    url : str
        The address to fetch.
    timeout : float, optional
        Seconds to wait before
        giving up.
    left, right : int
        Both ends.

    Returns
    -------
    str
        The page body.
    """

SPHINX = """Fetch a page.

    :param url: The address to fetch.
    :type url: str
    :param float timeout: Seconds to wait before
        giving up.
    :returns: The page body.
    :rtype: str
    :raises TimeoutError: when it takes too long.
    """


@pytest.mark.parametrize(
    ("doc", "description", "params"),
    [
        (
            GOOGLE,
            "Fetch a page.\n\nFollows redirects.\n\nReturns:\n    The page body.\n\nRaises:\n"
            "    TimeoutError: when it takes too long.",
            {
                "url": "The address to fetch.",
                "timeout": "Seconds to wait before giving up.",
                "headers": "Extra headers.",
            },
        ),
        (
            NUMPY,
            "Fetch a page.\n\nReturns\n-------\nstr\n    The page body.",
            {
                "url": "The address to fetch.",
                "timeout": "Seconds to wait before giving up.",
                "left": "Both ends.",
                "right": "Both ends.",
            },
        ),
        (
            SPHINX,
            "Fetch a page.\n\n:returns: The page body.\n:rtype: str\n:raises TimeoutError: when it takes too long.",
            {"url": "The address to fetch.", "timeout": "Seconds to wait before giving up."},
        ),
        ("Just prose.", "Just prose.", {}),
        ("One line.\n\nArgs:\n    x: the x", "One line.", {"x": "the x"}),
        ("Args:\n    x: only parameters", None, {"x": "only parameters"}),
        ("", None, {}),
        (None, None, {}),
        ("Keyword Arguments:\n    flag: a switch\n\nNotes here.", "Notes here.", {"flag": "a switch"}),
        ("Args:\n    x:\n        described below the name", None, {"x": "described below the name"}),
    ],
    ids=["google", "numpy", "sphinx", "prose", "short", "only-args", "empty", "none", "keyword-args", "next-line"],
)
def test_parse_docstring(doc: str | None, description: str | None, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == (description, params)


def test_attributes_are_parameters_only_for_classes() -> None:
    doc = "A point.\n\nAttributes:\n    x: across\n"
    assert parse_docstring(doc, for_class=True) == ("A point.", {"x": "across"})
    assert parse_docstring(doc) == ("A point.\n\nAttributes:\n    x: across", {})


LINES = st.sampled_from(
    [
        "Args:",
        "Parameters",
        "----------",
        "Returns:",
        "    x: the x",
        "x : int",
        ":param x: y",
        "        more",
        "",
        "text",
    ]
)


@given(st.lists(LINES | st.text(max_size=20), max_size=12), st.booleans())
def test_any_text_parses(lines: list[str], for_class: bool) -> None:
    """Whatever a docstring holds, parsing returns prose (or None) and string descriptions, and never raises."""
    description, params = parse_docstring("\n".join(lines), for_class=for_class)
    assert description is None or (isinstance(description, str) and description.strip() == description != "")
    assert all(isinstance(name, str) and isinstance(text, str) for name, text in params.items())


# Spaces, tabs and the other whitespace str.lstrip removes (form feed, no-break space), which inspect.cleandoc treats
# differently from 3.13 on; blank lines, and text.
DOCSTRING_TEXT = st.text(alphabet=" \t\n\x0c\u00a0ab:-", max_size=40)


@given(DOCSTRING_TEXT)
def test_cleandoc_is_inspects(doc: str) -> None:
    assert cleandoc(doc) == inspect.cleandoc(doc)
