"""The built-in demo deck (``tooldeck serve`` with no TARGET): small, useful tools that need no network."""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, TypedDict

from . import Context, Deck, ToolError

deck = Deck(
    "tooldeck-demo",
    version="0.1.0",
    title="tooldeck demo",
    instructions="Offline utilities: arithmetic, unit conversion, text statistics, hashing, clocks, prime counting.",
)

# --- calculate ------------------------------------------------------------------------------------------------
# The expression is parsed by Python's own parser and evaluated over floats without recursion: nothing under the
# 1000-character limit can nest deep enough to exhaust a stack, and no float operation takes long (9**9**9
# overflows instead of computing for hours). Whatever cannot be evaluated is a ToolError that says why.

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: math.pow,  # not operator.pow: (-8) ** (1/3) is complex there, a domain error here
}
_UNARY: dict[type, Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _round(x: float, digits: float = 0.0) -> float:
    if not digits.is_integer():
        raise _Refusal(f"round() takes a whole number of digits, got {_number(digits)}")
    return round(x, int(digits))  # round(x, 0), not round(x): a float, so round(1e308) builds no big int


# name -> (function, fewest arguments, most arguments or None for any number)
_FUNCTIONS: dict[str, tuple[Callable[..., float], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "log": (math.log, 1, 2),
    "log10": (math.log10, 1, 1),
    "exp": (math.exp, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 2, None),
    "max": (max, 2, None),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_GRAMMAR = f"numbers, + - * / // % **, ( ), {', '.join(_FUNCTIONS)}, {', '.join(_CONSTANTS)}"


def _arity(name: str) -> str:
    _, fewest, most = _FUNCTIONS[name]
    if most is None:
        return f"at least {fewest} arguments"
    if fewest == most:
        return f"{fewest} argument{'s' if fewest > 1 else ''}"
    return f"{fewest} or {most} arguments"


def _quote(source: str, node: ast.AST) -> str:
    """The node's source text, quoted and shortened for a message (ast.unparse would recurse through a deep node)."""
    text = ast.get_source_segment(source, node) or type(node).__name__
    return repr(text if len(text) <= 80 else f"{text[:77]}...")


def _cannot(source: str, node: ast.AST, reason: object) -> ToolError:
    whole = ast.get_source_segment(source, node) == source.strip()
    return ToolError(f"cannot evaluate {source!r}: {reason}{'' if whole else f' in {_quote(source, node)}'}")


RANGE = "numbers must stay within about ±1.8e308"
TOO_LARGE = f"the result is too large to represent ({RANGE})"


def _finite(result: float, doing: str = "") -> float:
    """``result``, or a ToolError saying it is too large (1e308 km in mm; JSON has no infinity to answer with)."""
    if not math.isfinite(result):
        raise ToolError(f"{doing}: {TOO_LARGE}" if doing else TOO_LARGE)
    return result


class _Refusal(ValueError):
    """A function's own refusal, worded for the user (the math module's "math domain error" is not)."""


def _literal(value: float) -> float:
    try:
        number = float(value)
    except OverflowError:  # an int beyond a float
        number = math.inf
    if math.isinf(number):  # 1e999
        raise _Refusal(f"the number is too large to represent ({RANGE})")
    return number


def _number(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 1e16 else f"{x:.6g}"


def _why(node: ast.AST, args: list[float], exc: Exception) -> str:
    """Why ``node`` could not be evaluated from ``args``, in words (never Python's "(34, 'Numerical result out of
    range')", "math domain error" or "float modulo")."""
    if isinstance(exc, OverflowError):
        return TOO_LARGE
    if isinstance(exc, _Refusal):
        return str(exc)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return f"{node.func.id}() is not defined for {', '.join(map(_number, args))}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        if args[0] == 0:
            return "0 to a negative power is not defined (it would divide by zero)"
        base, exponent = map(_number, args)
        return f"a negative number to a fractional power ({base}) ** {exponent} has no real value"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return "modulo by zero (the remainder of a division by 0)"
    return "division by zero"


def _step(source: str, node: ast.AST) -> tuple[Callable[..., float], list[ast.expr]]:
    """How to evaluate an allowed ``node``: a function of its operands' values, and those operands; ToolError for
    anything else."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return functools.partial(_literal, node.value), []  # a huge int fails when it is evaluated
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)], [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)], [node.operand]
    elif isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return functools.partial(float, _CONSTANTS[node.id]), []
        raise _cannot(source, node, f"unknown name {node.id!r} (constants: {', '.join(_CONSTANTS)})")
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name not in _FUNCTIONS:
            raise _cannot(source, node, f"unknown function {name!r} (functions: {', '.join(_FUNCTIONS)})")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise _cannot(source, node, f"{name}() takes plain arguments (no name=, no *)")
        function, fewest, most = _FUNCTIONS[name]
        if len(node.args) < fewest or (most is not None and len(node.args) > most):
            raise _cannot(source, node, f"{name}() takes {_arity(name)}, got {len(node.args)}")
        return lambda *args: float(function(*args)), list(node.args)  # floor and ceil return ints
    raise ToolError(f"unsupported syntax: {_quote(source, node)} (allowed: {_GRAMMAR})")


def _evaluate(source: str, tree: ast.Expression) -> float:
    """Post-order over an explicit stack, so the depth of the tree costs no Python frames."""
    values: list[float] = []
    # (node, None, 0) until its operands are queued, then (node, its function, how many operands it takes)
    todo: list[tuple[ast.AST, Callable[..., float] | None, int]] = [(tree.body, None, 0)]
    while todo:
        node, function, count = todo.pop()
        if function is None:
            function, operands = _step(source, node)
            todo.append((node, function, len(operands)))
            todo.extend((operand, None, 0) for operand in reversed(operands))
            continue
        args = values[len(values) - count :]
        del values[len(values) - count :]
        try:
            value = function(*args)
        except (ArithmeticError, ValueError) as exc:  # division by zero, overflow, a math domain error
            raise _cannot(source, node, _why(node, args, exc)) from None
        if math.isinf(value):  # 1e308 * 10 overflows without an exception: refused where it happens
            raise _cannot(source, node, TOO_LARGE)
        values.append(value)
    return values[0]


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True})
def calculate(expression: Annotated[str, {"maxLength": 1000}]) -> float:
    """Evaluate an arithmetic expression safely (no names, no code).

    Args:
        expression: e.g. "2 * (3 + 4) ** 0.5" or "sqrt(2) * pi"; functions: sqrt, sin, cos, tan, log (x[, base]),
            log10, exp, abs, round (x[, digits]), min and max (of two or more), floor, ceil; constants: pi, e, tau.
    """
    source = expression.lstrip()  # leading spaces are no "unexpected indent" here
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an expression: {_syntax(expression, exc)}") from None
    except (ValueError, RecursionError, MemoryError):  # a parser stack exhausted
        raise ToolError("not an expression: it is nested too deeply") from None
    return _evaluate(source, tree)  # finite: every step refuses infinity where it happens


def _syntax(expression: str, exc: SyntaxError) -> str:
    """A SyntaxError in words, its place as a column counted from 1 over the whole expression (newlines count as
    one character), or as the end of the expression where Python's parser reports column 0."""
    if not expression.strip():
        return "the expression is empty; give one like '2 * (3 + 4)'"
    if exc.msg.startswith("Exceeds the limit"):  # the int-to-string guard: a literal of more than 4300 digits
        return f"a number has more than 4300 digits; {RANGE}"
    if exc.offset is None or exc.lineno is None:  # null bytes
        return "the expression contains a null character (\\x00)"
    if exc.offset < 1:
        return f"unexpected end of expression after {_shorten(expression.rstrip(), tail=True)!r}"
    source = expression.lstrip()
    lines = source.split("\n")
    column = len(expression) - len(source) + sum(len(line) + 1 for line in lines[: exc.lineno - 1]) + exc.offset
    message = exc.msg.removesuffix(". Perhaps you forgot a comma?")
    return f"{message} at column {column} (counting from 1), at {_shorten(expression[column - 1 :])!r}"


def _shorten(text: str, *, tail: bool = False) -> str:
    if len(text) <= 20:
        return text
    return f"...{text[-17:]}" if tail else f"{text[:17]}..."


# --- convert_units -------------------------------------------------------------------------------------------

_UNITS: dict[str, tuple[str, float]] = {
    # length, in metres
    "mm": ("length", 0.001),
    "cm": ("length", 0.01),
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "in": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "yd": ("length", 0.9144),
    "mi": ("length", 1609.344),
    # mass, in kilograms
    "mg": ("mass", 1e-6),
    "g": ("mass", 0.001),
    "kg": ("mass", 1.0),
    "t": ("mass", 1000.0),
    "oz": ("mass", 0.028349523125),
    "lb": ("mass", 0.45359237),
    # time, in seconds
    "ms": ("time", 0.001),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "d": ("time", 86400.0),
    # data, in bytes
    "B": ("data", 1.0),
    "KB": ("data", 1e3),
    "MB": ("data", 1e6),
    "GB": ("data", 1e9),
    "TB": ("data", 1e12),
    "KiB": ("data", 1024.0),
    "MiB": ("data", 1024.0**2),
    "GiB": ("data", 1024.0**3),
    "TiB": ("data", 1024.0**4),
}
_TEMPERATURES = ("C", "F", "K")


@dataclass
class Conversion:
    value: float
    from_unit: str
    to_unit: str
    result: float
    quantity: str


def _to_kelvin(value: float, unit: str) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[unit]


def _from_kelvin(value: float, unit: str) -> float:
    return {"C": value - 273.15, "F": (value - 273.15) * 9 / 5 + 32, "K": value}[unit]


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True})
def convert_units(value: float, from_unit: str, to_unit: str) -> Conversion:
    """Convert a value between units of length, mass, time, data size or temperature.

    Args:
        value: the amount to convert.
        from_unit: unit of ``value``: mm cm m km in ft yd mi | mg g kg t oz lb | ms s min h d |
            B KB MB GB TB KiB MiB GiB TiB | C F K.
        to_unit: unit to convert to, of the same quantity.
    """
    if from_unit in _TEMPERATURES or to_unit in _TEMPERATURES:
        if from_unit not in _TEMPERATURES or to_unit not in _TEMPERATURES:
            raise ToolError(f"cannot convert {from_unit} to {to_unit}: only C, F and K convert to temperatures")
        result = round(_from_kelvin(_to_kelvin(value, from_unit), to_unit), 10)
        return Conversion(
            value,
            from_unit,
            to_unit,
            _finite(result, f"cannot convert {value!r} {from_unit} to {to_unit}"),
            "temperature",
        )
    for unit in (from_unit, to_unit):
        if unit not in _UNITS:
            raise ToolError(f"unknown unit {unit!r}; known: {', '.join([*_UNITS, *_TEMPERATURES])}")
    (quantity, scale_from), (other, scale_to) = _UNITS[from_unit], _UNITS[to_unit]
    if quantity != other:
        raise ToolError(f"cannot convert {quantity} ({from_unit}) to {other} ({to_unit})")
    result = round(value * scale_from / scale_to, 12)
    return Conversion(
        value, from_unit, to_unit, _finite(result, f"cannot convert {value!r} {from_unit} to {to_unit}"), quantity
    )


# --- text_stats ---------------------------------------------------------------------------------------------


class TextStats(TypedDict):
    characters: int
    words: int
    lines: int
    sentences: int
    reading_time_seconds: float


# Both patterns run in linear time on any text: each can start only where a run of its characters starts (the
# lookbehind), so no run is rescanned from every position inside it, as `[.!?]+(?:\s|$)` did (quadratic: 32000 dots
# and an "x" took seconds). A word is a run of word characters, apostrophes and hyphens holding a word character.
_WORD = re.compile(r"(?<![\w'-])['-]*\w[\w'-]*")
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]+(?=\s|\Z)")


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True})
def text_stats(text: str) -> TextStats:
    """Count characters, words, lines and sentences in a text, and estimate its reading time (238 words/min)."""
    words = len(_WORD.findall(text))
    sentences = len(_SENTENCE_END.findall(text)) or (1 if words else 0)
    return TextStats(
        characters=len(text),
        words=words,
        lines=text.count("\n") + 1 if text else 0,
        sentences=sentences,
        reading_time_seconds=round(words / 238 * 60, 1),
    )


