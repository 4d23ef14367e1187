"""End to end: MO pushed into the real gateway (``mogateway serve`` in a subprocess), callback to an
application built on the SDK (each adapter, on a real server), reply recorded in the journal."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from client_gateway import push_until_final, running_gateway
from client_servers import ADAPTERS, serve_handler

from mogateway.client import InboundMessage, KeywordRouter

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "admin-token-for-e2e-tests"
INGEST_TOKEN = "ingest-token-for-e2e-tests"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A real gateway on 127.0.0.1, with an httpx client on its API (admin token set)."""
    with running_gateway(tmp_path_factory.mktemp("gw"), os.environ, ADMIN_TOKEN, INGEST_TOKEN) as api:
        yield api


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
    inbound = {"shortcode": shortcode, "msisdn": "919812012345", "message": message, "circle": "delhi"}
    return push_until_final(api, INGEST_TOKEN, inbound)


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
