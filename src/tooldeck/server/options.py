"""How a server behaves, listed once: ``Deck(name, version, **options)`` takes exactly these keywords.

``ServerSettings`` names them (for type checkers: ``**options: Unpack[ServerSettings]``); ``ServerOptions`` is the
checked record the server keeps. A new option is added to both, here, and nowhere else.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..model.metadata import normalize_icons
from ..protocol.envelope import LOG_LEVELS
from ..protocol.errors import RegistrationError
from ..protocol.record import Record

LOG_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}


class ServerSettings(TypedDict, total=False):
    title: str
    description: str
    instructions: str
    website_url: str
    icons: list[dict[str, Any]]
    page_size: int | None
    mask_errors: bool
    max_threads: int
    log_level: str
    max_message_bytes: int
    max_batch: int
    cursor_secret: bytes | None
    tool_timeout: float | None
    task_store: Any
    task_ttl: float
    max_task_ttl: float
    max_tasks_per_requestor: int
    task_lease: float
    task_lease_renewal: float
    node_id: str | None
    list_ttl: float
    read_ttl: float
    cache_scope: str | None
    state_key: bytes | None
    backends: Any


class ServerOptions(Record):
    """The checked options of one server.

    ``page_size``: items per list page (None: one page). ``mask_errors``: hide the text of unexpected exceptions
    from clients. ``max_threads``: worker threads for sync tools. ``log_level``: the lowest level sent as
    notifications/message before the client picks one. ``max_batch``: messages in a 2025-03-26 batch at most.
    ``tool_timeout``: seconds a tool call may run (None: no limit; a tool's own ``timeout`` wins).
    Cache hints of 2026-07-28 results: ``list_ttl`` seconds for server/discover and the four lists (a list_changed
    notification invalidates them sooner), ``read_ttl`` seconds for resources/read (0: read again every time, as a
    resource's function may answer differently on each call); ``cache_scope`` "public" or "private" (None: discover
    and lists are "public" for an anonymous caller of a server without HTTP authentication and "private" for anyone
    known, the stdio user included, as lists leave out what a caller may not use; resources/read is "private", as a
    function may read who calls).
    ``state_key``: the key (at least 32 bytes) that seals the ``requestState`` of 2026-07-28 input-required results;
    every process that serves the deck with the same key can take a retry. None: ``$TOOLDECK_STATE_KEY`` (its UTF-8
    bytes) if set, else a random key made at start-up, so only this process can resume what it asked.
    ``backends``: where the state lives that must hold across processes — a ``Backends`` record or a spec
    (``"memory"``, ``"sqlite:PATH"``; server/backends.py); None: in this process, tasks where the transport puts
    them. ``task_store`` (a store or a spec) sets the tasks seam of whatever record the deck serves with.
    ``task_lease``: seconds a process holds a running task without renewing it; another process sharing the task
    store takes the task over only once that has run out (see server/takeover.py). ``task_lease_renewal``: seconds
    between renewals, at most half the lease (so one late renewal never loses a task).
    ``node_id``: this process's name among the processes serving the deck, in every identity that crosses processes
    (request ids to the client, SSE stream and event ids, the holder of a task): letters, digits, ``_`` and ``-``, at
    most 64; unique among live processes. None: 8 random hex digits, made at start-up.
    """

    __slots__ = (
        "page_size", "mask_errors", "max_threads", "log_level", "max_message_bytes", "max_batch", "cursor_secret",
        "tool_timeout", "task_store", "task_ttl", "max_task_ttl", "max_tasks_per_requestor", "task_lease",
        "task_lease_renewal", "node_id", "list_ttl_ms", "read_ttl_ms", "cache_scope", "state_key", "backends",
    )  # fmt: skip

    def __init__(
        self,
        *,
        page_size: int | None = None,
        mask_errors: bool = True,
        max_threads: int = 40,
        log_level: str = "info",
        max_message_bytes: int = 4 * 1024 * 1024,
        max_batch: int = 1000,
        cursor_secret: bytes | None = None,
        tool_timeout: float | None = None,
        task_store: Any = None,
        task_ttl: float = 3600.0,
        max_task_ttl: float = 86400.0,
        max_tasks_per_requestor: int = 100,
        task_lease: float = 30.0,
        task_lease_renewal: float = 10.0,
        node_id: str | None = None,
        list_ttl: float = 60.0,
        read_ttl: float = 0.0,
        cache_scope: str | None = None,
        state_key: bytes | None = None,
        backends: Any = None,
    ) -> None:
        if page_size is not None and not _positive_int(page_size):
            raise RegistrationError(f"page_size must be a positive integer or None, got {page_size!r}")
        if log_level not in LOG_RANK:
            raise RegistrationError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
        for name, value in (("max_threads", max_threads), ("max_message_bytes", max_message_bytes),
                            ("max_batch", max_batch), ("max_tasks_per_requestor", max_tasks_per_requestor)):  # fmt: skip
            if not _positive_int(value):
                raise RegistrationError(f"{name} must be a positive integer, got {value!r}")
        if tool_timeout is not None and (isinstance(tool_timeout, bool) or not isinstance(tool_timeout, int | float)
                                         or not tool_timeout > 0):  # fmt: skip
            raise RegistrationError(f"tool_timeout must be a positive number of seconds or None, got {tool_timeout!r}")
        for name, ttl in (("list_ttl", list_ttl), ("read_ttl", read_ttl)):
            if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl >= 0:
                raise RegistrationError(f"{name} must be a number of seconds >= 0, got {ttl!r}")
        if cache_scope not in (None, "public", "private"):
            raise RegistrationError(f'cache_scope must be "public", "private" or None, got {cache_scope!r}')
        if state_key is not None and (not isinstance(state_key, bytes) or len(state_key) < 32):
            raise RegistrationError("state_key must be bytes, at least 32 of them (os.urandom(32), say), or None")
        for name, seconds in (("task_lease", task_lease), ("task_lease_renewal", task_lease_renewal)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
                raise RegistrationError(f"{name} must be a positive number of seconds, got {seconds!r}")
        if task_lease_renewal > task_lease / 2:
            raise RegistrationError(f"task_lease_renewal ({task_lease_renewal:g} s) must be at most half of task_lease "
                                    f"({task_lease:g} s), so that one late renewal never loses a task")  # fmt: skip
        if node_id is not None and not _is_node_id(node_id):
            raise RegistrationError(f"node_id must be 1 to 64 letters, digits, '_' or '-', got {node_id!r}")
        self.page_size = page_size
        self.mask_errors = mask_errors
        self.max_threads = max_threads
        self.log_level = log_level
        self.max_message_bytes = max_message_bytes
        self.max_batch = max_batch
        self.cursor_secret = cursor_secret
        self.tool_timeout = None if tool_timeout is None else float(tool_timeout)
        self.task_store = task_store  # None: chosen by the transport (memory on stdio, SQLite for `serve --http`)
        self.task_ttl = task_ttl
        self.max_task_ttl = max_task_ttl
        self.max_tasks_per_requestor = max_tasks_per_requestor
        self.task_lease = float(task_lease)
        self.task_lease_renewal = float(task_lease_renewal)
        self.node_id = node_id
        self.list_ttl_ms = int(list_ttl * 1000)
        self.read_ttl_ms = int(read_ttl * 1000)
        self.cache_scope = cache_scope
        self.state_key = state_key
        self.backends = backends  # a Backends record or a spec (server/backends.py); None: in memory


def server_info(name: str, version: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The ``serverInfo`` of initialize (an Implementation object), from the deck's name, version and settings."""
    if not isinstance(name, str) or not name:
        raise RegistrationError("a Deck needs a non-empty name")
    info: dict[str, Any] = {"name": name, "version": version}
    for key, wire in (("title", "title"), ("description", "description"), ("website_url", "websiteUrl")):
        if settings.get(key) is not None:
            info[wire] = settings[key]
    icons = normalize_icons(settings.get("icons"), f"deck {name!r}")
    if icons:
        info["icons"] = list(icons)
    return info


INFO_SETTINGS = frozenset({"title", "description", "instructions", "website_url", "icons"})


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], ServerOptions]:
    """The settings that describe the server (serverInfo, instructions) and the checked options, apart."""
    unknown = sorted(set(settings) - set(ServerSettings.__annotations__))
    if unknown:
        known = ", ".join(sorted(ServerSettings.__annotations__))
        raise RegistrationError(f"Deck: unknown option {unknown[0]!r} (options: {known})")
    info = {k: v for k, v in settings.items() if k in INFO_SETTINGS}
    return info, ServerOptions(**{k: v for k, v in settings.items() if k not in INFO_SETTINGS})


def _positive_int(value: Any) -> bool:
    return type(value) is int and value >= 1


def _is_node_id(value: Any) -> bool:
    # It goes into ids of several shapes ("<node>-<n>" request and stream ids, "<stream>.<n>" event ids, SSE id lines):
    # no dot, no separator, nothing to escape.
    return (
        type(value) is str
        and 0 < len(value) <= 64
        and value.isascii()
        and value.replace("_", "").replace("-", "").isalnum()
    )
