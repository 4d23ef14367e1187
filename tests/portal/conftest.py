"""Fixtures of the portal tests: a real gateway on loopback (``mogateway serve`` with several worker
processes, as the console's tests run it), an application that answers callbacks, and Debian's Chromium
driven by Playwright (at /usr/bin/chromium; without it the browser tests fail, they never skip)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
sys.path.insert(0, str(Path(__file__).parents[1] / "console"))
from console_harness import Outside, guarded_page

# The fixtures browser, outside, app and gw, shared by the console's and the portal's tests:
from console_harness import app as app
from console_harness import browser as browser
from console_harness import gw as gw
from console_harness import outside as outside


@pytest.fixture
def page(browser: Browser, outside: Outside) -> Iterator[Page]:
    """A fresh page (own cookies, downloads taken, dialogs accepted) whose requests outside 127.0.0.1
    fail the test."""
    viewport = {"width": 1280, "height": 800}
    with guarded_page(browser, outside, viewport=viewport, accept_downloads=True) as page:
        page.on("dialog", lambda dialog: dialog.accept())
        yield page
