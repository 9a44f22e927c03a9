"""The records the testing client returns, built from wire messages."""

from __future__ import annotations

import pytest

from tooldeck.testing import PromptResult, RequestError, ResourceResult, ToolCallError, ToolResult


def test_a_tool_result_joins_its_text_blocks_and_skips_the_rest() -> None:
    raw = {"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==", "mimeType": "image/png"},
                       {"type": "text", "text": "b"}]}  # fmt: skip
    result = ToolResult(raw, None)
    assert (result.text, len(result.content), result.is_error, result.structured_content) == ("a\nb", 3, False, None)
    error = ToolCallError("draw", ToolResult({"content": [], "isError": True}, None))
    assert str(error) == "tool 'draw' reported an error: (no text content)"


@pytest.mark.parametrize(
    ("error", "method", "shown"),
    [({"code": -32602, "message": "Unknown tool: x"}, "tools/call", "tools/call failed: -32602 Unknown tool: x"),
     ({"code": -1, "message": "User rejected"}, None, "-1 User rejected")],
)  # fmt: skip
def test_a_request_error_says_which_request_failed_and_how(error: dict, method: str | None, shown: str) -> None:
    found = RequestError.from_wire(error, method)
    assert (str(found), found.code, found.message, found.data) == (shown, error["code"], error["message"], None)


def test_resource_and_prompt_results() -> None:
    read = ResourceResult({"contents": [{"uri": "a://1", "text": "one"}, {"uri": "a://2", "blob": "aGk="}]})
    assert (read.text, read.blob) == ("one", b"hi")
    prompt = PromptResult({"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}},
                                        {"role": "assistant", "content": {"type": "image", "data": "", "mimeType": "x"}}]})  # fmt: skip
    assert (prompt.text, prompt.description) == ("hello", None)
