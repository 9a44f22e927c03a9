"""Requests a tool sends to the client through its Context: elicitation (form and URL) and sampling.

Each is sent only if the client declared the capability (else a ``ClientRequestError`` the model can read), waits
at most ``timeout`` seconds (then tells the client with notifications/cancelled), and checks the answer: form
content against the requested schema, sampling results for their required fields.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ClientRequestError, SchemaError
from ..protocol.record import Record
from ..schema.validate import Validator

if TYPE_CHECKING:
    from .session import Session

_ACTIONS = ("accept", "decline", "cancel")


class ElicitResult(Record):
    """The user's answer: ``action`` is "accept", "decline" or "cancel"; ``content`` is set for form accepts."""

    __slots__ = ("action", "content")

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


async def ask(session: Session, method: str, params: dict[str, Any], related: Any, timeout: float) -> dict[str, Any]:
    """Send ``method`` to the client and return its result; errors and time-outs become ClientRequestError."""
    import asyncio

    request_id, waiter = session.request(method, params, related)
    try:
        response = await asyncio.wait_for(asyncio.shield(waiter), timeout)
    except TimeoutError:
        session.abandon(request_id, f"no answer within {timeout:g} s", related)
        raise ClientRequestError(f"the client did not answer {method} within {timeout:g} s") from None
    except asyncio.CancelledError:
        session.abandon(request_id, "the tool call was cancelled", related)
        raise
    except ConnectionError as exc:
        raise ClientRequestError(f"{method} could not complete: {exc}") from None
    if response.error is not None:
        error = response.error
        raise ClientRequestError(f"the client refused {method}: {error.get('message')} ({error.get('code')})",
                                 code=error.get("code"))  # fmt: skip
    return response.result


# --- elicitation ------------------------------------------------------------------------------------------------


def form_params(message: str, schema: dict[str, Any], capabilities: dict[str, Any]) -> tuple[dict[str, Any], Validator]:
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        raise ClientRequestError("the client does not support elicitation (it did not declare the capability)")
    if elicitation and "form" not in elicitation:
        raise ClientRequestError("the client supports only URL-mode elicitation, not forms")
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError('requested schema must be {"type": "object", "properties": {...}}')
    for name, prop in schema["properties"].items():
        if not isinstance(prop, dict) or prop.get("type") not in ("string", "number", "integer", "boolean", "array"):
            raise ValueError(f"requested schema: property {name!r} must be a string, number, integer, boolean or "
                             "enum array (forms are flat)")  # fmt: skip
    try:
        validator = Validator(schema)
    except SchemaError as exc:
        raise ValueError(f"requested schema is not valid: {exc}") from None
    return {"mode": "form", "message": message, "requestedSchema": schema}, validator


def url_params(message: str, url: str, elicitation_id: str | None, capabilities: dict[str, Any]) -> dict[str, Any]:
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ClientRequestError("the client does not support URL-mode elicitation")
    if not url.lower().startswith(("https://", "http://")):
        raise ValueError("url must be an http(s) URL")
    return {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id or os.urandom(16).hex()}


def elicit_result(result: dict[str, Any], validator: Validator | None) -> ElicitResult:
    action = result.get("action")
    if action not in _ACTIONS:
        raise ClientRequestError(f"the client's elicitation answer has an invalid action {action!r}")
    content = result.get("content")
    if action != "accept" or validator is None:
        return ElicitResult(action, None)
    if not isinstance(content, dict):
        raise ClientRequestError("the client accepted the form but sent no content object")
    if not validator.is_valid(content):
        raise ClientRequestError("the client's answer does not match the requested schema: "
                                 + "; ".join(validator.errors(content)))  # fmt: skip
    return ElicitResult(action, content)


# --- sampling ---------------------------------------------------------------------------------------------------


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
