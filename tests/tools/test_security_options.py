"""The Python-tool options of seed 002: ``@deck.tool(version=..., security_level=..., scopes=[...])``, shown in
``_meta`` of tools/list, and every bad value refused with its message."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import client
from tooldeck import Deck, RegistrationError
from tooldeck.manifest.definition import check_document
from tooldeck.security.principal import Principal


def noop(x: int) -> int:
    return x


async def test_the_options_are_shown_in_meta_on_the_wire() -> None:
    deck = Deck("d")

    @deck.tool(version="1.2.0", security_level=5, scopes=["files:read", "files:write"], meta={"com.example/k": 1})
    def read_file(path: str) -> str:
        return path

    @deck.tool(security_level=0)
    def public() -> str:
        return "ok"

    @deck.tool
    def plain() -> str:
        return "ok"

    async with client(deck) as c:
        c.session.principal = Principal("reader", scopes={"files:read", "files:write"})  # else it is not listed
        tools = {tool["name"]: tool for tool in await c.list_tools()}
    assert tools["read_file"]["_meta"] == {
        "com.example/k": 1,
        "tooldeck/version": "1.2.0",
        "tooldeck/securityLevel": 5,
        "tooldeck/scopes": ["files:read", "files:write"],
    }
    assert tools["public"]["_meta"] == {"tooldeck/securityLevel": 0}  # 0 is a level, not "unset"
    assert "_meta" not in tools["plain"]
    record = deck.tools.get("read_file")
    assert record is not None and record.meta == {"com.example/k": 1}  # the caller's meta is not changed
    assert (record.version, record.security_level, record.scopes) == ("1.2.0", 5, ("files:read", "files:write"))


def test_unset_options_are_none_or_empty() -> None:
    tool = Deck("d").add_tool(noop)
    assert (tool.version, tool.security_level, tool.scopes) == (None, None, ())


def test_scopes_may_be_a_tuple_and_an_empty_list_shows_nothing() -> None:
    assert Deck("d").add_tool(noop, scopes=("a", "b")).wire["_meta"] == {"tooldeck/scopes": ["a", "b"]}  # type: ignore[arg-type]
    assert "_meta" not in Deck("d").add_tool(noop, scopes=[]).wire


@pytest.mark.parametrize("version", ["0.0.1", "1.2.0", "2.0.0-rc.1", "1.0.0+build.7"])
def test_semantic_versions(version: str) -> None:
    assert Deck("d").add_tool(noop, version=version).wire["_meta"] == {"tooldeck/version": version}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": "1.0"}, "version must be a semantic version like '1.2.0', got '1.0'"),
        ({"version": "v1.0.0"}, "version must be a semantic version like '1.2.0', got 'v1.0.0'"),
        ({"version": 1}, "version must be a semantic version like '1.2.0', got 1"),
        ({"security_level": 11}, "security_level must be an integer from 0 to 10, got 11"),
        ({"security_level": -1}, "security_level must be an integer from 0 to 10, got -1"),
        ({"security_level": 1.5}, "security_level must be an integer from 0 to 10, got 1.5"),
        ({"security_level": True}, "security_level must be an integer from 0 to 10, got True"),
        ({"security_level": "3"}, "security_level must be an integer from 0 to 10, got '3'"),
        ({"scopes": "files:read"}, "scopes must be a list of strings, got 'files:read'"),
        ({"scopes": {"a"}}, "scopes must be a list of strings, got {'a'}"),
        ({"scopes": ["a b"]}, "'a b' is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
        ({"scopes": [""]}, "'' is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
        ({"scopes": [1]}, "1 is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
        ({"scopes": ["ok", 'a"b']},
         "'a\"b' is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
        ({"scopes": ["a\\b"]},
         "'a\\\\b' is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
        ({"scopes": ["dé"]}, "'dé' is not a scope (a non-empty string of printable ASCII without spaces or quotes)"),
    ],
)  # fmt: skip
def test_bad_values_are_refused(options: dict[str, Any], message: str) -> None:
    deck = Deck("d")
    with pytest.raises(RegistrationError) as caught:
        deck.add_tool(noop, **options)
    assert str(caught.value) == f"tool 'noop': {message}"
    assert len(deck.tools) == 0


def test_the_definition_spelling_is_not_a_python_option() -> None:
    with pytest.raises(RegistrationError) as caught:
        Deck("d").add_tool(noop, securityLevel=3)  # type: ignore[call-arg]
    assert str(caught.value) == (
        "tool: unknown option 'securityLevel' (options: annotations, ask_before_task, description, icons, "
        "immediate_response, input_schema, meta, name, output_schema, scopes, security_level, task, timeout, title, version)"
    )


@pytest.mark.parametrize(
    "scope", ["files:read", "a", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", "a b", "", "dé", 'q"', "b\\", "\t"]
)
def test_python_tools_and_definitions_accept_the_same_scopes(scope: str) -> None:
    try:
        Deck("d").add_tool(noop, scopes=[scope])
        python_accepts = True
    except RegistrationError:
        python_accepts = False
    document = {"id": "t", "name": "T", "version": "1.0.0", "description": "d", "scopes": [scope],
                "capabilities": [{"name": "c", "description": "d"}]}  # fmt: skip
    assert python_accepts == (check_document(document, "t.json") == [])
