"""Tests for manifest/handlers.py: every way to bind code to a capability, each called through a schema-checked
client, and every binding error with its message (checked at load, so that no tool fails at call time)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import client
from tooldeck import Context, Deck
from tooldeck.manifest.definition import Definition, DefinitionError
from tooldeck.manifest.handlers import bind
from tooldeck.protocol.errors import RegistrationError

A_B = [
    {"name": "a", "type": "number", "required": True, "description": "First number"},
    {"name": "b", "type": "number", "description": "Second number (0 if left out)"},
]


def calc(*, capability: dict[str, Any] | None = None, **tool: Any) -> dict[str, Any]:
    """Definition ``calc`` with the capabilities ``add`` (a required, b optional) and ``neg`` (x required)."""
    return {
        "id": "calc",
        "name": "Calc",
        "version": "1.0.0",
        "description": "Arithmetic",
        "capabilities": [
            {"name": "add", "description": "a + b", "parameters": A_B, **(capability or {})},
            {"name": "neg", "description": "-x", "parameters": [{"name": "x", "type": "number", "required": True}]},
        ],
        **tool,
    }


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory for definitions and their modules; sys.path and the modules imported from it are restored."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def definition_file(directory: Path, document: dict[str, Any]) -> Path:
    return write(directory, "calc.json", json.dumps(document))


async def call(deck: Deck, name: str, arguments: dict[str, Any]) -> str:
    """The text of a successful call's result (no return schema here: a value is sent as JSON text, a str as is)."""
    async with client(deck) as c:
        result = await c.call_tool(name, arguments)
    assert result["isError"] is False and "structuredContent" not in result, result
    (block,) = result["content"]
    return block["text"]


async def value(deck: Deck, name: str, arguments: dict[str, Any]) -> Any:
    return json.loads(await call(deck, name, arguments))


# --- the kinds of handler -------------------------------------------------------------------------------------------


async def test_implements_per_capability() -> None:
    deck = Deck("d")

    @deck.implements("calc.add")
    def add(a: float, b: float = 0) -> float:
        return a + b

    @deck.implements("calc.neg")
    async def neg(x: float) -> float:
        return -x

    deck.manager.register(calc())
    assert await value(deck, "calc.add", {"a": 2, "b": 3}) == 5
    assert await value(deck, "calc.add", {"a": 2}) == 2
    assert await value(deck, "calc.neg", {"x": 4}) == -4
    assert deck.tools.get("calc.neg").is_async is True  # type: ignore[union-attr]
    assert deck.tools.get("calc.add").is_async is False  # type: ignore[union-attr]


async def test_implements_per_tool_is_called_with_the_capability() -> None:
    deck = Deck("d")
    calls: list[tuple[str, dict[str, Any]]] = []

    @deck.implements("calc")
    def every(capability: str, **arguments: Any) -> Any:
        calls.append((capability, arguments))
        return {"add": lambda: arguments["a"] + arguments.get("b", 0), "neg": lambda: -arguments["x"]}[capability]()

    deck.manager.register(calc())
    assert await value(deck, "calc.add", {"a": 1, "b": 2}) == 3
    assert await value(deck, "calc.neg", {"x": 1}) == -1
    assert calls == [("add", {"a": 1, "b": 2}), ("neg", {"x": 1})]


async def test_a_capability_of_its_own_wins_over_the_tool_wide_one() -> None:
    deck = Deck("d")
    deck.implements("calc")(lambda capability, **kw: f"tool-wide {capability}")
    deck.implements("calc.neg")(lambda x: f"own {x}")
    deck.manager.register(calc())
    assert await call(deck, "calc.add", {"a": 1}) == "tool-wide add"
    assert await call(deck, "calc.neg", {"x": 1}) == "own 1"


async def test_module_function_per_capability_beside_the_definition(here: Path) -> None:
    write(
        here,
        "calc_ops.py",
        """
        def add(a, b=0):
            return a + b

        class Signs:
            @staticmethod
            def neg(x):
                return -x
        """,
    )
    document = calc()
    document["capabilities"][0]["handler"] = "calc_ops:add"
    document["capabilities"][1]["handler"] = "calc_ops:Signs.neg"
    deck = Deck("d")
    deck.load_manifest(definition_file(here, document))
    assert await value(deck, "calc.add", {"a": 2, "b": 5}) == 7
    assert await value(deck, "calc.neg", {"x": 2}) == -2


