"""Tests for schema/parameters.py: a callable's parameters and docstring, read as inspect reads them."""

import functools
import inspect
from typing import Any

import pytest

from tooldeck.schema.kinds import NO_DEFAULT
from tooldeck.schema.parameters import read_docstring, read_parameters


def as_inspect_reads_them(fn: Any) -> list[tuple[str, str, Any]]:
    empty = inspect.Parameter.empty
    return [
        (parameter.name, parameter.kind.name, NO_DEFAULT if parameter.default is empty else parameter.default)
        for parameter in inspect.signature(fn).parameters.values()
    ]


def no_parameters() -> None:
    pass


def plain(query: str, limit: int = 10, tags: list[str] | None = None) -> None:
    pass


def every_kind(a, b=1, /, c=2, *args, d, e=3, **kwargs):  # type: ignore[no-untyped-def]
    pass


def keyword_only(*, first: int, second: str = "x") -> None:
    pass


def star_only(*args, **kwargs):  # type: ignore[no-untyped-def]
    pass


def with_locals(a: int, b: int = 2) -> int:
    total = a + b  # local variables follow the parameters in co_varnames and must not be taken for them
    return total


def too_many_defaults(a):  # type: ignore[no-untyped-def]
    pass


too_many_defaults.__defaults__ = (1, 2, 3)  # inspect gives `a` the first of them


def replaced_keyword_defaults(*, a=1, b=2):  # type: ignore[no-untyped-def]
    pass


replaced_keyword_defaults.__kwdefaults__ = {"b": 5}


def closure() -> Any:
    captured = 1

    def inner(x: int = captured) -> int:
        return x + captured

    return inner


PLAIN_FUNCTIONS = [
    no_parameters,
    plain,
    every_kind,
    keyword_only,
    star_only,
    with_locals,
    too_many_defaults,
    replaced_keyword_defaults,
    closure(),
    lambda a, b=2: a,
]


@pytest.mark.parametrize("fn", PLAIN_FUNCTIONS, ids=lambda fn: fn.__name__)
def test_plain_functions_are_read_from_their_code_as_inspect_reads_them(
    fn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = as_inspect_reads_them(fn)
    monkeypatch.setattr(inspect, "signature", None)  # the fast path must not need it
    assert read_parameters(fn) == expected


@functools.wraps(plain)
def wrapper(*args: Any, **kwargs: Any) -> None:
    pass


def with_signature(a: int) -> None:
    pass


with_signature.__signature__ = inspect.Signature([inspect.Parameter("b", inspect.Parameter.KEYWORD_ONLY)])  # type: ignore[attr-defined]


class Tool:
    def __init__(self, size: int, name: str = "x") -> None:
        pass

    def method(self, a: int, b: int = 2) -> None:
        pass

    def __call__(self, text: str) -> str:
        return text


OTHER_CALLABLES = [
    wrapper,  # functools.wraps: the wrapped function's parameters, as inspect reports them
    with_signature,
    functools.partial(plain, "q"),
    functools.partial(every_kind, 1, d=4),
    Tool,
    Tool(1),
    Tool(1).method,
    Tool.method,
    len,
    print,
]


@pytest.mark.parametrize("fn", OTHER_CALLABLES, ids=repr)
def test_other_callables_are_read_by_inspect(fn: Any) -> None:
    assert read_parameters(fn) == as_inspect_reads_them(fn)


def test_a_non_callable_raises_as_inspect_does() -> None:
    with pytest.raises(TypeError, match="not a callable object"):
        read_parameters(3)


def documented() -> None:
    """Summary.

    Details, indented.
    """


def undocumented() -> None:
    pass


class Base:
    def run(self) -> None:
        """Run, as every subclass does."""


class Child(Base):
    def run(self) -> None:
        pass


class Documented:
    """A class."""


def nested() -> Any:
    def inner() -> None:
        pass

    return inner


def odd_doc() -> None:
    pass


odd_doc.__doc__ = 3  # type: ignore[assignment]


@pytest.mark.parametrize(
    "obj",
    [documented, undocumented, Child.run, Child().run, Documented, nested(), odd_doc, Tool.method, len],
    ids=repr,
)
def test_docstrings_are_read_as_inspect_getdoc_reads_them(obj: Any) -> None:
    assert read_docstring(obj) == inspect.getdoc(obj)


@pytest.mark.parametrize("fn", [documented, undocumented], ids=repr)
def test_a_module_level_functions_docstring_is_read_without_inspect(fn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = inspect.getdoc(fn)
    monkeypatch.setattr(inspect, "getdoc", None)
    assert read_docstring(fn) == expected
