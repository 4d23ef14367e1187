"""The callback on the wire: the bytes and headers a real application receives equal the golden fixtures.

On the module's multi-worker gateway; the golden bodies name shortcode 56767, so the tests take turns on
it: each removes its client at the end (``client_on_56767``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import ServeGateway

from mogateway import __version__
from mogateway.core.contract import parse_callback_body
from mogateway.testing.recorder import CallbackRecorder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
RECEIVED_AT = "2022-08-08T10:20:30.123999Z"


@pytest.fixture(autouse=True)
def client_on_56767(gw: ServeGateway) -> Iterator[None]:
    """The golden bodies name shortcode 56767: each test registers its client there, removed after it."""
    yield
    for client in gw.admin("GET", "/v1/clients").json()["clients"]:
        if "56767" in client["shortcodes"]:
            assert gw.admin("DELETE", f"/v1/clients/{client['id']}").status_code == 204


def golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.mark.parametrize(
    "msisdn", ["919810012345", "9810012345", "09810012345", "+91 98100 12345", 919810012345]
)
def test_every_accepted_msisdn_form_reaches_the_app_as_the_golden_body(
    gw: ServeGateway, app: CallbackRecorder, msisdn: str | int
) -> None:
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url)
    accepted = gw.push(
        "56767",
        "HELLO",
        msisdn=msisdn,
        operator="airtel",
        circle="delhi",
        received_at=RECEIVED_AT,  # type: ignore[arg-type]
    )
    (call,) = app.wait_for_calls(1)
    assert call.body == golden("basic_ms.json")
    template = json.loads((FIXTURES / "headers.json").read_text())
    for name, value in template.items():
        expected = value.format(token=client["token"], version=__version__, message_id=accepted["id"])
        assert call.headers[name] == expected, name
    assert call.method == "POST" and call.path == "/callback"
    assert gw.message(accepted["id"])["msisdn"] == "919810012345"


def test_a_client_asking_for_seconds_gets_a_10_digit_tsunix(gw: ServeGateway, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=["56767"], callback_url=app.url, tsunix_unit="s")
    gw.push("56767", "HELLO", operator="airtel", circle="delhi", received_at=RECEIVED_AT)
    (call,) = app.wait_for_calls(1)
    assert call.body == golden("basic_s.json")


def test_hindi_and_emoji_travel_as_raw_utf8(gw: ServeGateway, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=["56767"], callback_url=app.url)
    gw.push("56767", 'नमस्ते 👋 "BAL"\n', operator="Vodafone Idea", circle="Mumbai", received_at=RECEIVED_AT)
    (call,) = app.wait_for_calls(1)
    assert call.body == golden("hindi_emoji.json")  # operator/circle names normalised to their ids


def test_without_received_at_the_time_fields_are_now_and_agree(
    gw: ServeGateway, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=["56767"], callback_url=app.url)
    accepted = gw.push("56767", "HELLO")
    (call,) = app.wait_for_calls(1)
    mo = parse_callback_body(call.body)  # checks tsiso shape and that tsunix (ms) matches it
    assert abs(mo.received_at - time.time()) < 10
    assert len(str(call.json()["tsunix"])) == 13
    assert gw.message(accepted["id"])["received_at"] == call.json()["tsiso"]


def test_the_token_sent_is_the_clients_and_not_the_gateways(gw: ServeGateway, app: CallbackRecorder) -> None:
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url)
    gw.push("56767", "HELLO")
    (call,) = app.wait_for_calls(1)
    sent = call.headers["authorization"].removeprefix("Bearer ")
    assert sent == client["token"]
    assert sent not in (gw.admin_token, gw.ingest_token)
    assert len(sent) >= 40  # 256 random bits, URL-safe
