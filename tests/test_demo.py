"""The demo deck (tooldeck/demo.py): every input its tools accept ends in a result or a ToolError that says what was
wrong, never in a masked internal error, and no input keeps the server busy for long."""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import client
from tooldeck import ToolError
from tooldeck.demo import deck

MASKED = "failed with an internal error"
TOO_LARGE = "the result is too large to represent (numbers must stay within about ±1.8e308)"
PYTHON_WORDS = re.compile(
    r"math (domain|range) error|float (modulo|division)|Numerical result|int too large|convert float"
)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with client(deck) as c:
        return await c.call_tool(name, arguments)


def value_of(result: dict[str, Any]) -> Any:
    assert not result.get("isError"), result
    return result["structuredContent"]


def refusal_of(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    text = result["content"][0]["text"]
    assert MASKED not in text
    assert not PYTHON_WORDS.search(text), text  # the math module's words are no message for a user
    return text


# --- calculate ---------------------------------------------------------------------------------------------------

NESTED = {
    "parentheses": ("(" * 199 + "1" + ")" * 199, 1.0),  # the parser allows 200 levels
    "unary minus": ("-" * 999 + "1", -1.0),
    "unary signs": ("+-" * 499 + "1", -1.0),
    "a long sum": ("1+" * 499 + "1", 500.0),
    "functions": ("abs(" * 199 + "-1" + ")" * 199, 1.0),
    "a power tower": ("1**" * 332 + "2", 1.0),
}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) ** 0.5", 2 * 7**0.5),
        ("sqrt(2) * pi", math.sqrt(2) * math.pi),
        ("7 // 2 + 7 % 2", 4.0),
        ("-2 ** 2", -4.0),
        ("2 ** -1", 0.5),
        ("round(2.675, 2)", 2.67),
        ("round(2.5)", 2.0),
        ("round(1234.5, -2)", 1200.0),
        ("round(1.5, 1e308)", 1.5),  # to 10**308 digits, 1.5 is 1.5
        ("min(3, 1, 2) + max(1, 2)", 3.0),
        ("log(8, 2)", 3.0),
        ("log10(1000) + log(e)", 4.0),
        ("floor(-1.5) + ceil(1.5)", 0.0),
        ("abs(-3) + exp(0) + tau / pi", 6.0),
        ("1_000 + 0x10 + 1e3", 2016.0),
        *(pytest.param(expression, value, id=name) for name, (expression, value) in NESTED.items()),
    ],
    ids=lambda case: case if isinstance(case, str) and len(case) < 40 else None,
)
async def test_calculate_evaluates(expression: str, value: float) -> None:
    assert value_of(await call("calculate", {"expression": expression})) == {"result": pytest.approx(value)}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        # bad arity and argument types
        ("min()", "cannot evaluate 'min()': min() takes at least 2 arguments, got 0"),
        ("max(1)", "cannot evaluate 'max(1)': max() takes at least 2 arguments, got 1"),
        ("1 + sqrt()", "sqrt() takes 1 argument, got 0 in 'sqrt()'"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument, got 2"),
        ("log(1, 2, 3)", "log() takes 1 or 2 arguments, got 3"),
        ("round(1.5, 0.5)", "round() takes a whole number of digits, got 0.5"),
        (
            "round(1.5, 1e309)",
            "the number is too large to represent (numbers must stay within about ±1.8e308) in '1e309'",
        ),
        ("round(1.5, ndigits=1)", "round() takes plain arguments"),
        ("sqrt(*[4])", "sqrt() takes plain arguments"),
        ("pi(2)", "unknown function 'pi'"),
        ("x + 1", "unknown name 'x' (constants: pi, e, tau) in 'x'"),
        # math domain and range: said in words, never Python's "math domain error" or "(34, 'Numerical result ...')"
        ("sqrt(-1)", "cannot evaluate 'sqrt(-1)': sqrt() is not defined for -1"),
        ("(-8) ** (1/3)", "a negative number to a fractional power (-8) ** 0.333333 has no real value"),
        ("log(0)", "cannot evaluate 'log(0)': log() is not defined for 0"),
        ("log(2, 1)", "log() is not defined for 2, 1"),
        ("0 ** -1", "0 to a negative power is not defined (it would divide by zero)"),
        ("1 / 0", "cannot evaluate '1 / 0': division by zero"),
        ("1 // 0", "cannot evaluate '1 // 0': division by zero"),
        ("1 % 0", "cannot evaluate '1 % 0': modulo by zero (the remainder of a division by 0)"),
        ("10 ** 400", f"cannot evaluate '10 ** 400': {TOO_LARGE}"),
        ("10.0 ** 400", f"cannot evaluate '10.0 ** 400': {TOO_LARGE}"),
        ("9 ** 9 ** 9", TOO_LARGE),
        ("2**" * 332 + "2", TOO_LARGE),
        ("exp(1000)", f"cannot evaluate 'exp(1000)': {TOO_LARGE}"),
        ("9" * 400, "the number is too large to represent (numbers must stay within about ±1.8e308)"),
        ("floor(1e308 * 10)", f"{TOO_LARGE} in '1e308 * 10'"),
        ("ceil(1e308 * 10 - 1e308 * 10)", f"{TOO_LARGE} in '1e308 * 10'"),
        ("tan(1e308 * 10)", f"{TOO_LARGE} in '1e308 * 10'"),
        ("1e308 * 10", f"cannot evaluate '1e308 * 10': {TOO_LARGE}"),
        ("1e999 - 1e999", "the number is too large to represent (numbers must stay within about ±1.8e308) in '1e999'"),
        # not arithmetic: where the parser stopped, as a column counted from 1, or the end of the expression
        ("", "not an expression: the expression is empty; give one like '2 * (3 + 4)'"),
        ("   ", "not an expression: the expression is empty"),
        ("1+", "not an expression: unexpected end of expression after '1+'"),
        ("1 +", "not an expression: unexpected end of expression after '1 +'"),
        ("2 ** ", "not an expression: unexpected end of expression after '2 **'"),
        ("1 + 2 + 3 + 4 + 5 + 6 + 7 +", "unexpected end of expression after '...+ 4 + 5 + 6 + 7 +'"),
        ("1+*2", "not an expression: invalid syntax at column 3 (counting from 1), at '*2'"),
        ("  1 + * 2", "not an expression: invalid syntax at column 7 (counting from 1), at '* 2'"),
        ("2 3", "not an expression: invalid syntax at column 3 (counting from 1), at '3'"),
        ("1 +)", "not an expression: unmatched ')' at column 4 (counting from 1), at ')'"),
        ("sqrt(2", "not an expression: '(' was never closed at column 5 (counting from 1), at '(2'"),
        ("1\x00", "not an expression: the expression contains a null character (\\x00)"),
        ("(" * 201 + "1" + ")" * 201, "not an expression: too many nested parentheses at column 201 (counting from 1)"),
        ("1 < 2", "unsupported syntax: '1 < 2'"),
        ("'a'", "unsupported syntax"),
        ("[1] * 3", "unsupported syntax: '[1]'"),
        ("True + 1", "unsupported syntax: 'True'"),
        ("1j", "unsupported syntax: '1j'"),
        ("(lambda: 1)()", "unsupported syntax"),
        ("__import__('os')", "unknown function '__import__'"),
        ("[" + "1+" * 300 + "1]", "unsupported syntax: '[1+1+1+"),  # quoted short, never unparsed in depth
    ],
    ids=lambda case: case if isinstance(case, str) and len(case) < 40 else None,
)
async def test_calculate_refuses_with_the_reason(expression: str, message: str) -> None:
    assert message in refusal_of(await call("calculate", {"expression": expression}))


