"""Helpers of the console tests: Chromium's path and flags, the guard against requests to other hosts,
and signing in through the form. (In a module of its own: ``conftest`` is a name every test directory
has, so importing from it is ambiguous.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gateway_harness import ADMIN_TOKEN, InProcessGateway
from playwright.sync_api import Page, Route

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOOPBACK = frozenset({"127.0.0.1"})


@dataclass
class Outside:
    """Requests of a browser context to hosts other than 127.0.0.1: aborted and remembered."""

    urls: list[str] = field(default_factory=list)

    def route(self, route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:", "about:")) or urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            self.urls.append(url)
            route.abort()


def sign_in(page: Page, gw: InProcessGateway, token: str = ADMIN_TOKEN) -> None:
    """Sign in through the form, as a person would, and land on the Overview."""
    page.goto(gw.url + "/console/login")
    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", level=1, name="Overview").wait_for()
