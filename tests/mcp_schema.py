"""Checks every message the server emits against the official MCP JSON Schema of the negotiated revision, and
against a closed form of it that rejects members the revision does not define.

``WireChecker`` follows one connection: it remembers the method of each request the client sent, so a response
is checked against that method's result type (``tools/list`` -> ``ListToolsResult``), and notifications against
their own definitions. The drivers call it from the server's send path, where an exception would be swallowed by
the server, so it records violations instead of raising; every checker registers itself, and the test's teardown
(``conftest.py``) calls ``verify(collect())``, which fails if one recorded a violation or saw no message at all.
The schema files are in ``tests/data`` (origin in ``tests/data/README.md``).

Both eras: a request the client sends with the 2026-07-28 envelope (``params._meta`` naming the protocol version)
has its response checked against the 2026-07-28 schema, whatever the connection's legacy revision; a connection
whose first request is modern (stdio fixes its era that way) has its id-less messages checked against it too, and a
driver that knows which request a message belongs to (an HTTP response body) names the revision to ``received``.
Modern errors are also checked against their own definitions (-32020/-32021/-32022), and -32002 and -32042 are
violations there.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import json
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import FormatChecker
from jsonschema.validators import validator_for

DATA = Path(__file__).parent / "data"
LATEST = "2025-11-25"
MODERN = "2026-07-28"
REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
# Revisions whose schema has JSONRPCResultResponse / JSONRPCErrorResponse (older ones: JSONRPCResponse / JSONRPCError).
_SPLIT_ENVELOPES = frozenset({LATEST, MODERN})
MODERN_ERRORS = {-32020: "HeaderMismatchError", -32021: "MissingRequiredClientCapabilityError",
                 -32022: "UnsupportedProtocolVersionError"}  # fmt: skip

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
    "server/discover": "DiscoverResult",
    "subscriptions/listen": "SubscriptionsListenResult",
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
    "notifications/elicitation/complete": "ElicitationCompleteNotification",  # 2025-11-25: URL mode only
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
}
REQUESTS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "ping": "PingRequest",
    "roots/list": "ListRootsRequest",
}

# --- the closed form ----------------------------------------------------------------------------------------------
# Places whose value is itself a JSON Schema or free-form data: nothing at or below them is closed.
#  - Tool.inputSchema / Tool.outputSchema: a tool's JSON Schema may use any keyword ("$defs", "additionalProperties",
#    "description", ...) and its "properties" hold arbitrary subschemas.
#  - ElicitRequest's requestedSchema and the PrimitiveSchemaDefinition family it refers to (StringSchema,
#    NumberSchema, BooleanSchema, the enum schemas): JSON Schemas too, and the elicitation page's own example uses
#    "pattern", which StringSchema does not list (found by following $refs from requestedSchema, below).
# Free-form objects already say so (``_meta``, ``experimental``, ``metadata``, ``structuredContent``, the generic
# ``Result`` and request/notification ``params`` carry ``additionalProperties``; ``Error.data`` has no type), so they
# need no entry. ServerCapabilities is closed although its description calls the set open: a non-standard
# capability belongs under ``experimental``, and closing it is what catches a revision's capability offered in
# another revision (``tasks`` in 2025-03-26).
_SCHEMA_VALUED = ("/Tool/properties/inputSchema", "/Tool/properties/outputSchema", "/requestedSchema")


@functools.cache
def _root(version: str) -> dict[str, Any]:
    return json.loads((DATA / f"mcp-schema-{version}.json").read_text())


def _container(root: dict[str, Any]) -> str:
    return "$defs" if "$defs" in root else "definitions"


@functools.cache
def closed_root(version: str) -> dict[str, Any]:
    """The revision's schema with ``additionalProperties: false`` on every object schema that lists ``properties``
    and says nothing about ``additionalProperties`` (except the schema-valued places above).

    An ``allOf`` of object schemas (``GetTaskResult`` = ``Result`` & ``Task``) is closed as a whole: its branches stay
    open and the ``allOf`` itself allows exactly the union of their properties. Only constraints are added, so
    anything valid in the closed form is valid in the official one: the schemas use no ``not``/``if`` that would
    invert that, and ``_close`` refuses them.
    """
    root = copy.deepcopy(_root(version))
    container = _container(root)
    definitions = root[container]
    # The _meta objects of 2026-07-28 (ResultMetaObject, RequestMetaObject, ...) list the keys MCP reserves and
    # "extend MetaObject": any key that follows its naming rules ("tooldeck/retryAfter") belongs there too.
    exempt = _schema_valued_definitions(root) | {name for name in definitions if name.endswith("MetaObject")}
    added: set[str] = set()  # definitions whose top level was closed here (an allOf branch reopens them)
    for name, definition in definitions.items():
        if name not in exempt and _close(definition, f"/{name}"):
            added.add(name)
    for name in definitions:
        if name not in exempt:
            _close_all_of(definitions[name], definitions, container, added)
    return root


def _schema_valued_definitions(root: dict[str, Any]) -> set[str]:
    container = _container(root)
    found: set[str] = set()

    def follow(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(f"#/{container}/"):
                name = ref.rsplit("/", 1)[1]
                if name not in found:
                    found.add(name)
                    follow(root[container][name])
            for value in node.values():
                follow(value)
        elif isinstance(node, list):
            for value in node:
                follow(value)

    def visit(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if path.endswith(_SCHEMA_VALUED):
                follow(node)
                return
            for key, value in node.items():
                visit(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                visit(value, f"{path}/{i}")

    for name, definition in root[container].items():
        visit(definition, f"/{name}")
    return found


def _close(node: Any, path: str, *, in_all_of: bool = False) -> bool:
    """Close ``node`` and what it contains in place; True if ``node``'s own top level was closed."""
    if isinstance(node, list):
        for i, value in enumerate(node):
            _close(value, f"{path}/{i}")
        return False
    if not isinstance(node, dict) or path.endswith(_SCHEMA_VALUED):
        return False
    if "not" in node or "if" in node:
        raise ValueError(f"{path}: 'not'/'if' would turn an added constraint into a looser one")
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                _close(sub, f"{path}/properties/{name}")
        elif key == "allOf":
            for i, branch in enumerate(value):
                _close(branch, f"{path}/allOf/{i}", in_all_of=True)
        elif key not in ("enum", "const", "required", "default", "examples"):
            _close(value, f"{path}/{key}")
    if in_all_of or "properties" not in node or "additionalProperties" in node or "$ref" in node:
        return False
    node["additionalProperties"] = False
    return True