def test_a_literal_past_python_s_digit_limit_is_said_in_words() -> None:
    # The tool's 1000-character limit keeps this from a client; the function itself may be called with anything.
    from tooldeck.demo import calculate

    with pytest.raises(ToolError) as refused:
        calculate("9" * 4301)
    assert (
        str(refused.value)
        == "not an expression: a number has more than 4300 digits; numbers must stay within about ±1.8e308"
    )


NUMBERS = st.one_of(
    st.integers(0, 10**20).map(str),
    st.floats(0, 1e300).map(repr),
    st.sampled_from(["0", "0.0", "1e308", "1e-308", "1e999", "9" * 300, "0x" + "f" * 300, "pi", "e", "tau", "x"]),
)
OPERATORS = ["+", "-", "*", "/", "//", "%", "**"]
FUNCTIONS = ["sqrt", "sin", "cos", "tan", "log", "log10", "exp", "abs", "round", "min", "max", "floor", "ceil"]


def compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds("{} {} {}".format, children, st.sampled_from(OPERATORS), children),
        st.builds("{}{}".format, st.sampled_from(["-", "+", "--"]), children),
        st.builds("({})".format, children),
        st.builds(
            lambda name, args: f"{name}({', '.join(args)})", st.sampled_from(FUNCTIONS), st.lists(children, max_size=3)
        ),
    )


