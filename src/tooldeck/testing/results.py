"""What the testing client hands back: small records built from the wire messages, easy to assert on, and its
errors (a tool's isError result, a JSON-RPC error answer) — each keeps the message it was built from as ``raw``.

Also the records a test's callbacks receive: an ``Elicitation`` (what the deck asked the user) and a
``SamplingRequest`` (what it asked the model).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import TooldeckError
from ..transports.memory import ClientError


def _joined_text(blocks: list[Any]) -> str:
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text")


@dataclass(frozen=True)
class Progress:
    """One ``notifications/progress`` the deck sent for a call."""

    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True)
class LogMessage:
    """One ``notifications/message``: its ``level`` ("debug" ... "emergency"), ``data`` (usually a str), ``logger``."""

    level: str
    data: Any
    logger: str | None = None


@dataclass(frozen=True)
class TaskInfo:
    """A task as the deck reported it (``CreateTaskResult.task``, ``tasks/get``, ``tasks/list``, ``tasks/cancel``)."""

    task_id: str
    status: str
    status_message: str | None
    ttl: int | None
    poll_interval: int | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_wire(cls, task: dict[str, Any]) -> TaskInfo:
        return cls(task["taskId"], task["status"], task.get("statusMessage"), task.get("ttl"),
                   task.get("pollInterval"), task)  # fmt: skip


@dataclass
class ToolResult:
    """A ``tools/call`` result.

    ``data`` is the structuredContent, unwrapped when the tool's output schema wraps a non-object value as
    ``{"result": ...}`` (so a tool returning ``3`` gives ``data == 3``); None without structuredContent.
    ``text`` joins the text content blocks; ``content`` is the list of blocks as sent; ``progress`` and ``logs`` are
    what the deck sent while the call ran; ``task`` is set for a call run as a task.
    """

    raw: dict[str, Any] = field(repr=False)
    data: Any
    progress: list[Progress] = field(default_factory=list)
    logs: list[LogMessage] = field(default_factory=list)
    task: TaskInfo | None = None

    @property
    def content(self) -> list[dict[str, Any]]:
        return list(self.raw.get("content", []))

    @property
    def text(self) -> str:
        return _joined_text(self.content)

    @property
    def is_error(self) -> bool:
        return bool(self.raw.get("isError"))

    @property
    def structured_content(self) -> Any:
        return self.raw.get("structuredContent")


@dataclass(frozen=True)
class ResourceResult:
    """A ``resources/read`` result: ``contents`` as sent, ``text`` (the text contents joined), ``blob`` (the first
    binary content, decoded)."""

    raw: dict[str, Any] = field(repr=False)

    @property
    def contents(self) -> list[dict[str, Any]]:
        return list(self.raw.get("contents", []))

    @property
    def text(self) -> str:
        return "\n".join(c["text"] for c in self.contents if "text" in c)

    @property
    def blob(self) -> bytes | None:
        found = next((c["blob"] for c in self.contents if "blob" in c), None)
        return None if found is None else base64.b64decode(found)


@dataclass(frozen=True)
class PromptResult:
    """A ``prompts/get`` result: ``messages`` as sent, ``description``, ``text`` (every text content joined)."""

    raw: dict[str, Any] = field(repr=False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.raw.get("messages", []))

    @property
    def description(self) -> str | None:
        return self.raw.get("description")

    @property
    def text(self) -> str:
        return _joined_text([m.get("content") for m in self.messages])


@dataclass(frozen=True)
class Completion:
    """A ``completion/complete`` result."""

    values: list[str]
    total: int | None
    has_more: bool
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Elicitation:
    """What the deck asked the user (``elicitation/create``), as the elicitation callback receives it: ``mode`` is
    "form" (``schema`` is the requested schema) or "url" (``url`` is the page to open)."""

    message: str
    mode: str
    schema: dict[str, Any] | None
    url: str | None
    params: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class SamplingRequest:
    """What the deck asked the model (``sampling/createMessage``), as the sampling callback receives it."""

    messages: list[dict[str, Any]]
    max_tokens: int
    system_prompt: str | None
    params: dict[str, Any] = field(repr=False)

    @property
    def text(self) -> str:
        """The text of every message, joined."""
        return _joined_text([m.get("content") for m in self.messages])


class ToolCallError(TooldeckError):
    """The tool answered with ``isError: true`` (raised unless ``call_tool(..., raise_on_error=False)``); ``result``
    is the ``ToolResult``."""

    def __init__(self, name: str, result: ToolResult) -> None:
        super().__init__(f"tool {name!r} reported an error: {result.text or '(no text content)'}")
        self.name = name
        self.result = result


class RequestError(ClientError, TooldeckError):
    """A JSON-RPC error: the deck's answer to a request (``code``, ``message``, ``data``). A callback may raise one
    too, to answer the deck's request with that error (``RequestError(-1, "User rejected")``)."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        super().__init__(error)
        self.method = method
        self.args = (f"{method} failed: {code} {message}" if method else f"{code} {message}",)

    @classmethod
    def from_wire(cls, error: dict[str, Any], method: str | None) -> RequestError:
        return cls(error.get("code", 0), str(error.get("message", "")), error.get("data"), method=method)
