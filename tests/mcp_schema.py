"""Checks every message the server emits against the official MCP JSON Schema of the negotiated revision.

``WireChecker`` follows one connection: it remembers the method of each request the client sent, so a response
is checked against that method's result type (``tools/list`` -> ``ListToolsResult``), and notifications against
their own definitions. The schema files are in ``tests/data`` (origin in ``tests/data/README.md``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

DATA = Path(__file__).parent / "data"
LATEST = "2025-11-25"

RESULTS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
    "tasks/get": "GetTaskResult",
    "tasks/result": "CallToolResult",  # the only task-augmentable request a server receives is tools/call
    "tasks/list": "ListTasksResult",
    "tasks/cancel": "CancelTaskResult",
}
NOTIFICATIONS = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/cancelled": "CancelledNotification",
    "notifications/tasks/status": "TaskStatusNotification",
}
REQUESTS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "ping": "PingRequest",
    "roots/list": "ListRootsRequest",
}


@functools.cache
def _root(version: str) -> dict[str, Any]:
    return json.loads((DATA / f"mcp-schema-{version}.json").read_text())


@functools.cache
def validator(version: str, definition: str) -> Any:
    root = _root(version)
    container = "$defs" if "$defs" in root else "definitions"
    if definition not in root[container]:
        raise KeyError(f"{definition} is not defined in the {version} schema")
    schema = {**root, "$ref": f"#/{container}/{definition}"}
    cls = validator_for(root)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check(version: str, definition: str, instance: Any) -> None:
    """Raise ``jsonschema.ValidationError`` (with the path) if ``instance`` is not a valid ``definition``."""
    error = jsonschema.exceptions.best_match(validator(version, definition).iter_errors(instance))
    if error is not None:
        raise AssertionError(f"{definition} ({version}) invalid at {error.json_path}: {error.message}\n{instance}")


def check_error_message(message: dict[str, Any]) -> None:
    # Errors whose request id could not be read omit "id": only the 2025-11-25 schema can express that
    # (the older ones require an id and JSON-RPC's null fails them all), so those are checked against 2025-11-25.
    check(LATEST, "JSONRPCErrorResponse", message)


class WireChecker:
    """Validates one connection's server->client messages; feed it the client's messages too."""

    def __init__(self, version: str = LATEST) -> None:
        self.version = version
        self.methods: dict[Any, str] = {}
        self.count = 0

    def sent(self, message: Any) -> None:
        """Record a client->server message (so its response can be checked against the right result type)."""
        items = message if isinstance(message, list) else [message]
        for item in items:
            if isinstance(item, dict) and "method" in item and "id" in item:
                self.methods[_key(item["id"])] = item["method"]
                if item["method"] == "initialize":
                    requested = item.get("params", {}).get("protocolVersion")
                    self._requested = requested

    def received(self, message: Any) -> None:
        if isinstance(message, list):
            assert self.version == "2025-03-26", "batched replies are only valid in 2025-03-26"
            assert message, "an empty batch reply is never valid"
            for item in message:
                self.received(item)
            return
        self.count += 1
        assert isinstance(message, dict), message
        assert message.get("jsonrpc") == "2.0", message
        if "error" in message:
            if "id" in message:
                check(self.version, "JSONRPCErrorResponse" if self.version == LATEST else "JSONRPCError", message)
            else:
                check_error_message(message)
            return
        if "result" in message:
            method = self.methods.get(_key(message["id"]))
            if method == "initialize":
                self.version = message["result"]["protocolVersion"]
            envelope = "JSONRPCResultResponse" if self.version == LATEST else "JSONRPCResponse"
            check(self.version, envelope, message)
            if method == "tools/call" and "task" in message["result"]:
                check(self.version, "CreateTaskResult", message["result"])  # not in the ServerResult union
            elif method in RESULTS:
                check(self.version, RESULTS[method], message["result"])
            return
        check(self.version, "JSONRPCMessage", message)
        if "id" in message:
            check(self.version, "JSONRPCRequest", message)
            assert message["method"] in REQUESTS, f"unexpected request {message['method']}"
            check(self.version, REQUESTS[message["method"]], message)
        else:
            assert message["method"] in NOTIFICATIONS, f"unexpected notification {message['method']}"
            check(self.version, NOTIFICATIONS[message["method"]], message)


def _key(request_id: Any) -> Any:
    return (type(request_id).__name__, request_id)