def _close_all_of(node: Any, definitions: dict[str, Any], container: str, added: set[str]) -> None:
    if isinstance(node, list):
        for value in node:
            _close_all_of(value, definitions, container, added)
        return
    if not isinstance(node, dict):
        return
    for value in node.values():
        _close_all_of(value, definitions, container, added)
    if "allOf" not in node or "additionalProperties" in node:
        return
    names: dict[str, Any] = dict(node.get("properties", {}))
    branches = []
    for branch in node["allOf"]:
        ref = branch.get("$ref", "")
        if ref.startswith(f"#/{container}/"):
            name = ref.rsplit("/", 1)[1]
            branch = dict(definitions[name])  # inlined, so its own top level can be reopened for this use
            if name in added:
                del branch["additionalProperties"]
        names.update(dict.fromkeys(branch.get("properties", {}), True))
        branches.append(branch)
    node["allOf"] = branches
    node["properties"] = names
    node["additionalProperties"] = False


# --- formats ------------------------------------------------------------------------------------------------------


def _is_byte(instance: object) -> bool:
    """Strict base64 (RFC 4648 section 4): the alphabet, padded to a multiple of 4, nothing else (no whitespace)."""
    if not isinstance(instance, str):
        return True
    if len(instance) % 4:
        raise ValueError(f"base64 length {len(instance)} is not a multiple of 4")
    base64.b64decode(instance, validate=True)
    return True