EXPRESSIONS = st.one_of(
    st.recursive(NUMBERS, compound, max_leaves=30),
    st.builds("{}{}".format, st.text("-+", max_size=990), NUMBERS),  # long unary chains
    st.lists(NUMBERS, min_size=2, max_size=200).map("**".join),  # power towers
    st.lists(NUMBERS, min_size=2, max_size=100).map(
        lambda n: "max(" * (len(n) - 1) + n[0] + "".join(f", {x})" for x in n[1:])
    ),
).filter(lambda expression: len(expression) <= 1000)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_calculate_answers_any_expression_with_a_number_or_a_reason(expression: str) -> None:
    result = asyncio.run(call("calculate", {"expression": expression}))
    if result.get("isError"):
        assert refusal_of(result)
    else:
        assert math.isfinite(value_of(result)["result"])


# --- convert_units -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "from_unit", "to_unit", "message"),
    [
        (1e308, "km", "mm", f"cannot convert 1e+308 km to mm: {TOO_LARGE}"),
        (-1e308, "C", "F", f"cannot convert -1e+308 C to F: {TOO_LARGE}"),
        (1, "km", "kg", "cannot convert length (km) to mass (kg)"),
        (1, "furlong", "m", "unknown unit 'furlong'"),
        (1, "C", "m", "only C, F and K convert to temperatures"),
    ],
)
async def test_convert_units_refuses_with_the_reason(value: float, from_unit: str, to_unit: str, message: str) -> None:
    arguments = {"value": value, "from_unit": from_unit, "to_unit": to_unit}
    assert message in refusal_of(await call("convert_units", arguments))


async def test_convert_units_converts() -> None:
    result = value_of(await call("convert_units", {"value": 1.5, "from_unit": "GiB", "to_unit": "MB"}))
    assert result == {"value": 1.5, "from_unit": "GiB", "to_unit": "MB", "result": 1610.612736, "quantity": "data"}


# --- time_now ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timezone", ["Mars/Olympus", "Europe", "", ".", "Europe/", "/etc/passwd", "../../etc/passwd", "a" * 5000, "\x00"]
)
async def test_time_now_refuses_what_is_not_a_zone(timezone: str) -> None:
    assert "unknown time zone" in refusal_of(await call("time_now", {"timezone": timezone}))


# --- text_stats --------------------------------------------------------------------------------------------------


async def test_text_stats_counts_ordinary_text() -> None:
    text = "It's a well-known fact... Isn't it?\nYes! 'Quoted' words -- and e-mail.\n"
    assert value_of(await call("text_stats", {"text": text})) == {
        "characters": len(text),
        "words": 11,
        "lines": 3,
        "sentences": 4,
        "reading_time_seconds": 2.8,
    }


# The expressions text_stats used before: quadratic on some texts, but the meaning of a word and a sentence end.
OLD_WORD = re.compile(r"\b\w[\w'-]*\b")
OLD_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("ab7_é\u0301'-.!? \n\t\u00a0\u2028"), max_size=30) | st.text(max_size=30))
def test_text_stats_counts_words_and_sentences_as_before(text: str) -> None:
    words = len(OLD_WORD.findall(text))
    sentences = len(OLD_SENTENCE_END.findall(text)) or (1 if words else 0)
    counted = value_of(asyncio.run(call("text_stats", {"text": text})))
    assert (counted["words"], counted["sentences"]) == (words, sentences)


