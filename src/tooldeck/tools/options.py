"""The options a tool takes, listed once: ``@deck.tool(...)``, ``deck.add_tool(fn, ...)`` and ``tool_from_function``
all accept exactly these keywords (``**options: Unpack[ToolOptions]``), so a new option is added here and nowhere else.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ToolOptions(TypedDict, total=False):
    name: str
    """The tool's name (1-128 characters of ``A-Z a-z 0-9 _ - .``); the function's name by default."""
    title: str
    """A human-readable title for hosts to show."""
    description: str
    """What the tool does, for the model; the docstring (without its parameter sections) by default."""
    annotations: dict[str, Any]
    """``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``, ``title`` (camelCase or snake)."""
    icons: list[dict[str, Any]]
    """``[{"src": "https://...", "mime_type": "image/png", "sizes": ["48x48"], "theme": "dark"}]``."""
    task: str | bool
    """``"forbidden"`` (default), ``"optional"`` or ``"required"``: may the tool be called as a task."""
    meta: dict[str, Any]
    """Free-form ``_meta`` of the tool's listing."""
    output_schema: dict[str, Any] | bool
    """None derives it from the return annotation, False turns structured output off, a dict replaces it."""
    input_schema: dict[str, Any]
    """Advertise and enforce this schema, exactly as given, instead of one built from the signature."""
    immediate_response: str
    """A hint sent with the CreateTaskResult of a task-augmented call, for the model to read meanwhile."""
    ask_before_task: bool
    """For a task tool: its questions come before its task. In a 2026-07-28 request with the tasks extension the
    function first runs in the request (its questions answered by input-required rounds) and becomes a task where it
    calls ``await ctx.continue_as_task()``; without this option the task starts at once."""
    timeout: float | None
    """Seconds a call may run before it ends with an isError result; the deck's ``tool_timeout`` by default."""
    version: str
    """The tool's own semantic version, shown as ``_meta["tooldeck/version"]``."""
    security_level: int
    """0-10 (seed 002): 0 anyone, 1-3 authenticated, 4-7 plus scopes, 8-10 plus per-call verification; shown as
    ``_meta["tooldeck/securityLevel"]``. Unset: the policy's default."""
    scopes: list[str]
    """The scopes a caller needs (levels 4 and up); shown as ``_meta["tooldeck/scopes"]``."""


TOOL_OPTIONS = frozenset(ToolOptions.__annotations__)


def check_options(options: dict[str, Any], owner: str) -> None:
    """Refuse keywords that are not tool options, naming the ones that are."""
    unknown = sorted(set(options) - TOOL_OPTIONS)
    if unknown:
        from ..protocol.errors import RegistrationError

        raise RegistrationError(f"{owner}: unknown option {unknown[0]!r} (options: {', '.join(sorted(TOOL_OPTIONS))})")
