"""End to end: MO pushed into the real gateway (``mogateway serve`` in a subprocess), callback to an
application built on the SDK (each adapter, on a real server), reply recorded in the journal."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from client_servers import ADAPTERS, serve_handler

from mogateway.client import InboundMessage, KeywordRouter
from mogateway.core.timeline import FINAL_STATES

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "admin-token-for-e2e-tests"
INGEST_TOKEN = "ingest-token-for-e2e-tests"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A real gateway on 127.0.0.1, with an httpx client on its API (admin token set)."""
    port = _free_port()
    workdir = tmp_path_factory.mktemp("gw")
    env = {
        **os.environ,
        "MOGATEWAY_DATABASE": str(workdir / "journal.db"),
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
        "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true",  # the application runs on loopback
        "MOGATEWAY_LOG_LEVEL": "warning",
    }
    log_path = workdir / "gateway.log"
    # A file, not a pipe: a chatty gateway can never block on a full pipe nobody reads.
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mogateway", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"gateway exited: {process.stderr.read().decode() if process.stderr else ''}"
                )
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start within 20 s")
            time.sleep(0.1)
        with httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
        ) as api:
            yield api
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _register(api: httpx.Client, shortcode: str, **extra: Any) -> tuple[str, str]:
    # The gateway generates the token; the application starts after, so the URL is set by a PATCH.
    created = api.post(
        "/v1/clients",
        json={
            "name": f"e2e {shortcode}",
            "shortcodes": [shortcode],
            "callback_url": "http://127.0.0.1:9/",
            **extra,
        },
    )
    assert created.status_code == 201, created.text
    return created.json()["id"], created.json()["token"]


def _push_and_settle(api: httpx.Client, shortcode: str, message: str) -> dict[str, Any]:
    pushed = httpx.post(
        str(api.base_url) + "/v1/inbound",
        json={"shortcode": shortcode, "msisdn": "919812012345", "message": message, "circle": "delhi"},
        headers={"authorization": f"Bearer {INGEST_TOKEN}"},
        timeout=10,
    )
    assert pushed.status_code == 202, pushed.text
    mo_id = pushed.json()["id"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        record: dict[str, Any] = api.get(f"/v1/messages/{mo_id}").json()
        if record["state"] in FINAL_STATES:
            return record
        time.sleep(0.05)
    raise AssertionError(f"message {mo_id} did not settle: {record}")


@pytest.mark.parametrize("kind", ADAPTERS)
def test_reply_travels_through_the_gateway(gateway: httpx.Client, kind: str) -> None:
    shortcode = {"asgi": "56701", "fastapi": "56702", "flask": "56703"}[kind]
    client_id, token = _register(gateway, shortcode)
    seen: list[InboundMessage] = []

    def balance(message: InboundMessage) -> str:
        seen.append(message)
        return f"Balance for {message.sender.sn_digits}:\\nRs 100"  # a literal \n, as in the seed sample

    router = KeywordRouter(default=lambda m: "Send BAL")
    router.add("BAL", balance)
    with serve_handler(kind, router, tokens=[token]) as url:
        assert gateway.patch(f"/v1/clients/{client_id}", json={"callback_url": url}).status_code == 200
        record = _push_and_settle(gateway, shortcode, "bal")

    assert record["state"] in {"replied", "delivered"}, record
    assert record["reply"] == "Balance for 012345:\nRs 100"
    (message,) = seen
    assert message.message_id == record["id"]
    assert (message.shortcode, message.msisdn, message.message) == (shortcode, "919812012345", "bal")
    assert (message.sender.sn, message.sender.sn_digits, message.sender.circle) == (12345, "012345", "delhi")
    assert message.time.tzinfo is not None and message.tsunix_unit == "ms"


def test_handler_over_budget_is_a_clean_no_reply_not_a_timeout(gateway: httpx.Client) -> None:
    client_id, token = _register(gateway, "56704", timeout_s=3)
    released = threading.Event()

    def slow(_: InboundMessage) -> str:
        # Longer than the budget and than the gateway's 3 s timeout: it answers only once the test has
        # seen the outcome (or after 10 s), so nothing is left running after the test.
        released.wait(10)
        return "too late"

    with serve_handler("asgi", slow, tokens=[token], budget_s=0.5) as url:
        gateway.patch(f"/v1/clients/{client_id}", json={"callback_url": url})
        try:
            record = _push_and_settle(gateway, "56704", "HI")
        finally:
            released.set()
    assert record["state"] == "no_reply", record


def test_seconds_tsunix_and_wrong_token(gateway: httpx.Client) -> None:
    client_id, token = _register(gateway, "56705", tsunix_unit="s")
    seen: list[InboundMessage] = []

    def record_it(message: InboundMessage) -> str:
        seen.append(message)
        return "ok"

    with serve_handler("asgi", record_it, tokens=[token]) as url:
        gateway.patch(f"/v1/clients/{client_id}", json={"callback_url": url})
        assert _push_and_settle(gateway, "56705", "HI")["reply"] == "ok"
        assert seen[0].tsunix_unit == "s"
        # After a rotation the application still only knows the old token: the gateway gets a 401.
        assert gateway.post(f"/v1/clients/{client_id}/token").status_code == 200
        assert _push_and_settle(gateway, "56705", "HI")["state"] == "http_error"
    assert len(seen) == 1
