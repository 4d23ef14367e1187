"""End to end, signed: the real gateway (``mogateway serve`` in a subprocess) signs the callbacks of a
client registered with signing, and applications built on each SDK adapter verify them; a captured
callback tampered with, or replayed late, is refused with 401 by each adapter; a secret rotation keeps
both secrets valid for the grace period and only the new one after it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
from client_gateway import push_until_final, running_gateway
from client_servers import ADAPTERS, serve_handler

from mogateway.client import InboundMessage, SignatureVerifier
from mogateway.core.contract import parse_tsiso
from mogateway.testing.recorder import CallbackRecorder, RecordedCall

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "admin-token-for-signed-e2e"
INGEST_TOKEN = "ingest-token-for-signed-e2e"
GRACE_S = 2.0
_shortcodes = iter(range(57000, 58000))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A real gateway on 127.0.0.1 with a short signing grace, and an httpx client on its API."""
    workdir = tmp_path_factory.mktemp("gw")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    grace = {"MOGATEWAY_SIGNING_GRACE_S": str(GRACE_S)}
    with running_gateway(workdir, base_env, ADMIN_TOKEN, INGEST_TOKEN, **grace) as api:
        yield api


def register(api: httpx.Client, callback_url: str = "http://127.0.0.1:9/") -> dict[str, Any]:
    shortcode = str(next(_shortcodes))
    created = api.post(
        "/v1/clients",
        json={
            "name": f"signed {shortcode}",
            "shortcodes": [shortcode],
            "callback_url": callback_url,
            "sign_callbacks": True,
        },
    )
    assert created.status_code == 201, created.text
    client: dict[str, Any] = created.json()
    assert client["signing_secret"]
    return client


def point(api: httpx.Client, client: dict[str, Any], url: str) -> None:
    assert api.patch(f"/v1/clients/{client['id']}", json={"callback_url": url}).status_code == 200


def push_and_settle(api: httpx.Client, client: dict[str, Any], message: str) -> dict[str, Any]:
    inbound = {"shortcode": client["shortcodes"][0], "msisdn": "919812012345", "message": message}
    return push_until_final(api, INGEST_TOKEN, inbound)


def outcome(record: dict[str, Any]) -> dict[str, Any]:
    return [ev for ev in record["timeline"] if ev["event"] == "outcome"][-1]


def signed_echo(message: InboundMessage) -> str:
    return f"signed: {message.message}"


@pytest.mark.parametrize("kind", ADAPTERS)
def test_signed_callbacks_from_the_gateway_are_verified_by_each_adapter(
    gateway: httpx.Client, kind: str
) -> None:
    client = register(gateway)
    with serve_handler(
        kind, signed_echo, tokens=[client["token"]], signing_secrets=[client["signing_secret"]]
    ) as url:
        point(gateway, client, url)
        record = push_and_settle(gateway, client, "HELLO")
    assert record["state"] == "replied", record
    assert record["reply"] == "signed: HELLO"


def test_an_adapter_with_the_wrong_secret_refuses_the_gateways_callback(gateway: httpx.Client) -> None:
    client = register(gateway)
    with serve_handler(
        "asgi", signed_echo, tokens=[client["token"]], signing_secrets=["not-the-secret"]
    ) as url:
        point(gateway, client, url)
        record = push_and_settle(gateway, client, "HELLO")
    assert record["state"] == "http_error" and outcome(record)["status"] == 401
    assert record["reply"] is None


def recording(seen: list[str]) -> Callable[[InboundMessage], str]:
    """A handler that notes each message it is given and answers "ok"."""

    def handler(message: InboundMessage) -> str:
        seen.append(message.message)
        return "ok"

    return handler


def replay(url: str, call: RecordedCall, body: bytes | None = None) -> httpx.Response:
    # The request as the gateway sent it, minus what the HTTP client sets itself.
    headers = {k: v for k, v in call.headers.items() if k not in ("host", "content-length", "connection")}
    return httpx.post(url, content=call.body if body is None else body, headers=headers, timeout=10)


def test_a_captured_callback_tampered_or_replayed_late_is_refused_by_each_adapter(
    gateway: httpx.Client,
) -> None:
    with CallbackRecorder.in_thread() as recorder:
        client = register(gateway, recorder.url)
        push_and_settle(gateway, client, "PAY 100")
        (call,) = recorder.calls
    tampered = call.body.replace(b"PAY 100", b"PAY 999")
    assert tampered != call.body

    tolerance_s = 2.0
    later_s = 0.0  # how far the applications' clock is ahead of this host's

    def clock() -> float:
        return time.time() + later_s

    seen: dict[str, list[str]] = {kind: [] for kind in ADAPTERS}
    with contextlib.ExitStack() as stack:
        urls = {
            kind: stack.enter_context(
                serve_handler(
                    kind,
                    recording(seen[kind]),
                    tokens=[client["token"]],
                    signing_secrets=SignatureVerifier(
                        client["signing_secret"], tolerance_s=tolerance_s, clock=clock
                    ),
                )
            )
            for kind in ADAPTERS
        }
        for kind, url in urls.items():
            fresh = replay(url, call)
            assert (fresh.status_code, fresh.text) == (200, "ok"), kind
            forged = replay(url, call, tampered)
            assert forged.status_code == 401, kind
            assert orjson.loads(forged.content)["reason"] == "no_match"

        # The same request, as it arrives when the tolerance is over (by the applications' clock).
        sent_at = int(call.headers["x-mogateway-timestamp"])
        later_s = max(0.0, sent_at + tolerance_s + 1.1 - time.time())
        for kind, url in urls.items():
            late = replay(url, call)
            assert late.status_code == 401, kind
            assert orjson.loads(late.content)["reason"] == "stale"
    # Only the fresh, untouched request reached each handler.
    assert seen == {kind: ["PAY 100"] for kind in ADAPTERS}


def test_a_rotation_keeps_both_secrets_valid_during_the_grace_then_only_the_new(
    gateway: httpx.Client,
) -> None:
    client = register(gateway)
    old = client["signing_secret"]
    rotated = gateway.post(f"/v1/clients/{client['id']}/signing-secret")
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["signing_secret"]
    grace_until = parse_tsiso(rotated.json()["signing_grace_until"]).timestamp()
    token = [client["token"]]

    with (
        serve_handler("asgi", signed_echo, tokens=token, signing_secrets=[old]) as old_only,
        serve_handler("fastapi", signed_echo, tokens=token, signing_secrets=[new]) as new_only,
        serve_handler("flask", signed_echo, tokens=token, signing_secrets=[new, old]) as both,
    ):
        for url in (old_only, new_only, both):  # during the grace: every application accepts
            point(gateway, client, url)
            assert push_and_settle(gateway, client, "DURING")["state"] == "replied", url

        # The grace is the gateway's (a subprocess): wait until it says the grace is over.
        deadline = time.monotonic() + max(0.0, grace_until - time.time()) + 10
        while gateway.get(f"/v1/clients/{client['id']}").json()["signing_grace_until"] is not None:
            assert time.monotonic() < deadline, "the signing grace never ended"
            time.sleep(0.05)
        assert time.time() >= grace_until
        point(gateway, client, old_only)
        after = push_and_settle(gateway, client, "AFTER")
        assert after["state"] == "http_error" and outcome(after)["status"] == 401
        for url in (new_only, both):
            point(gateway, client, url)
            assert push_and_settle(gateway, client, "AFTER")["state"] == "replied", url
