"""Resources, templates, prompts and completion as a client sees them: wire forms, errors, notifications."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Harness, all_pages, client
from tooldeck import Context, Deck, EmbeddedResource, Image, Message, ToolError


def make_deck(**options: Any) -> Deck:
    deck = Deck("features", **options)
    deck.add_resource("docs://readme", "Read me.", mime_type="text/plain", description="The readme")
    deck.add_resource("bin://blob", b"\x00\x01\x02", mime_type="application/octet-stream")

    @deck.resource("config://app", mime_type="application/json", annotations={"audience": ["user"], "priority": 0.5})
    def config() -> dict[str, Any]:
        return {"theme": "dark"}

    @deck.resource("dir://root")
    async def listing(ctx: Context) -> list[EmbeddedResource]:
        return [EmbeddedResource("dir://root/a", text="a"), EmbeddedResource("dir://root/b", blob=b"b")]

    @deck.resource("broken://res")
    def broken() -> str:
        raise RuntimeError("disk on fire")

    @deck.resource_template("users://{user_id}/profile", complete={"user_id": ["ada", "alan", "grace"]})
    def profile(user_id: int) -> str:
        return f"user {user_id + 1}"

    @deck.prompt(complete={"language": ["python", "perl", "rust"]})
    def review(code: str, language: str = "python") -> str:
        """Review some code.

        Args:
            code: the code.
            language: its language.
        """
        return f"Review this {language}: {code}"

    @deck.prompt
    def show(count: int) -> list[Message]:
        """Show an image."""
        return [Message("user", Image(b"\x89PNG", "image/png")), Message("assistant", f"{count} images")]

    @deck.prompt
    def failing() -> str:
        """Always fails."""
        raise ToolError("no")

    return deck


async def test_capabilities_follow_what_is_registered() -> None:
    async with client(make_deck()) as c:
        assert c.initialize_result["capabilities"] == {  # type: ignore[index]
            "logging": {},
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
        }
    bare = Deck("bare")
    async with client(bare) as c:
        assert set(c.initialize_result["capabilities"]) == {"logging", "tools"}  # type: ignore[index]
        for method in ("resources/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"):
            response = await c.request_raw(method, {})
            assert response["error"]["code"] == -32601, method


async def test_resources_list_and_templates_list() -> None:
    async with client(make_deck()) as c:
        resources = (await c.request("resources/list"))["resources"]
        by_uri = {r["uri"]: r for r in resources}
        assert by_uri["docs://readme"] == {"uri": "docs://readme", "name": "docs://readme", "description": "The readme",
                                           "mimeType": "text/plain", "size": 8}  # fmt: skip
        assert by_uri["config://app"]["annotations"] == {"audience": ["user"], "priority": 0.5}
        templates = (await c.request("resources/templates/list"))["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["users://{user_id}/profile"]


async def test_read_text_blob_json_multi_and_template() -> None:
    async with client(make_deck()) as c:
        read = await c.request("resources/read", {"uri": "docs://readme"})
        assert read == {"contents": [{"uri": "docs://readme", "mimeType": "text/plain", "text": "Read me."}]}
        blob = (await c.request("resources/read", {"uri": "bin://blob"}))["contents"][0]
        assert blob == {"uri": "bin://blob", "mimeType": "application/octet-stream", "blob": "AAEC"}
        config = (await c.request("resources/read", {"uri": "config://app"}))["contents"][0]
        assert config == {"uri": "config://app", "mimeType": "application/json", "text": '{"theme":"dark"}'}
        many = (await c.request("resources/read", {"uri": "dir://root"}))["contents"]
        assert [m["uri"] for m in many] == ["dir://root/a", "dir://root/b"]
        templated = (await c.request("resources/read", {"uri": "users://41/profile"}))["contents"][0]
        assert templated["text"] == "user 42"


@pytest.mark.parametrize("uri", ["nope://x", "users://abc/profile", "users://41/other", "docs://readme/extra"])
async def test_unknown_uris_and_templates_that_do_not_match_are_32002(uri: str) -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("resources/read", {"uri": uri})
        assert response["error"] == {"code": -32002, "message": f"Resource not found: {uri}", "data": {"uri": uri}}


async def test_a_failing_resource_is_a_masked_internal_error() -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("resources/read", {"uri": "broken://res"})
        assert response["error"]["code"] == -32603
        assert "disk on fire" not in response["error"]["message"]
        assert await c.request("ping") == {}


async def test_read_needs_a_string_uri() -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("resources/read", {"uri": 5})
        assert response["error"]["code"] == -32602 and '"uri"' in response["error"]["message"]


async def test_updates_go_only_to_subscribers() -> None:
    deck = make_deck()
    async with client(deck) as subscriber, client(deck) as bystander:
        assert await subscriber.request("resources/subscribe", {"uri": "config://app"}) == {}
        deck.notify_resource_updated("config://app")
        note = await subscriber.wait_for_notification("notifications/resources/updated")
        assert note["params"] == {"uri": "config://app"}
        await bystander.request("ping")
        assert [n for n in bystander.notifications if n["method"] == "notifications/resources/updated"] == []
        assert await subscriber.request("resources/unsubscribe", {"uri": "config://app"}) == {}
        deck.notify_resource_updated("config://app")
        await subscriber.request("ping")
        assert [n for n in subscriber.notifications if n["method"] == "notifications/resources/updated"] == []


async def test_subscribing_to_an_unknown_uri_is_32002() -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("resources/subscribe", {"uri": "ghost://x"})
        assert response["error"]["code"] == -32002
        assert await c.request("resources/subscribe", {"uri": "users://1/profile"}) == {}  # a template's URI is fine


async def test_sub_resources_reach_subscribers_of_their_parent() -> None:
    deck = make_deck()
    async with client(deck) as c:
        await c.request("resources/subscribe", {"uri": "dir://root"})
        deck.notify_resource_updated("dir://root/a")
        assert (await c.wait_for_notification("notifications/resources/updated"))["params"] == {"uri": "dir://root/a"}


async def test_list_changed_for_resources_and_prompts() -> None:
    deck = make_deck()
    async with client(deck) as c:
        deck.add_resource("docs://new", "new")
        await c.wait_for_notification("notifications/resources/list_changed")
        deck.remove_prompt("failing")
        await c.wait_for_notification("notifications/prompts/list_changed")


async def test_prompts_list_and_get() -> None:
    async with client(make_deck()) as c:
        prompts = {p["name"]: p for p in (await c.request("prompts/list"))["prompts"]}
        assert prompts["review"] == {
            "name": "review",
            "description": "Review some code.",
            "arguments": [
                {"name": "code", "description": "the code.", "required": True},
                {"name": "language", "description": "its language.", "required": False},
            ],
        }
        got = await c.request("prompts/get", {"name": "review", "arguments": {"code": "x=1"}})
        assert got == {"description": "Review some code.",
                       "messages": [{"role": "user", "content": {"type": "text", "text": "Review this python: x=1"}}]}  # fmt: skip
        shown = await c.request("prompts/get", {"name": "show", "arguments": {"count": "3"}})
        assert shown["messages"][0]["content"]["type"] == "image"
        assert shown["messages"][1] == {"role": "assistant", "content": {"type": "text", "text": "3 images"}}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": "nope"}, "Unknown prompt: nope"),
        ({"name": "review"}, "Missing required argument 'code' for prompt 'review'"),
        ({"name": "review", "arguments": {"code": "x", "extra": "y"}}, "Unknown argument 'extra'"),
        ({"name": "show", "arguments": {"count": "many"}}, "$.count"),
        ({"name": "review", "arguments": {"code": 5}}, "code"),
        ({"name": 5}, '"name"'),
    ],
)
async def test_bad_prompt_requests_are_32602(params: dict[str, Any], message: str) -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("prompts/get", params)
        assert response["error"]["code"] == -32602
        assert message in response["error"]["message"]


async def test_a_failing_prompt_is_an_internal_error() -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("prompts/get", {"name": "failing"})
        assert response["error"]["code"] == -32603


async def test_completion_for_prompts_and_templates() -> None:
    async with client(make_deck()) as c:
        done = await c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                                       "argument": {"name": "language", "value": "p"}})  # fmt: skip
        assert done == {"completion": {"values": ["python", "perl"], "total": 2, "hasMore": False}}
        done = await c.request("completion/complete", {"ref": {"type": "ref/resource", "uri": "users://{user_id}/profile"},
                                                       "argument": {"name": "user_id", "value": "a"}})  # fmt: skip
        assert done["completion"]["values"] == ["ada", "alan"]
        nothing = await c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                                          "argument": {"name": "code", "value": ""}})  # fmt: skip
        assert nothing["completion"]["values"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/prompt", "name": "ghost"}, "argument": {"name": "x", "value": ""}},
        {"ref": {"type": "ref/resource", "uri": "ghost://{x}"}, "argument": {"name": "x", "value": ""}},
        {"ref": {"type": "ref/other"}, "argument": {"name": "x", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "review"}},
        {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "code", "value": 3}},
    ],
)
async def test_bad_completion_requests_are_32602(params: dict[str, Any]) -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("completion/complete", params)
        assert response["error"]["code"] == -32602


async def test_pagination_covers_resources_and_prompts() -> None:
    deck = make_deck(page_size=2)
    async with client(deck) as c:
        uris = [r["uri"] for r in await all_pages(c, "resources/list", "resources")]
        assert len(uris) == 5 and len(set(uris)) == 5
        first = await c.request("prompts/list", {})
        assert len(first["prompts"]) == 2 and "nextCursor" in first
        resources_cursor = (await c.request("resources/list", {}))["nextCursor"]
        for bad in (first["nextCursor"] + "x", resources_cursor):  # tampered with; minted for another list
            wrong = await c.request_raw("prompts/list", {"cursor": bad})
            assert wrong["error"]["code"] == -32602


def test_sans_io_unknown_log_level_and_resource_methods_before_initialize() -> None:
    harness = Harness(make_deck())
    assert harness.request("resources/list")["error"]["code"] == -32600
    harness.initialize()
    assert harness.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    assert "resources" in harness.request("resources/list", {}, id=2)["result"]