@functools.cache
def format_checker(version: str) -> FormatChecker:
    """The draft's format checker plus ``byte``; ``uri`` and ``uri-template`` need the packages of the test extra."""
    draft = validator_for(_root(version)).FORMAT_CHECKER
    checker = FormatChecker(formats=())
    checker.checkers = dict(draft.checkers)
    checker.checks("byte", raises=(binascii.Error, ValueError))(_is_byte)
    return checker


def _validator(root: dict[str, Any], version: str, definition: str) -> Any:
    container = _container(root)
    if definition not in root[container]:
        raise KeyError(f"{definition} is not defined in the {version} schema")
    schema = {**root, "$ref": f"#/{container}/{definition}"}
    cls = validator_for(root)
    return cls(schema, format_checker=format_checker(version))


@functools.cache
def validator(version: str, definition: str) -> Any:
    return _validator(_root(version), version, definition)


@functools.cache
def closed_validator(version: str, definition: str) -> Any:
    return _validator(closed_root(version), version, definition)


# --- checking -----------------------------------------------------------------------------------------------------


class Violation:
    """One way a message broke a definition: which one, in which form of the schema, where, and why."""

    __slots__ = ("definition", "form", "message", "path", "version")

    def __init__(self, version: str, definition: str, form: str, path: str, message: str) -> None:
        self.version = version
        self.definition = definition
        self.form = form  # "official", "closed" (valid officially, but has members the revision does not define)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.definition} ({self.version}, {self.form} schema) invalid at {self.path}: {self.message}"

    def __repr__(self) -> str:
        return f"Violation({self})"


def violations(version: str, definition: str, instance: Any) -> list[Violation]:
    """What is wrong with ``instance`` as a ``definition``: checked against the closed form; where that fails, the
    official form says whether the message breaks the revision itself or only adds members it does not define."""
    closed = jsonschema.exceptions.best_match(closed_validator(version, definition).iter_errors(instance))
    if closed is None:
        return []  # the closed form only adds constraints, so the official one holds too
    official = jsonschema.exceptions.best_match(validator(version, definition).iter_errors(instance))
    error, form = (official, "official") if official is not None else (closed, "closed")
    return [Violation(version, definition, form, error.json_path, error.message)]


def check(version: str, definition: str, instance: Any) -> None:
    """Raise AssertionError (with the JSON path) unless ``instance`` is a valid ``definition`` in both forms.

    For test code; a driver in the server's send path uses ``WireChecker``, which records instead of raising."""
    found = violations(version, definition, instance)
    if found:
        raise AssertionError(f"{found[0]}\n{_show(instance)}")


def check_error_message(message: dict[str, Any]) -> None:
    # Errors whose request id could not be read omit "id": only the 2025-11-25 schema can express that
    # (the older ones require an id and JSON-RPC's null fails them all), so those are checked against 2025-11-25.
    check(LATEST, "JSONRPCErrorResponse", message)


_new: list[WireChecker] = []  # created since the last collect()
_alive: weakref.WeakSet[WireChecker] = weakref.WeakSet()  # every checker still in use (a driver shared by tests)
_lock = threading.Lock()


def collect() -> list[WireChecker]:
    """The checkers the next verdict covers: those created since the last ``collect()``, and any older one (a
    module-scoped driver) that recorded violations no verdict has reported yet."""
    with _lock:
        taken = list(_new)
        _new.clear()
        taken += [c for c in list(_alive) if c.reported < len(c.violations) and c not in taken]
    return taken


def verify(checkers: Iterable[WireChecker]) -> None:
    """Raise AssertionError naming every violation the checkers recorded (each is reported once), and every checker
    that saw no message although its client sent a request (every request is answered, so an answer went unchecked).
    A checker whose client sent no request (an unused driver, or one that only sent notifications) may see nothing."""
    problems: list[str] = []
    for checker in checkers:
        problems += [f"{checker.name}: {v.where}" for v in checker.violations[checker.reported :]]
        checker.reported = len(checker.violations)
        if checker.count == 0 and checker.requests and checker.expect_messages:
            problems.append(
                f"{checker.name}: sent {checker.requests} request(s) but saw no server message, so the check did not "
                "run (a driver that legitimately receives nothing says so with checker.expect_no_messages())"
            )
    if problems:
        raise AssertionError("MCP wire check failed:\n" + "\n".join(problems))


