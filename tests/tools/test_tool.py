"""Registration rules: names, duplicates, annotations, icons, task support, schema overrides."""

from __future__ import annotations

from typing import Any

import pytest

from tooldeck import Context, Deck, RegistrationError
from tooldeck.model.metadata import is_async


def noop() -> None:
    return None


@pytest.mark.parametrize("name", ["getUser", "DATA_EXPORT_v2", "admin.tools.list", "a", "x" * 128, "with-dash"])
def test_valid_names(name: str) -> None:
    deck = Deck("d")
    assert deck.add_tool(noop, name=name).name == name


@pytest.mark.parametrize("name", ["", "x" * 129, "has space", "comma,", "slash/name", "ünïcode", "tab\t"])
def test_invalid_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(RegistrationError, match="use 1-128 characters from A-Z a-z 0-9 _ - ."):
        Deck("d").add_tool(noop, name=name)


def test_lambda_without_a_name_is_refused() -> None:
    with pytest.raises(RegistrationError, match="invalid tool name '<lambda>'"):
        Deck("d").add_tool(lambda: None)


def test_duplicates_are_refused_and_names_are_case_sensitive() -> None:
    deck = Deck("d")
    deck.add_tool(noop, name="tool")
    with pytest.raises(RegistrationError, match="'tool' is already registered"):
        deck.add_tool(noop, name="tool")
    deck.add_tool(noop, name="Tool")
    assert [t.name for t in deck.tools] == ["tool", "Tool"]


def test_remove_unknown_tool() -> None:
    with pytest.raises(RegistrationError, match="no tool named 'ghost'"):
        Deck("d").remove_tool("ghost")


def test_decorator_forms_return_the_function_unchanged() -> None:
    deck = Deck("d")

    @deck.tool
    def plain(x: int) -> int:
        return x

    @deck.tool(name="named", title="Named tool")
    def other(x: int) -> int:
        return x

    assert plain(2) == 2 and other(3) == 3
    assert deck.tools.get("named").title == "Named tool"  # type: ignore[union-attr]


def test_wire_form_carries_every_field() -> None:
    deck = Deck("d")
    tool = deck.add_tool(
        noop,
        name="full",
        title="Full",
        description="Does everything.",
        annotations={"read_only_hint": True, "openWorldHint": False, "title": "Full (annotated)"},
        icons=[
            {
                "src": "data:image/svg+xml;base64,PHN2Zy8+",
                "mime_type": "image/svg+xml",
                "sizes": ["any"],
                "theme": "dark",
            }
        ],
        task="optional",
        meta={"com.example/owner": "team-a"},
    )
    assert tool.wire == {
        "name": "full",
        "title": "Full",
        "description": "Does everything.",
        "inputSchema": {"type": "object", "additionalProperties": False},
        "annotations": {"readOnlyHint": True, "openWorldHint": False, "title": "Full (annotated)"},
        "icons": [
            {
                "src": "data:image/svg+xml;base64,PHN2Zy8+",
                "mimeType": "image/svg+xml",
                "sizes": ["any"],
                "theme": "dark",
            }
        ],
        "execution": {"taskSupport": "optional"},
        "_meta": {"com.example/owner": "team-a"},
    }


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"annotations": {"readonly": True}}, "unknown annotation 'readonly'"),
        ({"annotations": {"readOnlyHint": "yes"}}, "must be a bool"),
        ({"annotations": ["readOnlyHint"]}, "annotations must be a dict"),
        ({"icons": [{"src": "javascript:alert(1)"}]}, "https:, http: or data:"),
        ({"icons": [{"src": "file:///etc/passwd"}]}, "https:, http: or data:"),
        ({"icons": [{"href": "https://x"}]}, "string 'src'"),
        ({"icons": [{"src": "https://x/i.png", "size": "48"}]}, "unknown key 'size'"),
        ({"icons": [{"src": "https://x/i.png", "theme": "blue"}]}, "'light' or 'dark'"),
        ({"icons": [{"src": "https://x/i.png", "sizes": "48x48"}]}, "list of strings"),
        ({"task": "sometimes"}, "task must be one of forbidden, optional, required"),
        ({"output_schema": {"type": "array"}}, 'outputSchema must be a JSON Schema object with "type": "object"'),
        (
            {"output_schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}},
            "outputSchema is not usable",
        ),
        ({"output_schema": "yes"}, "output_schema must be a dict"),
    ],
)
def test_bad_options_are_refused_with_what_to_fix(options: dict[str, Any], text: str) -> None:
    with pytest.raises(RegistrationError) as info:
        Deck("d").add_tool(noop, name="t", **options)
    assert text in str(info.value)


def test_unsupported_parameter_types_name_the_tool() -> None:
    class Opaque:
        pass

    def uses(thing: Opaque) -> None:
        return None

    with pytest.raises(RegistrationError, match="tool 'uses'"):
        Deck("d").add_tool(uses)


def test_context_is_injected_and_not_in_the_schema() -> None:
    def with_ctx(query: str, ctx: Context) -> str:
        return query

    tool = Deck("d").add_tool(with_ctx)
    assert tool.injected == {"ctx": Context}
    assert list(tool.input_schema["properties"]) == ["query"]


def test_output_schema_can_be_turned_off_or_replaced() -> None:
    deck = Deck("d")

    def answer() -> int:
        return 42

    assert deck.add_tool(answer, name="plain", output_schema=False).output_schema is None
    custom = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert deck.add_tool(answer, name="custom", output_schema=custom).wire["outputSchema"] == custom


@pytest.mark.parametrize("page_size", [0, -1, True, 2.5])
def test_bad_page_size(page_size: Any) -> None:
    with pytest.raises(RegistrationError, match="page_size"):
        Deck("d", page_size=page_size)


def test_bad_deck_options() -> None:
    with pytest.raises(RegistrationError, match="non-empty name"):
        Deck("")
    with pytest.raises(RegistrationError, match="log_level"):
        Deck("d", log_level="loud")


def test_an_explicit_input_schema_is_advertised_and_enforced_as_given() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 2}},
        "required": ["q"],
    }

    def search(**arguments: str) -> str:
        return arguments["q"]

    tool = Deck("d").add_tool(search, input_schema=schema)
    assert tool.wire["inputSchema"] is schema
    assert tool.converters == {}
    assert tool.input_validator.is_valid({"q": "ok"})
    assert tool.input_validator.errors({"q": "x"}) == ['$.q: expected at least 2 characters, got "x"']


def test_an_explicit_input_schema_must_be_valid() -> None:
    with pytest.raises(RegistrationError, match="inputSchema is not usable"):
        Deck("d").add_tool(noop, name="t", input_schema={"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(RegistrationError, match="unsupported JSON Schema dialect"):
        Deck("d").add_tool(noop, name="u", input_schema={"$schema": "https://example.com/mine", "type": "object"})


def test_is_async() -> None:
    async def coroutine() -> None: ...

    def plain() -> None: ...

    class AsyncCallable:
        async def __call__(self) -> None: ...

    class SyncCallable:
        def __call__(self) -> None: ...

    assert is_async(coroutine) and is_async(AsyncCallable())
    assert not is_async(plain) and not is_async(SyncCallable())
