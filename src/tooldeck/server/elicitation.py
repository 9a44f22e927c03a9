"""Elicitation (spec: client/elicitation): the params of an ``elicitation/create`` request and the checked answer.

``ctx.elicit`` (form mode) and ``ctx.elicit_url`` (URL mode) send the request only if the client declared the
capability (else a ``ClientRequestError`` the model can read); an accepted form answer is checked against the schema
that was asked for.
"""

from __future__ import annotations

import os
from typing import Any

from ..protocol.errors import ClientRequestError, SchemaError
from ..protocol.record import Record
from ..schema.validate import Validator

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
    """A URL-mode elicitation's params; ``elicitation_id`` None: none at all (2026-07-28 has no elicitationId)."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ClientRequestError("the client does not support URL-mode elicitation")
    if not url.lower().startswith(("https://", "http://")):
        raise ValueError("url must be an http(s) URL")
    params = {"mode": "url", "message": message, "url": url}
    if elicitation_id is not None:
        params["elicitationId"] = elicitation_id
    return params


def new_elicitation_id() -> str:
    """An id for a URL elicitation the tool did not name: 128 random bits."""
    return os.urandom(16).hex()


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