# --- hash_text ----------------------------------------------------------------------------------------------


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True})
def hash_text(text: str, algorithm: Literal["md5", "sha1", "sha256", "sha512", "blake2b"] = "sha256") -> str:
    """Hex digest of the UTF-8 bytes of a text.

    Args:
        text: the text to hash.
        algorithm: hash function to use.
    """
    import hashlib  # loads OpenSSL: only when a hash is asked for

    return hashlib.new(algorithm, text.encode()).hexdigest()


# --- time_now -----------------------------------------------------------------------------------------------


@dataclass
class TimeInfo:
    timezone: str
    iso: str
    weekday: str
    utc_offset: str
    unix: float


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def time_now(timezone: str = "UTC") -> TimeInfo:
    """The current date and time in an IANA time zone.

    Args:
        timezone: e.g. "UTC", "Europe/Paris", "America/New_York".
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {timezone!r}; use an IANA name like 'Europe/Paris'") from None
    now = datetime.now(zone)
    offset = now.strftime("%z")
    return TimeInfo(timezone, now.isoformat(), now.strftime("%A"), f"{offset[:3]}:{offset[3:]}", now.timestamp())


# --- count_primes (long-running, with progress) ---------------------------------------------------------------


@dataclass
class PrimeCount:
    limit: int
    count: int
    largest: int | None


_SEGMENT = 1 << 18


@deck.tool(
    annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True},
    task="optional",
    immediate_response="Counting primes in the background; the count arrives when the task completes.",
)
async def count_primes(limit: Annotated[int, {"minimum": 2, "maximum": 200_000_000}], ctx: Context) -> PrimeCount:
    """Count the primes up to a limit with a segmented sieve, reporting progress (takes seconds for 10^8).

    Args:
        limit: count primes p <= limit.
    """
    import asyncio  # here, not at the top: `tooldeck serve` answers initialize before the event loop is loaded

    root = math.isqrt(limit)
    small = bytearray([1]) * (root + 1)
    small[:2] = b"\x00\x00"
    for i in range(2, math.isqrt(root) + 1):
        if small[i]:
            small[i * i :: i] = bytes(len(range(i * i, root + 1, i)))
    base = [i for i in range(2, root + 1) if small[i]]
    count, largest = 0, None
    for low in range(0, limit + 1, _SEGMENT):
        high = min(low + _SEGMENT, limit + 1)
        segment = bytearray([1]) * (high - low)
        for p in base:
            start = max(p * p, (low + p - 1) // p * p)
            if start >= high:
                break
            segment[start - low :: p] = bytes(len(range(start, high, p)))
        for i in range(max(0, 2 - low)):
            segment[i] = 0
        found = segment.count(1)
        if found:
            count += found
            largest = low + segment.rindex(1)
        await ctx.report_progress(high - 1, limit, f"{count} primes up to {high - 1}")
        await asyncio.sleep(0)  # let other requests (and cancellation) in between segments
    return PrimeCount(limit, count, largest)


# --- calculator: a tool definition file (seed 002) served through the tool manager ----------------------------------
# calculator.json is the specification's example calculator (add, subtract) with multiply and divide added, hence
# version 1.1.0. Each capability is bound with @deck.implements; the file's tools are calculator.add and so on.


@deck.implements("calculator.add")
def _add(a: float, b: float) -> dict[str, float]:
    return {"result": _finite(a + b)}


@deck.implements("calculator.subtract")
def _subtract(a: float, b: float) -> dict[str, float]:
    return {"result": _finite(a - b)}


@deck.implements("calculator.multiply")
def _multiply(a: float, b: float) -> dict[str, float]:
    return {"result": _finite(a * b)}


@deck.implements("calculator.divide")
def _divide(a: float, b: float) -> dict[str, float]:
    if b == 0:
        raise ToolError("cannot divide by zero: b must not be 0")
    return {"result": _finite(a / b)}


def _serve_calculator() -> None:
    import os

    import orjson

    from .manifest.definition import Definition

    path = os.path.join(os.path.dirname(__file__), "calculator.json")
    with open(path, "rb") as file:
        # Shipped with tooldeck and checked by its tests (tests/test_demo.py), so it is taken as checked: the
        # format's validator and the semver library stay out of `tooldeck serve`'s start-up.
        deck.manager.register(Definition(orjson.loads(file.read()), source=path))


_serve_calculator()
