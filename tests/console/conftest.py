"""Browser fixtures: ``browser``, one headless Chromium for the whole run, and ``page``, a fresh 1280x800 page for
each test (``browser.py`` says why browser tests are plain sync tests, and how they skip without Chromium)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from browser import BrowserSession, launched, new_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="session")
def browser_session() -> Iterator[BrowserSession]:
    with launched() as session:
        yield session


@pytest.fixture(scope="session")
def browser(browser_session: BrowserSession) -> Browser:
    return browser_session.browser


@pytest.fixture(autouse=True)
def playwright_awake(request: pytest.FixtureRequest) -> Iterator[None]:
    """A browser test runs with Playwright's loop marked running, from its first fixture to its last teardown; any
    other test runs without (the async ones could not run at all)."""
    if "browser_session" not in request.fixturenames:
        yield
        return
    if inspect.iscoroutinefunction(request.function):
        pytest.fail(
            "a browser test must be a plain sync test: Playwright's sync API cannot run in an asyncio loop",
            pytrace=False,
        )
    session: BrowserSession = request.getfixturevalue("browser_session")
    with session.awake():
        yield


@pytest.fixture
def page(browser: Browser, playwright_awake: None) -> Iterator[Page]:
    with new_page(browser) as fresh:
        yield fresh