CPU_SECONDS = 5  # the whole child, start-up included; a backtracking pattern needs hours on these texts
CALL_IN_A_CHILD = """
import resource, sys
seconds = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))  # past it, SIGXCPU ends the child

import asyncio, json
from tooldeck import ToolError
from tooldeck.demo import deck
from tooldeck.transports.memory import connect

async def main():
    async with connect(deck) as client:
        result = await client.call_tool("text_stats", {"text": eval(sys.argv[1])})
    print(json.dumps(result["structuredContent"]))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("text", "words", "sentences"),
    [
        # quadratic for the old sentence pattern, and for the new one without its lookbehind
        ('"." * 1_000_000 + "x"', 1, 1),  # no sentence end: the one word makes one sentence
        ('"!?" * 500_000 + "a"', 1, 1),
        # quadratic for the new word pattern without its lookbehind
        ('"-\'" * 500_000', 0, 0),
        # long runs of the characters either pattern scans
        ('"a" + "-" * 1_000_000 + "."', 1, 1),
        ('"\'" * 1_000_000 + "x"', 1, 1),
        ('"a\'" * 500_000 + "!"', 1, 1),
        ('". " * 500_000', 0, 500_000),
    ],
)
def test_text_stats_takes_linear_time_on_a_megabyte_of_adversarial_text(text: str, words: int, sentences: int) -> None:
    # In a child under a CPU-time limit: a regex holds the GIL, so no alarm or timeout in this process could stop it.
    done = subprocess.run(
        [sys.executable, "-c", CALL_IN_A_CHILD, text, str(CPU_SECONDS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode} (-24: over {CPU_SECONDS} s of CPU)\n{done.stderr[-2000:]}"
    counted = json.loads(done.stdout)
    assert (counted["characters"], counted["words"], counted["sentences"]) == (len(eval(text)), words, sentences)


# --- the calculator tool definition ----------------------------------------------------------------------------------


def test_the_shipped_calculator_definition_passes_every_check() -> None:
    # The demo registers calculator.json without checking it (to keep start-up light): this is its check.
    from pathlib import Path

    from tooldeck.manifest.changes import check_upgrade
    from tooldeck.manifest.definition import load_definition

    path = Path(deck.manager.get("calculator").source)  # type: ignore[union-attr]
    definition = load_definition(path)
    assert definition.digest == deck.manager.get("calculator").digest  # type: ignore[union-attr]
    seed = definition.document | {"version": "1.0.0", "capabilities": definition.capabilities[:2]}
    verdict = check_upgrade(seed, definition.document)  # the seed's example, grown by two capabilities
    assert (verdict.required, verdict.ok) == ("minor", True)


@pytest.mark.parametrize(
    ("name", "a", "b", "result"),
    [("add", 2, 3, 5), ("subtract", 2, 3, -1), ("multiply", 2.5, 4, 10.0), ("divide", 1, 4, 0.25)],
)
def test_calculator_capabilities(name: str, a: float, b: float, result: float) -> None:
    assert value_of(asyncio.run(call(f"calculator.{name}", {"a": a, "b": b}))) == {"result": result}


@pytest.mark.parametrize(
    ("name", "a", "b"), [("add", 1e308, 1e308), ("multiply", 1e308, 10), ("divide", 1e308, 1e-308)]
)
def test_calculator_results_beyond_a_float_are_refused_in_words(name: str, a: float, b: float) -> None:
    result = asyncio.run(call(f"calculator.{name}", {"a": a, "b": b}))
    assert refusal_of(result) == TOO_LARGE  # not "output does not match its outputSchema: inf is not a JSON number"


def test_calculator_division_by_zero_is_an_error_result() -> None:
    result = asyncio.run(call("calculator.divide", {"a": 1, "b": 0}))
    assert refusal_of(result) == "cannot divide by zero: b must not be 0"
