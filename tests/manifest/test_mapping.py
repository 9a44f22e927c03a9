"""Tests for manifest/mapping.py: a tool definition's capabilities as MCP tools, checked on the wire (tools/list and
tools/call through a schema-checked client) and on the Tool records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import client
from seeds import seed_calculator
from tooldeck import Deck
from tooldeck.manifest.definition import Definition, digest
from tooldeck.manifest.mapping import definition_tools, input_schema_of, output_schema_of


def calculator_deck() -> Deck:
    deck = Deck("calc")

    @deck.implements("calculator.add")
    def add(a: float, b: float) -> dict[str, float]:
        return {"result": a + b}

    @deck.implements("calculator.subtract")
    def subtract(a: float, b: float) -> dict[str, float]:
        return {"result": a - b}

    deck.manager.register(seed_calculator())
    return deck


def minimal(**capability: Any) -> dict[str, Any]:
    """A one-capability definition ``t.c`` whose capability has ``capability`` besides its name and description."""
    return {
        "id": "t",
        "name": "T",
        "version": "1.0.0",
        "description": "A tool",
        "capabilities": [{"name": "c", "description": "Does c", **capability}],
    }


def tools_of(document: dict[str, Any]) -> list[Any]:
    return definition_tools(Definition(document), {"t": lambda capability, **kw: kw})


async def test_the_calculator_on_the_wire() -> None:
    deck = calculator_deck()
    sha = f"sha256:{digest(seed_calculator())}"

    def expected(name: str, description: str, returns: str) -> dict[str, Any]:
        number = {"type": "number"}
        return {
            "name": f"calculator.{name}",
            "title": f"Calculator Tool: {name}",
            "description": f"{description}\n\nReturns: {returns}",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First number"},
                    "b": {"type": "number", "description": "Second number"},
                },
                "required": ["a", "b"],
                "additionalProperties": False,
            },
            "outputSchema": {"type": "object", "properties": {"result": number}},
            "_meta": {
                "tooldeck/definition": "calculator",
                "tooldeck/digest": sha,
                "tooldeck/category": "utility",
                "tooldeck/tags": ["math", "calculation"],
                "tooldeck/version": "1.0.0",
                "tooldeck/securityLevel": 1,
            },
        }

    async with client(deck) as c:
        listed = await c.request("tools/list", {})
        assert listed == {
            "tools": [
                expected("add", "Adds two numbers", "The sum of the two numbers"),
                expected("subtract", "Subtracts the second number from the first", "The result of a - b"),
            ]
        }
        result = await c.call_tool("calculator.subtract", {"a": 5, "b": 7})
        assert result == {
            "content": [{"type": "text", "text": '{"result":-2}'}],
            "structuredContent": {"result": -2},
            "isError": False,
        }
        refused = await c.call_tool("calculator.add", {"a": 1, "b": 2, "c": 3})
        assert refused == {
            "content": [
                {"type": "text", "text": "Invalid arguments for tool 'calculator.add': $: unexpected property 'c'"}
            ],
            "isError": True,
        }
        missing = await c.call_tool("calculator.add", {"a": 1})
        assert (
            missing["content"][0]["text"]
            == "Invalid arguments for tool 'calculator.add': $: missing required property 'b'"
        )


def test_every_parameter_type() -> None:
    parameters = [
        {"name": "s", "type": "string", "required": True, "description": "a string"},
        {"name": "n", "type": "number"},
        {"name": "b", "type": "boolean", "required": False},
        {"name": "o", "type": "object"},
        {"name": "l", "type": "array", "required": True},
        {"name": "x", "type": "any", "description": "anything"},
    ]
    assert input_schema_of(parameters) == {
        "type": "object",
        "properties": {
            "s": {"type": "string", "description": "a string"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "o": {"type": "object"},
            "l": {"type": "array"},
            "x": {"description": "anything"},
        },
        "required": ["s", "l"],
        "additionalProperties": False,
    }


def test_no_parameters_is_an_empty_closed_object() -> None:
    (tool,) = tools_of(minimal())
    assert tool.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert tool.output_schema is None and not tool.wraps_output
    assert tool.description == "Does c"
    assert "outputSchema" not in tool.wire


@pytest.mark.parametrize(
    ("schema", "output", "wraps"),
    [
        (None, None, False),
        ({"type": "object"}, {"type": "object"}, False),
        ({"type": "number"}, {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]},
         True),
        ({"type": "array", "items": {"type": "string"}},
         {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "string"}}},
          "required": ["result"]}, True),
        (True, {"type": "object", "properties": {"result": True}, "required": ["result"]}, True),
        ({"type": ["object", "null"]},
         {"type": "object", "properties": {"result": {"type": ["object", "null"]}}, "required": ["result"]}, True),
    ],
)  # fmt: skip
def test_return_schemas_other_than_objects_are_wrapped(schema: Any, output: Any, wraps: bool) -> None:
    assert output_schema_of(schema) == (output, wraps)


@pytest.mark.parametrize(
    ("schema", "value", "structured"),
    [
        ({"type": "number"}, 42, {"result": 42}),
        ({"type": "array", "items": {"type": "string"}}, ["a", "b"], {"result": ["a", "b"]}),
        ({"type": "string"}, "hi", {"result": "hi"}),
    ],
)
async def test_results_are_wrapped_at_call_time(schema: dict[str, Any], value: Any, structured: Any) -> None:
    deck = Deck("d")

    @deck.implements("t.c")
    def c() -> Any:
        return value

    deck.manager.register(minimal(**{"return": {"description": "a value", "schema": schema}}))
    async with client(deck) as mc:
        (listed,) = await mc.list_tools()
        assert listed["outputSchema"] == {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        assert listed["description"] == "Does c\n\nReturns: a value"
        result = await mc.call_tool("t.c")
        assert result["structuredContent"] == structured and result["isError"] is False


async def test_a_result_that_breaks_the_return_schema_is_an_error() -> None:
    deck = Deck("d")

    @deck.implements("t.c")
    def c() -> Any:
        return "not a number"

    deck.manager.register(minimal(**{"return": {"schema": {"type": "number"}}}))
    async with client(deck) as mc:
        result = await mc.call_tool("t.c")
    assert result["isError"] is True
    assert "$.result: expected number" in result["content"][0]["text"]


def test_tool_level_settings_apply_to_every_capability() -> None:
    document = minimal()
    document["capabilities"].append({"name": "d", "description": "Does d"})
    document.update(
        title="Tee",
        securityLevel=5,
        scopes=["t:read"],
        annotations={"readOnlyHint": True, "openWorldHint": False},
        icons=[{"src": "https://example.com/t.png", "mimeType": "image/png"}],
        task="optional",
    )
    for tool, capability in zip(tools_of(document), ["c", "d"], strict=True):
        assert tool.wire["title"] == f"Tee: {capability}"
        assert tool.wire["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
        assert tool.wire["icons"] == [{"src": "https://example.com/t.png", "mimeType": "image/png"}]
        assert tool.wire["execution"] == {"taskSupport": "optional"}
        assert tool.wire["_meta"]["tooldeck/securityLevel"] == 5 and tool.security_level == 5
        assert tool.wire["_meta"]["tooldeck/scopes"] == ["t:read"] and tool.scopes == ("t:read",)


def test_a_capability_overrides_the_tool() -> None:
    document = minimal(
        title="Own title",
        securityLevel=9,
        scopes=["c:write", "admin"],
        annotations={"readOnlyHint": False, "destructiveHint": True},
        icons=[{"src": "https://example.com/c.svg", "theme": "dark"}],
        task="required",
    )
    document["capabilities"].append({"name": "plain", "description": "Plain"})
    document.update(
        title="Tee",
        securityLevel=2,
        scopes=["t:read"],
        annotations={"readOnlyHint": True, "openWorldHint": False},
        icons=[{"src": "https://example.com/t.png"}],
        task="optional",
    )
    own, plain = tools_of(document)
    assert own.wire["title"] == "Own title"
    assert own.wire["annotations"] == {"readOnlyHint": False, "openWorldHint": False, "destructiveHint": True}
    assert own.wire["icons"] == [{"src": "https://example.com/c.svg", "theme": "dark"}]
    assert own.wire["execution"] == {"taskSupport": "required"}
    assert (own.security_level, own.scopes) == (9, ("c:write", "admin"))
    assert own.wire["_meta"]["tooldeck/securityLevel"] == 9
    assert own.wire["_meta"]["tooldeck/scopes"] == ["c:write", "admin"]
    assert plain.wire["title"] == "Tee: plain"
    assert plain.wire["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert (plain.security_level, plain.scopes, plain.task_support) == (2, ("t:read",), "optional")


def test_without_settings_nothing_extra_is_sent() -> None:
    (tool,) = tools_of(minimal())
    definition = tool.definition
    assert tool.wire == {
        "name": "t.c",
        "title": "T: c",
        "description": "Does c",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "_meta": {
            "tooldeck/definition": "t",
            "tooldeck/digest": f"sha256:{definition.digest}",
            "tooldeck/version": "1.0.0",
        },
    }
    assert (tool.security_level, tool.scopes, tool.task_support, tool.version) == (None, (), "forbidden", "1.0.0")


def test_metadata_other_than_category_and_tags_stays_out_of_meta() -> None:
    document = minimal()
    document["metadata"] = {"owner": "team-a", "tags": ["x"]}
    (tool,) = tools_of(document)
    assert tool.wire["_meta"]["tooldeck/tags"] == ["x"]
    assert "tooldeck/category" not in tool.wire["_meta"] and "owner" not in json.dumps(tool.wire["_meta"])


def test_each_tool_knows_its_definition() -> None:
    definition = Definition(seed_calculator())
    tools = definition_tools(definition, {"calculator": lambda capability, a, b: a})
    assert [tool.name for tool in tools] == definition.tool_names()
    assert all(tool.definition is definition for tool in tools)
