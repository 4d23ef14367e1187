"""Fixtures of the portal tests: a real gateway on loopback (``mogateway serve`` with several worker
processes, as the console's tests run it), an application that answers callbacks, and Debian's Chromium
driven by Playwright (at /usr/bin/chromium; without it the browser tests fail, they never skip)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
sys.path.insert(0, str(Path(__file__).parents[1] / "console"))
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
def page(browser: Browser, outside: Outside) -> Iterator[Page]:
    """A fresh page (own cookies) whose requests outside 127.0.0.1 fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(15_000)
    context.route("**/*", outside.route)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
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
