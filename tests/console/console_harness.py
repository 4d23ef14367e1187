"""Helpers of the console tests: Chromium's path and flags, the guard against requests to other hosts,
signing in through the form, and the gateway they run against: ``mogateway serve`` with several worker
processes, as it runs by default. (In a module of its own: ``conftest`` is a name every test directory
has, so importing from it is ambiguous.)"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    INGEST_TOKEN,
    GatewayClient,
    ServeProcess,
    clean_env,
    start_serve,
)
from playwright.sync_api import Browser, Page, Route, sync_playwright

from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

T = TypeVar("T")

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


@contextmanager
def guarded_page(browser: Browser, outside: Outside, **context_options: Any) -> Iterator[Page]:
    """A fresh page (own cookies, ``context_options`` as Playwright takes them) whose requests outside
    127.0.0.1 fail the test once the block ends."""
    context = browser.new_context(**context_options)
    context.set_default_timeout(15_000)
    context.route("**/*", outside.route)
    page = context.new_page()
    yield page
    context.close()
    assert outside.urls == [], f"the page asked hosts other than 127.0.0.1: {outside.urls}"


def sign_in(page: Page, gw: GatewayClient, token: str = ADMIN_TOKEN) -> None:
    """Sign in through the form, as a person would, and land on the Overview."""
    page.goto(gw.url + "/console/login")
    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", level=1, name="Overview").wait_for()


# ------------------------------------------------------------------------------ the served gateway

#: Worker processes of the console's gateway: the default (one per core), and never fewer than two, so
#: that every test sees what a browser sees on a default gateway: its connections reach either worker.
WORKERS = max(2, os.cpu_count() or 1)
NODE = "test-node"


class ServedGateway(GatewayClient):
    """``mogateway serve --workers N`` in a directory of its own, driven over HTTP like an operator."""

    workdir: Path
    env: dict[str, str]
    args: list[str]
    served: ServeProcess | None

    def start(self) -> None:
        self.served = start_serve(self.workdir, self.env, args=self.args)
        self.url = self.served.url
        wait_for_every_worker(self.url, WORKERS)

    def stop(self) -> None:
        if self.served is not None:
            self.served.stop()
            self.served = None

    def restart(self) -> None:
        """Stop (gracefully) and start again on the same journal; the port changes (a cookie is kept
        per host, whatever the port)."""
        self.stop()
        self.start()

    def log(self) -> str:
        return (self.workdir / "serve.stderr").read_text(errors="replace")


def wait_for_every_worker(url: str, workers: int, timeout: float = 20.0) -> set[str]:
    """Fresh connections until each worker has answered one (SO_REUSEPORT spreads them): the names
    of the workers seen."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers:
        assert time.monotonic() < deadline, f"only {sorted(seen)} of {workers} workers answered"
        seen.add(str(httpx.get(url + "/healthz", timeout=5).json()["node"]))
    return seen


@contextmanager
def served_gateway(
    workdir: Path, *, config: str = "", log_level: str = "warning", **settings: str
) -> Iterator[ServedGateway]:
    """A default multi-worker gateway (:data:`WORKERS`) with the tests' tokens, on a fresh journal."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["--workers", str(WORKERS)]
    if config:
        (workdir / "gateway.toml").write_text(config)
        args += ["--config", str(workdir / "gateway.toml")]
    env = clean_env(
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        MOGATEWAY_LOG_LEVEL=log_level,
        MOGATEWAY_STATS_FLUSH_S="0.5",
        MOGATEWAY_NODE_NAME=NODE,
        **{f"MOGATEWAY_{k.upper()}": v for k, v in settings.items()},
    )
    gateway = ServedGateway(url="")
    gateway.workdir, gateway.env, gateway.args, gateway.served = workdir, env, args, None
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.close()
        gateway.stop()


def fresh_get(url: str, cookie: str | None = None) -> httpx.Response:
    """One GET on a new connection (so it may reach any worker), with the console's session cookie."""
    cookies = {"mogateway_console": cookie} if cookie else None
    with httpx.Client(cookies=cookies, timeout=10) as client:
        return client.get(url, follow_redirects=False)


def worker_of(page: httpx.Response) -> str:
    """The worker that served a console page (the page names it)."""
    found = re.search(r'class="muted node">node ([^<]+)<', page.text)
    assert found, page.text[:300]
    return found[1]


class SmscThread:
    """A simulated SMSC on an event loop of its own, in a thread (the gateway is another process)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="smsc", daemon=True)
        self._thread.start()
        self.smsc: SimulatedSmsc | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> SimulatedSmsc:
        self.smsc = self.run(SimulatedSmsc(port=self.port, system_id="gw", password="pw").start())
        return self.smsc

    def stop(self) -> None:
        if self.smsc is not None:
            self.run(self.smsc.stop())
            self.smsc = None

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


# Fixtures of the browser tests (tests/console, tests/portal): their conftest takes them from here.


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright; without it the tests fail, they never skip."""
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
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("Thanks for your vote")) as recorder:
        yield recorder


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[ServedGateway]:
    with served_gateway(tmp_path / "gateway") as gateway:
        yield gateway
