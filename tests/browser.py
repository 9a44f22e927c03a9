"""A real browser for the tests: Debian's chromium, headless, driven by Playwright's sync API; Playwright's own
browser download is never used. ``launched()`` starts one for a test run, ``screenshot`` keeps a page as an artefact.

Playwright's sync API runs an asyncio loop of its own (in a greenlet) and, from its first call until it stops, leaves
that loop marked as the thread's running loop. With the mark set, ``asyncio.run`` (which runs each ``async def``
test, see conftest.py) refuses to start; without it, Playwright's next call finds its connection closed. So the mark
is held only while a browser test runs (``BrowserSession.awake``), and one Chromium serves the whole run with async
tests before and after it. Browser tests are plain sync tests.

Without Chromium (or Playwright) the browser tests are skipped with one line, or fail with it when
``$TOOLDECK_REQUIRE_CHROMIUM`` is set (``.ci/run`` sets it, and installs Debian's chromium).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SCREENSHOTS = Path(__file__).resolve().parent / "artefacts" / "screenshots"
NO_CHROMIUM = "no Chromium: install Debian's chromium (apt-get install chromium) for the browser tests"
NO_PLAYWRIGHT = "no Playwright: install the test extra (pip install -e '.[test]') for the browser tests"


def chromium_path() -> str | None:
    """The Chromium to drive: ``$TOOLDECK_CHROMIUM`` when it is set (a path, or a name on PATH), else ``chromium`` or
    ``chromium-browser`` on PATH; None if there is none."""
    configured = os.environ.get("TOOLDECK_CHROMIUM")
    if configured:
        return shutil.which(configured)  # set but not there: None, not some other Chromium
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason`` (one line); fail it with that line when ``$TOOLDECK_REQUIRE_CHROMIUM`` is set."""
    if os.environ.get("TOOLDECK_REQUIRE_CHROMIUM"):
        pytest.fail(f"{reason} ($TOOLDECK_REQUIRE_CHROMIUM is set)", pytrace=False)
    pytest.skip(reason)


@contextmanager
def awake(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Hold the running-loop mark Playwright's calls need while the block runs, and drop it after."""
    asyncio._set_running_loop(loop)
    try:
        yield
    finally:
        asyncio._set_running_loop(None)


@dataclass(frozen=True)
class BrowserSession:
    """One headless Chromium and Playwright's loop: whatever calls the browser runs inside ``awake()``."""

    browser: Browser
    loop: asyncio.AbstractEventLoop

    def awake(self) -> AbstractContextManager[None]:
        return awake(self.loop)


@contextmanager
def launched() -> Iterator[BrowserSession]:
    """Start Playwright and a headless Chromium (skipping, or failing, without them); both stop when the block ends."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable(NO_PLAYWRIGHT)
    executable = chromium_path()
    if executable is None:
        unavailable(NO_CHROMIUM)
    playwright = sync_playwright().start()
    loop = asyncio.get_running_loop()  # Playwright's own, marked running by start()
    with awake(loop):
        try:
            # No --no-sandbox of our own, as root either: Playwright passes it unless chromium_sandbox=True.
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
        except BaseException:
            playwright.stop()
            raise
    try:
        yield BrowserSession(browser, loop)
    finally:
        with awake(loop):
            try:
                browser.close()
            finally:
                playwright.stop()


@contextmanager
def new_page(browser: Browser) -> Iterator[Page]:
    """A 1280x800 page in a context of its own (no cookies or storage shared with another test), closed after."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context.new_page()
    finally:
        context.close()


def screenshot(page: Page, name: str) -> Path:
    """Keep a full-page screenshot of ``page`` as a test artefact, ``tests/artefacts/screenshots/<name>.png``; returns
    its path (a later run's screenshot of the same name replaces it)."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"screenshot name must be letters, digits, '_', '.' or '-' (a file name), got {name!r}")
    path = SCREENSHOTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(page.screenshot(full_page=True))
    return path
