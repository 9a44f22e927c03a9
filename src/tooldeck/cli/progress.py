"""What ``tooldeck call`` shows on stderr while it waits: a progress bar and a task's status, one line redrawn in
place on a terminal; the server's log messages as lines of their own. Not on a terminal there is no bar (a log file
would fill with redraws): the status is a line per change, logs are lines as usual.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, TextIO


class Reporter:
    def __init__(self, stream: TextIO | None = None, interactive: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.interactive = _is_terminal(self.stream) if interactive is None else interactive
        self._line = ""  # what the in-place line shows now
        self._status: tuple[Any, ...] | None = None

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if not self.interactive:
            return
        width = self._width()
        text = f" {message}" if message else ""
        if total:
            fraction = max(0.0, min(1.0, progress / total))
            cells = 24
            done = round(fraction * cells)
            self._show(f"[{'#' * done}{'-' * (cells - done)}] {fraction:4.0%}{text}", width)
        else:
            self._show(f"[{_number(progress)}]{text}", width)

    def status(self, task: dict[str, Any]) -> None:
        """A task's status (and statusMessage): the in-place line on a terminal, else a line when it changes."""
        status, message = task.get("status"), task.get("statusMessage")
        if (status, message) == self._status:
            return
        self._status = (status, message)
        text = f"task {task.get('taskId')}: {status}{f' - {message}' if message else ''}"
        if self.interactive:
            self._show(text, self._width())
        else:
            self._write(f"tooldeck: {text}\n")

    @property
    def last_status(self) -> Any:
        return self._status[0] if self._status else None

    def log(self, params: dict[str, Any]) -> None:
        """A notifications/message: ``[level] logger: data`` on a line of its own (the bar is drawn again below)."""
        data = params.get("data")
        if not isinstance(data, str):
            import orjson

            data = orjson.dumps(data).decode()
        logger = f"{params['logger']}: " if params.get("logger") else ""
        line, self._line = self._line, ""
        self._write(("\r\x1b[K" if line else "") + f"[{params.get('level', 'info')}] {logger}{data}\n")
        if line:
            self._write(line)
            self._line = line

    def clear(self) -> None:
        if self._line:
            self._write("\r\x1b[K")
            self._line = ""

    def _width(self) -> int:
        """The stream's own terminal width (stdout may be a pipe while stderr is the terminal)."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
        return (columns or shutil.get_terminal_size((80, 24)).columns) - 1

    def _show(self, text: str, width: int) -> None:
        text = text.replace("\n", " ").replace("\r", " ")[: max(width, 10)]
        self._line = text
        self._write(f"\r\x1b[K{text}")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stderr closed or gone: the progress is not worth failing the call for


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return False