async def test_module_function_per_tool_in_a_package(here: Path) -> None:
    write(here, "ops/__init__.py", "")
    write(
        here,
        "ops/arith.py",
        """
        def serve(capability, a=None, b=0, x=None):
            return {"capability": capability, "value": a + b if capability == "add" else -x}
        """,
    )
    deck = Deck("d")
    deck.load_manifest(definition_file(here, calc(handler="ops.arith:serve")))
    assert await value(deck, "calc.add", {"a": 2}) == {"capability": "add", "value": 2}
    assert await value(deck, "calc.neg", {"x": 3}) == {"capability": "neg", "value": -3}


async def test_a_command_handler_end_to_end(here: Path) -> None:
    script = write(
        here,
        "calc.py",
        f"""\
        #!{sys.executable}
        import json, os, sys
        arguments = json.load(sys.stdin)
        capability = os.environ["TOOLDECK_CAPABILITY"]
        value = arguments["a"] + arguments.get("b", 0) if capability == "add" else -arguments["x"]
        json.dump({{"tool": os.environ["TOOLDECK_TOOL"], "capability": capability, "value": value}}, sys.stdout)
        """,
    )
    script.chmod(0o755)
    deck = Deck("d")
    deck.load_manifest(definition_file(here, calc(handler={"command": ["./calc.py"], "timeout": 10})))
    assert await value(deck, "calc.add", {"a": 2, "b": 40}) == {"tool": "calc", "capability": "add", "value": 42}
    assert await value(deck, "calc.neg", {"x": 1}) == {"tool": "calc", "capability": "neg", "value": -1}


LEAKY = f"""\
#!{sys.executable}
import json, os, sys
json.load(sys.stdin)
if os.environ["TOOLDECK_CAPABILITY"] == "add":
    print("PASSWORD=hunter2")  # not the integer the return schema promises
else:
    print("PASSWORD=hunter2", file=sys.stderr)
    sys.exit(1)
"""


