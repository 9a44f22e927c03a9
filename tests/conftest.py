"""Test configuration: ``async def`` tests run on a fresh event loop with a time limit."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

ASYNC_TEST_TIMEOUT = 60.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    async def run() -> None:
        async with asyncio.timeout(ASYNC_TEST_TIMEOUT):
            await pyfuncitem.obj(**arguments)

    asyncio.run(run())
    return True
