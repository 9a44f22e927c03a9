"""Logs an operator can search: one JSON object per line (``--log-format json``) carrying, on every line written while
a request's work runs, the request it belongs to — its id, session, principal and tool (and, with tracing on, the
trace id of its span).

The request a line belongs to is found through a context variable that the runner sets when a request's work
starts (``runner.py``), only once JSON logs are configured: text logs cost nothing per request. The variable
follows the work into its tasks and into the worker threads of sync tools (they run in a copy of the context).

``configure(level, fmt)`` sets up the root logger on stderr, as ``tooldeck serve`` does; ``JsonFormatter`` is the
formatter, for a handler of one's own.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import time
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("tooldeck.request", default=None)
contextual = False  # whether the runner sets REQUEST (JSON logs are on)

# The attributes of a LogRecord that logging itself sets: what else a record carries came in ``extra=``.
_OWN = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601 with milliseconds), level, logger, message; the request the
    line belongs to (``request_id``, ``session``, ``principal``, ``tool``, each when known) and the current span's
    ``trace_id``; what the call gave in ``extra=``; and the exception's traceback as ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        import orjson

        seconds = record.created
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = REQUEST.get()
        if request is not None:
            line.update(request_fields(request))
        from . import tracing

        if tracing.active:
            trace_id = tracing.trace_id()
            if trace_id is not None:
                line["trace_id"] = trace_id
        for key, value in record.__dict__.items():
            if key not in _OWN and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


def request_fields(request: Any) -> dict[str, Any]:
    """What a log line says of the request (a ``RequestContext``) whose work wrote it."""
    fields: dict[str, Any] = {"request_id": request.request_id}
    session = getattr(request.peer, "key", None)
    if session is not None and not str(session).startswith("local-"):  # a session id the client knows
        fields["session"] = session
    principal = request.principal
    if principal is not None:
        fields["principal"] = getattr(principal, "id", None) or str(principal)
    if request.method == "tools/call":
        name = request.params.get("name")
        if type(name) is str:
            fields["tool"] = name
    return fields


def configure(level: str = "warning", fmt: str = "text") -> None:
    """The root logger on stderr at ``level``, in ``fmt`` (``text`` or ``json``): what ``tooldeck serve
    --log-level --log-format`` does."""
    global contextual
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    contextual = fmt == "json"
