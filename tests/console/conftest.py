"""Fixtures of the console tests: a real gateway on loopback — ``mogateway serve`` with several worker
processes, as it runs by default — and Debian's Chromium driven by Playwright.

Every browser context routes every request through :class:`console_harness.Outside`, which lets
127.0.0.1 through and aborts (and records) anything else; a test during which the page asked any other
host fails. Chromium must be at /usr/bin/chromium (``scripts/ensure-browser.sh``, run by
``scripts/test.sh``, installs it): without it the tests fail, they never skip.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from console_harness import Outside, guarded_page

# The fixtures browser, outside, app and gw, shared by the console's and the portal's tests:
from console_harness import app as app
from console_harness import browser as browser
from console_harness import gw as gw
from console_harness import outside as outside


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1280, "height": 800}


@pytest.fixture
def page(browser: Browser, outside: Outside, viewport: dict[str, int]) -> Iterator[Page]:
    """A fresh page (own cookies) whose requests outside 127.0.0.1 fail the test."""
    with guarded_page(browser, outside, viewport=viewport) as page:
        yield page
