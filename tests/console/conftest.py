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
from playwright.sync_api import Browser, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from console_harness import CHROMIUM, CHROMIUM_ARGS, Outside, ServedGateway, served_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/ensure-browser.sh` (scripts/test.sh does)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def outside() -> Outside:
    return Outside()


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1280, "height": 800}


@pytest.fixture
def page(browser: Browser, outside: Outside, viewport: dict[str, int]) -> Iterator[Page]:
    """A fresh page (own cookies) whose requests outside 127.0.0.1 fail the test."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    context.route("**/*", outside.route)
    page = context.new_page()
    yield page
    context.close()
    assert outside.urls == [], f"the page asked hosts other than 127.0.0.1: {outside.urls}"


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("Thanks for your vote")) as recorder:
        yield recorder


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[ServedGateway]:
    with served_gateway(tmp_path / "gateway") as gateway:
        yield gateway