async def test_what_a_command_writes_reaches_the_log_not_the_client(
    here: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(here, "leak.py", LEAKY).chmod(0o755)
    document = calc(handler={"command": ["./leak.py"]}, capability={"return": {"schema": {"type": "integer"}}})
    deck = Deck("d")
    deck.load_manifest(definition_file(here, document))
    async with client(deck) as c:
        added = await c.call_tool("calc.add", {"a": 1})
        negated = await c.call_tool("calc.neg", {"x": 1})
    for result, what in (
        (added, "wrote output that does not match the tool's outputSchema"),
        (negated, "exited with status 1"),
    ):
        assert result["isError"] is True and "hunter2" not in json.dumps(result)
        (block,) = result["content"]
        ref = block["text"].rpartition("ref ")[2].rstrip(")")
        assert block["text"] == f"command './leak.py' {what} (details in the server log, ref {ref})"
        (line,) = [message for message in caplog.messages if f"[ref {ref}]" in message]
        assert "PASSWORD=hunter2" in line


SCRIPT = f"#!{sys.executable}\nimport json, sys\njson.load(sys.stdin)\nprint({{answer}})\n"


async def test_a_command_changed_since_its_definition_was_loaded_is_refused_until_a_new_version(
    here: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = write(here, "answer.py", SCRIPT.format(answer=1))
    script.chmod(0o755)
    path = definition_file(here, calc(handler={"command": ["./answer.py"]}))
    deck = Deck("d")
    deck.load_manifest(path)
    async with client(deck) as c:
        assert (await c.call_tool("calc.neg", {"x": 1}))["content"] == [{"type": "text", "text": "1"}]
        script.write_text(SCRIPT.format(answer=2))  # the approved tool now runs other code: refused
        result = await c.call_tool("calc.neg", {"x": 1})
        assert result == {"content": [{"type": "text", "text": (
            "command './answer.py': answer.py changed since tool definition calc@1.0.0 was loaded; the change is "
            "served once it has a new version")}], "isError": True}  # fmt: skip
        with pytest.raises(DefinitionError, match=r"calc@1\.0\.0 was served with digest sha256:"):
            deck.load_manifest(path)  # the same version, another digest: the pin holds
        definition_file(here, calc(handler={"command": ["./answer.py"]}, version="1.0.1"))
        assert deck.load_manifest(path)[0].action == "upgraded"
        assert (await c.call_tool("calc.neg", {"x": 1}))["content"] == [{"type": "text", "text": "2"}]


async def test_a_handler_that_takes_a_context_gets_one() -> None:
    deck = Deck("d")
    seen: list[Any] = []

    @deck.implements("calc.add")
    async def add(a: float, ctx: Context, b: float = 0) -> float:
        seen.append(ctx)
        await ctx.report_progress(1, 1)
        return a + b

    deck.implements("calc.neg")(lambda x: -x)
    deck.manager.register(calc())
    assert deck.tools.get("calc.add").injected == {"ctx": Context}  # type: ignore[union-attr]
    assert await value(deck, "calc.add", {"a": 1, "b": 1}) == 2
    assert len(seen) == 1 and isinstance(seen[0], Context)


# --- binding errors -------------------------------------------------------------------------------------------------

WHERE = "/defs/calc.json: $.capabilities[0]"


def bind_add(document: dict[str, Any], bindings: dict[str, Callable[..., Any]] | None = None) -> Any:
    definition = Definition(document, source="/defs/calc.json")
    return bind(definition, 0, bindings or {}, (Context,))


def add_without_b(a: float) -> float:
    return a


def add_with_c(a: float, b: float = 0, *, c: float) -> float:
    return a


def add_requiring_b(a: float, b: float) -> float:
    return a + b


def add_positional(a: float, /, b: float = 0) -> float:
    return a


def add_args(*numbers: float, a: float, b: float = 0) -> float:
    return a


def tool_wide_without_capability(a: float = 0, b: float = 0, x: float = 0) -> float:
    return a


def tool_wide(capability: str, **arguments: Any) -> Any:
    return arguments


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (add_without_b, "add_without_b: does not take parameter 'b' of the capability (add it, or **kwargs)"),
        (add_with_c, "add_with_c: requires 'c', which is not a parameter of the capability"),
        (add_requiring_b, "add_requiring_b: requires 'b', which the capability declares optional; give it a default"),
        (add_positional,
         "add_positional: parameter 'a' is positional-only; a tool takes named arguments, so remove the '/'"),
        (add_args, "add_args: *numbers is not supported; a tool takes named arguments, so declare each one"),
        (3, "3: a handler must be callable, got int"),
    ],
)  # fmt: skip
def test_signatures_that_cannot_serve_the_capability(fn: Any, message: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        bind_add(calc(), {"calc.add": fn})
    assert str(caught.value) == f"{WHERE}: {message}"


def test_kwargs_takes_every_parameter_and_defaults_take_optional_ones() -> None:
    assert bind_add(calc(), {"calc.add": lambda **kw: kw}).fn(a=1) == {"a": 1}
    assert bind_add(calc(), {"calc.add": lambda a, b=0, extra=None: (a, b, extra)}).fn(a=1) == (1, 0, None)


def test_no_handler() -> None:
    with pytest.raises(RegistrationError) as caught:
        bind_add(calc())
    assert str(caught.value) == (
        f"{WHERE}: capability 'add' has no handler: add \"handler\" to it (or to the tool), or bind a function with "
        "@deck.implements('calc.add') before loading the definition"
    )


@pytest.mark.parametrize(
    ("document", "bindings", "which"),
    [
        (calc(capability={"handler": "calc_ops:add"}), {"calc.add": add_requiring_b}, "calc.add"),
        (calc(handler="calc_ops:add"), {"calc": tool_wide}, "calc"),
    ],
)
def test_two_handlers_for_one_capability(document: dict[str, Any], bindings: dict[str, Any], which: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        bind_add(document, bindings)
    assert str(caught.value) == (
        f"{WHERE}: {which!r} has a handler in the file and one from @deck.implements({which!r}); keep one"
    )


def test_per_tool_handler_without_capability() -> None:
    with pytest.raises(RegistrationError) as caught:
        bind_add(calc(), {"calc": tool_wide_without_capability})
    assert str(caught.value) == (
        f"{WHERE}: tool_wide_without_capability: a tool-wide handler must take the capability's name as 'capability'"
    )


def test_per_tool_handler_and_a_parameter_named_capability() -> None:
    document = calc(capability={"parameters": [{"name": "capability", "type": "string"}]})
    with pytest.raises(RegistrationError) as caught:
        bind_add(document, {"calc": tool_wide})
    assert str(caught.value) == (
        f"{WHERE}: tool_wide: a tool-wide handler receives the capability's name as 'capability', which is also a "
        "parameter; give the capability a handler of its own"
    )


def test_a_capability_may_have_a_parameter_named_capability_with_a_handler_of_its_own() -> None:
    document = calc(capability={"parameters": [{"name": "capability", "type": "string"}]})
    assert bind_add(document, {"calc.add": lambda capability=None: capability}).fn(capability="x") == "x"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module_xyz:add",
         "handler 'no_such_module_xyz:add': no module named 'no_such_module_xyz' (looked beside the definition, in "
         "{here}, and on sys.path)"),
        ("calc_ops.sub:add", "handler 'calc_ops.sub:add': no module named 'calc_ops.sub' (looked beside the "
                             "definition, in {here}, and on sys.path)"),
        ("broken_import:add", "handler 'broken_import:add': importing it failed: No module named 'nowhere_xyz'"),
        # a module whose missing import is a prefix of its own name is still an import that failed inside it
        ("broken_prefix:add", "handler 'broken_prefix:add': importing it failed: No module named 'broken'"),
        ("raising:add", "handler 'raising:add': importing it failed: RuntimeError: boom"),
        ("calc_ops:nope", "handler 'calc_ops:nope': 'calc_ops' has no attribute 'nope'"),
        ("calc_ops:Signs.nope", "handler 'calc_ops:Signs.nope': 'calc_ops' has no attribute 'Signs.nope'"),
        ("calc_ops:LIMIT", "handler 'calc_ops:LIMIT' is not a function (its type is int)"),
    ],
)  # fmt: skip
def test_module_function_errors(here: Path, reference: str, message: str) -> None:
    write(here, "calc_ops.py", "LIMIT = 3\n\nclass Signs:\n    pass\n\ndef add(a, b=0):\n    return a + b\n")
    write(here, "broken_import.py", "import nowhere_xyz\n")
    write(here, "broken_prefix.py", "import broken\n")
    write(here, "raising.py", "raise RuntimeError('boom')\n")
    definition = Definition(calc(capability={"handler": reference}), source=str(here / "calc.json"))
    with pytest.raises(RegistrationError) as caught:
        bind(definition, 0, {}, (Context,))
    assert str(caught.value) == f"{here / 'calc.json'}: $.capabilities[0].handler: {message.format(here=here)}"