class Recorded:
    """A violation as the checker saw it: the violation (or a wire-level complaint) and the message it was in."""

    __slots__ = ("message", "violation", "where")

    def __init__(self, violation: Violation | str, message: Any) -> None:
        self.violation = violation
        self.message = message
        self.where = f"{violation}\n    in {_show(message)}"

    def __str__(self) -> str:
        return self.where


class WireChecker:
    """Validates one connection's server->client messages (feed it the client's messages too); records, never raises.

    ``name`` labels the driver in the teardown report. ``expect_no_messages()`` is the opt-out for a driver that
    legitimately receives nothing; ``check_every(n)`` checks one message in ``n`` (all are still counted) for the
    few load tests where checking all would dominate the run time.
    """

    # With slots, replacing ``received``/``sent`` on an instance (switching the check off) raises AttributeError.
    __slots__ = ("__weakref__", "_every", "count", "eras", "expect_messages", "methods", "name", "reported",
                 "requests", "version", "violations")  # fmt: skip

    def __init__(self, version: str = LATEST, *, name: str = "WireChecker") -> None:
        self.version = version
        self.name = name
        self.methods: dict[Any, str] = {}
        self.eras: dict[Any, str] = {}  # request id -> the modern revision its envelope named
        self.count = 0  # server->client messages seen
        self.requests = 0  # client->server requests seen
        self.violations: list[Recorded] = []
        self.expect_messages = True
        self._every = 1
        self.reported = 0  # violations already reported by a verdict
        with _lock:
            _new.append(self)
            _alive.add(self)

    def expect_no_messages(self) -> None:
        """Opt out of the teardown rule that a checker whose client sent a request must have seen a message."""
        self.expect_messages = False

    def check_every(self, n: int) -> None:
        """Check one received message in ``n`` (the first, then every n-th); each is still parsed and counted."""
        assert n >= 1
        self._every = n

    def sent(self, message: Any) -> None:
        """Record a client->server message (so its response can be checked against the right result type)."""
        items = message if isinstance(message, list) else [message]
        for item in items:
            if isinstance(item, dict) and "method" in item and "id" in item:
                self.methods[_key(item["id"])] = item["method"]
                if modern_claim(item):
                    self.eras[_key(item["id"])] = MODERN
                    if self.requests == 0:
                        self.version = MODERN  # a connection opened by a modern request is of that era (stdio)
                self.requests += 1

    def received(self, message: Any, version: str | None = None) -> None:
        """Check one decoded server->client message (or batch); violations are recorded for the teardown.
        ``version``: the revision of the request the message belongs to, when the driver knows it."""
        try:
            self._received(message, version)
        except Exception as exc:  # a message too broken to route (e.g. a result without an id)
            self.record(f"unroutable message ({exc!r})", message)

    def record(self, violation: Violation | str, message: Any) -> None:
        """Keep a violation (or a driver's complaint about the wire) for the teardown verdict."""
        self.violations.append(Recorded(violation, message))

    def _check(self, definition: str, instance: Any, message: Any, version: str | None = None) -> None:
        for violation in violations(version or self.version, definition, instance):
            self.record(violation, message)

    def _received(self, message: Any, era: str | None = None) -> None:
        if isinstance(message, list):
            if self.version != "2025-03-26":
                self.record(f"a batch reply is only valid in 2025-03-26, not {self.version}", message)
            if not message:
                self.record("an empty batch reply is never valid", message)
            for item in message:
                self._received(item)
            return
        self.count += 1
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.record("not a JSON-RPC 2.0 object", message)
            return
        key = _key(message.get("id"))
        method = self.methods.get(key)
        if method == "initialize" and isinstance(message.get("result"), dict) and key not in self.eras:
            # Tracked on every message, sampled or not: later checks depend on the negotiated revision.
            self.version = message["result"].get("protocolVersion", self.version)
        if (self.count - 1) % self._every:
            return
        version = era or self.eras.get(key) or self.version
        if version == MODERN:
            self._modern(message, method)
        if "error" in message:
            if "id" in message:
                envelope = "JSONRPCErrorResponse" if version in _SPLIT_ENVELOPES else "JSONRPCError"
                self._check(envelope, message, message, version)
            else:
                for violation in violations(LATEST, "JSONRPCErrorResponse", message):
                    self.record(violation, message)
            return
        if "result" in message:
            envelope = "JSONRPCResultResponse" if version in _SPLIT_ENVELOPES else "JSONRPCResponse"
            if method == "subscriptions/listen" and version == MODERN:
                envelope = "SubscriptionsListenResultResponse"  # its _meta adds the subscriptionId to a result's
            self._check(envelope, message, message, version)
            result = message["result"]
            if version == MODERN and isinstance(result, dict) and result.get("resultType") == "input_required":
                self._input_required(result, method, message)
            elif version == MODERN and isinstance(result, dict) and result.get("resultType") == "task":
                if method != "tools/call":
                    self.record(f'resultType "task" answers {method} (the tasks extension: only tools/call)', message)
                self._check("CreateTaskResult", result, message, EXT_TASKS)
            elif version == MODERN and method in EXT_RESULTS:
                self._task_result(result, method, message)
            elif method == "tools/call" and isinstance(result, dict) and "task" in result:
                self._check("CreateTaskResult", result, message, version)  # not in the ServerResult union
            elif method in RESULTS:
                self._check(RESULTS[method], result, message, version)
            elif method is None:
                self.record("a response to no request the client sent", message)
            return
        self._check("JSONRPCMessage", message, message, version)
        # Before 2025-11-25 the per-method definitions hold only method and params (the envelope was checked above).
        body = message if version in _SPLIT_ENVELOPES else {k: v for k, v in message.items()
                                                            if k in ("method", "params")}  # fmt: skip
        if "id" in message:
            self._check("JSONRPCRequest", message, message, version)
            if version == MODERN:
                self.record("a server request in a 2026-07-28 exchange (the server may send none)", message)
            elif message.get("method") not in REQUESTS:
                self.record(f"unexpected request {message.get('method')!r}", message)
            else:
                self._check(REQUESTS[message["method"]], body, message, version)
        elif version == MODERN and message.get("method") == "notifications/tasks":
            self._check("TaskStatusNotification", message, message, EXT_TASKS)
            self._task_payload(message.get("params"), message)
        elif message.get("method") not in NOTIFICATIONS:
            self.record(f"unexpected notification {message.get('method')!r}", message)
        else:
            if version == MODERN and message.get("method") == "notifications/subscriptions/acknowledged":
                body = self._without_task_ids(body, message)
            self._check(NOTIFICATIONS[message["method"]], body, message, version)

    def _without_task_ids(self, body: Any, message: Any) -> Any:
        """An acknowledgement may name the tasks it honours (``taskIds``, the tasks extension's filter member): they
        must be strings; the rest is checked against the core schema."""
        notifications = (body.get("params") or {}).get("notifications") if isinstance(body, dict) else None
        if not isinstance(notifications, dict) or "taskIds" not in notifications:
            return body
        ids = notifications["taskIds"]
        if not isinstance(ids, list) or not all(isinstance(task_id, str) for task_id in ids):
            self.record("an acknowledgement whose taskIds is not an array of strings", message)
        rest = {key: value for key, value in notifications.items() if key != "taskIds"}
        return {**body, "params": {**body["params"], "notifications": rest}}

    def _task_result(self, result: Any, method: str, message: Any) -> None:
        """A tasks extension result (tasks/get, tasks/update, tasks/cancel), and what a DetailedTask inlines."""
        self._check(EXT_RESULTS[method], result, message, EXT_TASKS)
        if method == "tasks/get":
            self._task_payload(result, message)

    def _task_payload(self, task: Any, message: Any) -> None:
        """A completed task's ``result`` is a 2026-07-28 CallToolResult; each of ``inputRequests`` an InputRequest."""
        if not isinstance(task, dict):
            return
        if isinstance(task.get("result"), dict):
            self._check("CallToolResult", task["result"], message, MODERN)
            if RELATED_TASK in task["result"].get("_meta", {}):
                self.record("an inlined task result with the 2025 related-task _meta", message)
        for request in (task.get("inputRequests") or {}).values():
            self._check("InputRequest", request, message, MODERN)

    def _input_required(self, result: dict[str, Any], method: str | None, message: Any) -> None:
        """A 2026-07-28 InputRequiredResult: only tools/call, prompts/get and resources/read may send one; it has
        inputRequests or requestState (the schema cannot say so) and no cache hints."""
        self._check("InputRequiredResult", result, message, MODERN)
        if method not in ("tools/call", "prompts/get", "resources/read"):
            self.record(f"an input_required result to {method} (only tools/call, prompts/get, resources/read)", message)
        if "inputRequests" not in result and "requestState" not in result:
            self.record("an input_required result with neither inputRequests nor requestState", message)
        if "ttlMs" in result or "cacheScope" in result:
            self.record("an input_required result with cache hints", message)

    def _modern(self, message: dict[str, Any], method: str | None) -> None:
        """What the 2026-07-28 schema cannot say: each modern error by its own definition, codes it forbids."""
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            if code in MODERN_ERRORS:
                self._check(MODERN_ERRORS[code], message, message, MODERN)
            elif code in (-32002, -32042):
                self.record(f"error {code} must not be sent in 2026-07-28", message)
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        tagged = isinstance(meta, dict) and SUBSCRIPTION_ID in meta
        if message.get("method") in LISTEN_STREAM and not tagged:
            self.record(f"a {message['method']} without its subscriptionId (2026-07-28 sends it only on a listen "
                        "stream)", message)  # fmt: skip
        elif message.get("method") in REQUEST_SCOPED and tagged:
            self.record(f"a request-scoped {message['method']} on a listen stream", message)
        result = message.get("result")
        if (isinstance(result, dict) and method in MODERN_CACHEABLE and result.get("resultType") == "complete"
                and ("ttlMs" not in result or "cacheScope" not in result)):  # fmt: skip
            self.record(f"a {method} result without ttlMs and cacheScope", message)


SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
RELATED_TASK = "io.modelcontextprotocol/related-task"
# The tasks extension io.modelcontextprotocol/tasks of 2026-07-28: its messages, checked against the definitions in
# tests/data/mcp-schema-ext-tasks.json (written from the extension's normative text; see tests/data/README.md).
EXT_TASKS = "ext-tasks"
EXT_RESULTS = {"tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult", "tasks/cancel": "CancelTaskResult"}
# Notifications a 2026-07-28 server sends only on a subscriptions/listen stream (each tagged with its id), and the
# request-scoped ones that must never go there.
LISTEN_STREAM = frozenset({"notifications/subscriptions/acknowledged", "notifications/tools/list_changed",
                           "notifications/prompts/list_changed", "notifications/resources/list_changed",
                           "notifications/resources/updated"})  # fmt: skip
REQUEST_SCOPED = frozenset({"notifications/progress", "notifications/message"})
MODERN_CACHEABLE = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list",
                              "resources/templates/list", "resources/read"})  # fmt: skip


def modern_claim(message: Any) -> bool:
    """Whether a client message carries the 2026-07-28 envelope (its ``params._meta`` names a protocol version)."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION in meta


def _key(request_id: Any) -> Any:
    return (type(request_id).__name__, request_id)


def _show(message: Any) -> str:
    text = json.dumps(message, default=repr)
    return text if len(text) <= 600 else text[:600] + "..."
