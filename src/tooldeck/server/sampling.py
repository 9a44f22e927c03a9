"""Sampling (spec: client/sampling): the params of a ``sampling/createMessage`` request and the checked result."""

from __future__ import annotations

from typing import Any

from ..protocol.errors import ClientRequestError


def sampling_params(messages: Any, max_tokens: int, capabilities: dict[str, Any], **options: Any) -> dict[str, Any]:
    sampling = capabilities.get("sampling")
    if not isinstance(sampling, dict):
        raise ClientRequestError("the client does not support sampling (it did not declare the capability)")
    if options.get("tools") is not None and "tools" not in sampling:
        raise ClientRequestError("the client does not support tools in sampling requests")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
    wire = [m.to_wire() if hasattr(m, "to_wire") else m for m in messages]
    params: dict[str, Any] = {"messages": wire, "maxTokens": max_tokens}
    names = {"system_prompt": "systemPrompt", "temperature": "temperature", "stop_sequences": "stopSequences",
             "model_preferences": "modelPreferences", "include_context": "includeContext", "metadata": "metadata",
             "tools": "tools", "tool_choice": "toolChoice"}  # fmt: skip
    for key, value in options.items():
        if value is not None:
            params[names[key]] = value
    return params


def sampling_result(result: dict[str, Any]) -> dict[str, Any]:
    for field in ("role", "content", "model"):
        if field not in result:
            raise ClientRequestError(f"the client's sampling result has no {field!r}")
    return result
