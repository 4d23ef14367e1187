"""``mogateway simulate --whatsapp`` against real applications on 127.0.0.1: the WhatsApp-shaped callback
(the gateway's own bytes) and the answer judged as a WhatsApp reply (4,096-character messages)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from test_client_simulate import TOKEN, run, run_json

from mogateway.client import CallbackApp, InboundMessage
from mogateway.core import contract
from mogateway.testing.callback_apps import RecordingApp, serve_asgi

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "callback" / "whatsapp_text.json"


def test_sends_the_whatsapp_callback_the_gateway_would_send() -> None:
    app = RecordingApp(answer=b"Hi there")
    with serve_asgi(app) as url:
        code, output = run(url + "/wa", "--token", TOKEN, "--whatsapp", "HELLO")
    assert code == 0, output
    assert "WhatsApp MO 919812345678 -> 919876543210: 'HELLO'" in output
    assert "WhatsApp: 1 text message (split at 4,096 characters), 8 UTF-16 units" in output
    assert "SMS:" not in output
    (request,) = app.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    body = orjson.loads(request.body)
    # The seed's members in the seed's order, then "channel" after tsunix, then the typed member, as the
    # gateway sends a text; shortcode the business number.
    assert list(body) == [*orjson.loads(GOLDEN.read_bytes()), "whatsapp"]
    assert body["channel"] == "whatsapp" and body["shortcode"] == 919876543210
    member = body["whatsapp"]
    assert member["type"] == "text" and member["text"] == {"body": "HELLO"}
    assert member["wamid"].startswith("wamid.") and member["profile_name"] == "Test User"
    mo = contract.parse_callback_body(request.body)
    assert mo.channel == "whatsapp"
    assert request.body == contract.callback_body(mo, "ms")  # exactly the bytes the gateway would send


def test_a_client_library_application_sees_the_whatsapp_channel() -> None:
    seen: list[str] = []

    def handler(message: InboundMessage) -> str:
        seen.append(message.channel)
        return f"You said {message.message} on {message.channel}"

    with serve_asgi(CallbackApp(handler, TOKEN)) as url:
        code, doc = run_json(url, "--token", TOKEN, "--whatsapp", "--shortcode", "+91 98765 43299", "BAL")
    assert code == 0, doc
    assert seen == ["whatsapp"]
    assert doc["channel"] == "whatsapp" and doc["reply"] == "You said BAL on whatsapp"
    assert doc["whatsapp"] == {"messages": 1, "limit": 4096, "lengths": [24]} and "sms" not in doc


def test_a_long_answer_is_split_into_4096_character_messages_not_sms_parts() -> None:
    long = ("₹240 paid. " * 400).strip()  # 4,399 characters: two WhatsApp messages, dozens of SMS parts
    with serve_asgi(CallbackApp(lambda m: long, TOKEN)) as url:
        code, doc = run_json(url, "--token", TOKEN, "--whatsapp", "STATEMENT")
        sms_code, sms = run_json(url, "--token", TOKEN, "STATEMENT")
    assert code == 0 and sms_code == 0
    assert doc["whatsapp"]["messages"] == 2
    assert sum(doc["whatsapp"]["lengths"]) == len(long) and max(doc["whatsapp"]["lengths"]) <= 4096
    assert sms["channel"] == "sms" and sms["sms"]["parts"] > 2


def test_a_blank_answer_is_no_reply_on_whatsapp_too() -> None:
    with serve_asgi(RecordingApp(answer=b"  ")) as url:
        code, output = run(url, "--token", TOKEN, "--whatsapp", "HELLO")
    assert code == 3 and "no reply (blank)" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shortcode", "56767"], "--shortcode"),  # a shortcode is not a business number
        (["--dlt-templates", "t.csv"], "DLT does not apply to WhatsApp"),
        (["--msisdn", "14155550100"], "--msisdn"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    code, output = run("http://127.0.0.1:9/", "--token", TOKEN, "--whatsapp", *args, "HI")
    assert code == 2, output
    assert message in output and "Traceback" not in output