def test_a_missing_command_is_refused_at_load(here: Path) -> None:
    definition = Definition(calc(handler={"command": ["./missing.py"]}), source=str(here / "calc.json"))
    with pytest.raises(RegistrationError, match=r"calc\.json: \$\.handler: command '\./missing\.py'"):
        bind(definition, 0, {}, (Context,))


def test_the_manager_reports_a_binding_error_as_a_problem_of_the_file(here: Path) -> None:
    path = definition_file(here, calc(capability={"handler": "calc_ops:add"}))
    deck = Deck("d")
    with pytest.raises(DefinitionError) as caught:
        deck.load_manifest(path)
    assert [problem.to_json() for problem in caught.value.problems] == [
        {
            "file": str(path),
            "path": "$.capabilities[0].handler",
            "message": f"handler 'calc_ops:add': no module named 'calc_ops' (looked beside the definition, in {here}, "
            "and on sys.path)",
        },
        {  # every capability that cannot be bound is listed, not only the first
            "file": str(path),
            "path": "$.capabilities[1]",
            "message": "capability 'neg' has no handler: add \"handler\" to it (or to the tool), or bind a function "
            "with @deck.implements('calc.neg') before loading the definition",
        },
    ]
    assert list(deck.tools) == [] and "calc" not in deck.manager
