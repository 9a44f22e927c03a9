"""The browser tests' plumbing end to end: Debian's chromium, driven by Playwright, opens a page that a real
``tooldeck serve --http`` process serves, and the page is kept as a screenshot."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from browser import screenshot
from http_client import serve_http

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_the_browser_opens_the_health_probe_of_a_served_deck(page: Page) -> None:
    with serve_http("tooldeck.demo") as url:
        response = page.goto(url.removesuffix("/mcp") + "/healthz")
        assert response is not None and response.status == 200
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
        assert page.inner_text("body") == "ok\n"  # the body as served, shown as plain text
        path = screenshot(page, "healthz")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


async def test_an_async_test_runs_after_a_browser_test() -> None:
    # Playwright leaves its loop marked running after each call; the fixtures drop the mark when a browser test ends,
    # or this test (run after the one above, in one session with its browser) could not start (browser.py).
    await asyncio.sleep(0)
    assert asyncio.get_running_loop() is not None
