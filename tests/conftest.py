"""Test configuration: ``async def`` tests run on a fresh event loop with a time limit, and every test is watched.

What would otherwise vanish fails the test at teardown: a schema violation a driver's ``WireChecker`` recorded in
the server's send path (or a checker that saw nothing), an exception in an event-loop callback or task (including
"Task exception was never retrieved"), and an exception that ended a thread.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

import mcp_schema

ASYNC_TEST_TIMEOUT = 60.0

loop_errors: list[str] = []  # what the test loop's exception handler was given, formatted
thread_errors: list[str] = []  # what threading.excepthook was given during the test, formatted


def record_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The test loop's exception handler: keeps the context (message, exception with traceback, task or handle)."""
    lines = [str(context.get("message", "an unhandled exception in the event loop"))]
    for key in ("task", "future", "handle"):
        if key in context:
            lines.append(f"{key}: {context[key]!r}"[:500])
    exception = context.get("exception")
    if exception is not None:
        lines.append("".join(traceback.format_exception(exception)).rstrip())
    loop_errors.append("\n".join(lines))


def record_thread_error(args: threading.ExceptHookArgs) -> None:
    name = "<unknown>" if args.thread is None else args.thread.name
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)).rstrip()
    thread_errors.append(f"exception in thread {name}:\n{text}")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(record_loop_error)
        async with asyncio.timeout(ASYNC_TEST_TIMEOUT):
            await pyfuncitem.obj(**arguments)

    try:
        asyncio.run(run())
    finally:
        # A task that failed and was dropped reports "Task exception was never retrieved" when it is freed; tracebacks
        # keep such tasks in reference cycles, so collect them now, while the test can still be blamed.
        gc.collect()
    return True


@pytest.fixture(autouse=True)
def wire_and_loop_watch() -> Iterator[None]:
    """Fail the test at teardown for anything recorded while it ran (see the module docstring)."""
    loop_errors.clear()
    thread_errors.clear()
    previous = threading.excepthook
    threading.excepthook = record_thread_error
    try:
        yield
    finally:
        threading.excepthook = previous
    problems = [f"event loop: {error}" for error in loop_errors] + [f"thread: {error}" for error in thread_errors]
    loop_errors.clear()
    thread_errors.clear()
    try:
        mcp_schema.verify(mcp_schema.collect())
    except AssertionError as exc:
        problems.append(str(exc))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
