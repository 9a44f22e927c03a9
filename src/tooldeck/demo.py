"""The built-in demo deck (``tooldeck serve`` with no TARGET): small, useful tools that need no network."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

from . import Context, Deck, ToolError

deck = Deck(
    "tooldeck-demo",
    version="0.1.0",
    title="tooldeck demo",
    instructions="Offline utilities: arithmetic, unit conversion, text statistics, hashing, clocks, prime counting.",
)

# --- calculate ------------------------------------------------------------------------------------------------

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)  # floats throughout, so 9**9**9 overflows instead of computing for hours
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return float(_BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return float(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_evaluate(arg) for arg in node.args)))
    raise ToolError(f"unsupported syntax: {ast.unparse(node)!r} (numbers, + - * / // % **, {', '.join(_FUNCTIONS)})")


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False, "idempotentHint": True})
def calculate(expression: Annotated[str, {"maxLength": 1000}]) -> float:
    """Evaluate an arithmetic expression safely (no names, no code).

    Args:
        expression: e.g. "2 * (3 + 4) ** 0.5" or "sqrt(2) * pi"; functions: sqrt, sin, cos, tan, log, log10,
            exp, abs, round, min, max, floor, ceil; constants: pi, e, tau.
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an expression: {exc.msg} at column {exc.offset}") from None
    try:
        result = _evaluate(tree)
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from None
    if math.isnan(result) or math.isinf(result):
        raise ToolError(f"{expression!r} has no finite value")
    return result


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
        result = _from_kelvin(_to_kelvin(value, from_unit), to_unit)
        return Conversion(value, from_unit, to_unit, round(result, 10), "temperature")
    for unit in (from_unit, to_unit):
        if unit not in _UNITS:
            raise ToolError(f"unknown unit {unit!r}; known: {', '.join([*_UNITS, *_TEMPERATURES])}")
    (quantity, scale_from), (other, scale_to) = _UNITS[from_unit], _UNITS[to_unit]
    if quantity != other:
        raise ToolError(f"cannot convert {quantity} ({from_unit}) to {other} ({to_unit})")
    return Conversion(value, from_unit, to_unit, round(value * scale_from / scale_to, 12), quantity)


# --- text_stats ---------------------------------------------------------------------------------------------


class TextStats(TypedDict):
    characters: int
    words: int
    lines: int
    sentences: int
    reading_time_seconds: float


_WORD = re.compile(r"\b\w[\w'-]*\b")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")


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
