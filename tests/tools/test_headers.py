"""``x-mcp-header`` annotations (2026-07-28, SEP-2243), checked when a tool is registered: what is accepted and listed
for the HTTP transport, and each rule a refused tool breaks, named with the tool and the JSON path."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import client
from tooldeck import Deck, RegistrationError
from tooldeck.tools.headers import MirroredParam


def echo(**arguments: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(arguments.items()))


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def register(input_schema: dict[str, Any], deck: Deck | None = None) -> Any:
    return (deck or Deck("d")).add_tool(echo, name="deploy", input_schema=input_schema)


def test_annotated_parameters_are_listed_once_with_their_header_path_and_type() -> None:
    tool = register(schema(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        dry_run={"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
        target={"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone_1.a~"}}},
        note={"type": "string"},
    ))  # fmt: skip
    assert [(p.header, p.key, p.path, p.type) for p in tool.mirrored] == [
        ("Mcp-Param-Region", b"mcp-param-region", ("region",), "string"),
        ("Mcp-Param-Count", b"mcp-param-count", ("count",), "integer"),
        ("Mcp-Param-Dry-Run", b"mcp-param-dry-run", ("dry_run",), "boolean"),
        ("Mcp-Param-Zone_1.a~", b"mcp-param-zone_1.a~", ("target", "zone"), "string"),
    ]
    # the schema is advertised as given, annotations included
    assert tool.wire["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"


def test_tools_without_annotations_have_none_and_lookalikes_are_not_annotations() -> None:
    deck = Deck("d")

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    assert deck.tools.get("add").mirrored == ()  # type: ignore[union-attr]
    # a property *named* x-mcp-header, and data that holds the key, are not annotations
    tool = register(schema(**{"x-mcp-header": {"type": "string"}},
                           config={"type": "object", "default": {"x-mcp-header": "Nope"},
                                   "examples": [{"x-mcp-header": "No"}]},
                           mode={"enum": [{"x-mcp-header": "Never"}]}))  # fmt: skip
    assert tool.mirrored == ()


def test_a_refused_tool_is_not_registered_and_the_decks_other_tools_keep_serving() -> None:
    deck = Deck("d")

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(RegistrationError) as refused:
        register(schema(size={"type": "number", "x-mcp-header": "Size"}), deck)
    assert str(refused.value) == (
        "tool 'deploy': inputSchema $.properties.size[\"x-mcp-header\"]: x-mcp-header is only allowed on a property "
        "of \"type\" string, integer or boolean (not number), and this one's type is 'number'"
    )
    assert [t.name for t in deck.tools] == ["add"]


async def test_after_a_refusal_the_deck_still_serves_its_tools() -> None:
    deck = Deck("d")

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(RegistrationError):
        register(schema(region={"type": "string", "x-mcp-header": "Bad Name"}), deck)
    async with client(deck) as c:
        assert [t["name"] for t in await c.list_tools()] == ["add"]
        assert (await c.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}


TOKEN = "must be a non-empty RFC 9110 token"
TYPE = 'only allowed on a property of "type" string, integer or boolean'
PATH = 'only allowed on a property reached from the root through "properties" alone'


@pytest.mark.parametrize(
    ("input_schema", "where", "rule"),
    [
        # the value: a non-empty token, no CR/LF
        (schema(r={"type": "string", "x-mcp-header": ""}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": "Re gion"}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": "Region\r\n"}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": "Régión"}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": "a:b"}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": 5}), '$.properties.r["x-mcp-header"]', TOKEN),
        (schema(r={"type": "string", "x-mcp-header": None}), '$.properties.r["x-mcp-header"]', TOKEN),
        # unique, case-insensitively
        (schema(a={"type": "string", "x-mcp-header": "Region"}, b={"type": "string", "x-mcp-header": "REGION"}),
         '$.properties.b["x-mcp-header"]', "'REGION' is already used at $.properties.a[\"x-mcp-header\"]"),
        (schema(a={"type": "string", "x-mcp-header": "Zone"},
                t={"type": "object", "properties": {"z": {"type": "string", "x-mcp-header": "zone"}}}),
         '$.properties.t.properties.z["x-mcp-header"]', "(header names are case-insensitive)"),
        # string, integer or boolean only
        (schema(r={"type": "number", "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"type": "object", "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"type": "array", "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"type": ["string", "integer"], "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"type": ["number", "null"], "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        (schema(r={"type": "null", "x-mcp-header": "R"}), '$.properties.r["x-mcp-header"]', TYPE),
        # reached through properties alone
        ({"type": "object", "x-mcp-header": "Root"}, '$["x-mcp-header"]', PATH),
        (schema(l={"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}),
         '$.properties.l.items["x-mcp-header"]', PATH),
        (schema(l={"type": "array", "prefixItems": [{"type": "string", "x-mcp-header": "I"}]}),
         '$.properties.l.prefixItems[0]["x-mcp-header"]', PATH),
        (schema(r={"anyOf": [{"type": "string", "x-mcp-header": "A"}, {"type": "integer"}]}),
         '$.properties.r.anyOf[0]["x-mcp-header"]', PATH),
        (schema(r={"oneOf": [{"type": "string", "x-mcp-header": "O"}]}), '$.properties.r.oneOf[0]["x-mcp-header"]',
         PATH),
        ({"type": "object", "allOf": [schema(r={"type": "string", "x-mcp-header": "A"})]},
         '$.allOf[0].properties.r["x-mcp-header"]', PATH),
        (schema(r={"type": "string", "not": {"type": "string", "x-mcp-header": "N"}}),
         '$.properties.r.not["x-mcp-header"]', PATH),
        ({"type": "object", "if": schema(a={"const": 1}), "then": schema(r={"type": "string", "x-mcp-header": "T"})},
         '$.then.properties.r["x-mcp-header"]', PATH),
        ({"type": "object", "else": schema(r={"type": "string", "x-mcp-header": "E"})},
         '$.else.properties.r["x-mcp-header"]', PATH),
        ({"type": "object", "properties": {"r": {"$ref": "#/$defs/region"}},
          "$defs": {"region": {"type": "string", "x-mcp-header": "Region"}}},
         '$["$defs"].region["x-mcp-header"]', PATH),
        ({"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "More"}},
         '$.additionalProperties["x-mcp-header"]', PATH),
        ({"type": "object", "patternProperties": {"^x": {"type": "string", "x-mcp-header": "P"}}},
         '$.patternProperties["^x"]["x-mcp-header"]', PATH),
        (schema(o={"type": "object", "additionalProperties": schema(r={"type": "string", "x-mcp-header": "D"})}),
         '$.properties.o.additionalProperties.properties.r["x-mcp-header"]', PATH),
    ],
)  # fmt: skip
def test_each_rule_refuses_the_tool_naming_it_the_path_and_the_rule(
    input_schema: dict[str, Any], where: str, rule: str
) -> None:
    deck = Deck("d")
    with pytest.raises(RegistrationError) as refused:
        register(input_schema, deck)
    message = str(refused.value)
    assert message.startswith(f"tool 'deploy': inputSchema {where}: "), message
    assert rule in message
    assert len(deck.tools) == 0


def test_a_mirrored_param_is_a_plain_record() -> None:
    assert MirroredParam("Region", ("region",), "string") == MirroredParam("Region", ("region",), "string")
    assert MirroredParam("Region", ("region",), "string").key == b"mcp-param-region"
