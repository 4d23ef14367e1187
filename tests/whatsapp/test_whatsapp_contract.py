"""The callback of a WhatsApp MO: the seed's contract plus ``"channel": "whatsapp"`` after ``tsunix``,
pinned by golden fixtures; SMS bodies keep no ``channel`` (tests/core/test_contract.py pins those)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mogateway.core.contract import PayloadError, callback_body, parse_callback_body
from mogateway.core.message import Message, Sender, check_destination

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
AT = 1764216000.0
VI = Sender(91, 9812, 345678, "vi", "")


def golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _wa(text: str) -> Message:
    return Message(
        id="m1",
        shortcode="919876543210",
        msisdn="919812345678",
        text=text,
        received_at=AT,
        origin="whatsapp:106540352242922",
        source_id="wamid.HBgMOTE5ODEyMzQ1Njc4FQIAEhgg",
        sender=VI,
    )


CASES = [
    ("whatsapp_text.json", _wa("HELLO"), "ms"),
    ("whatsapp_button_reply.json", _wa("Yes, book it ✅"), "ms"),
    ("whatsapp_media_no_caption_s.json", _wa("").with_changes(shortcode="919876543299"), "s"),
]


@pytest.mark.parametrize(("name", "mo", "unit"), CASES, ids=[c[0] for c in CASES])
def test_whatsapp_body_is_byte_for_byte_the_golden_fixture(name: str, mo: Message, unit: str) -> None:
    assert callback_body(mo, unit) == golden(name)  # type: ignore[arg-type]


def test_channel_is_the_last_member_and_only_for_whatsapp() -> None:
    doc = json.loads(golden("whatsapp_text.json"))
    assert list(doc) == ["shortcode", "msisdn", "message", "sender", "tsiso", "tsunix", "channel"]
    assert doc["channel"] == "whatsapp"
    assert type(doc["shortcode"]) is int
    sms = _wa("HELLO").with_changes(origin="smpp:airtel", shortcode="56767")
    assert b"channel" not in callback_body(sms)
    assert sms.channel == "sms" and sms.wamid is None
    assert _wa("x").channel == "whatsapp" and _wa("x").wamid == "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAEhgg"


@pytest.mark.parametrize(("name", "mo", "unit"), CASES, ids=[c[0] for c in CASES])
def test_the_sdk_parses_whatsapp_bodies_back(name: str, mo: Message, unit: str) -> None:
    parsed = parse_callback_body(golden(name), message_id="m1")
    assert parsed.channel == "whatsapp"
    assert parsed.shortcode == mo.shortcode
    assert callback_body(parsed, unit) == golden(name)  # type: ignore[arg-type]


def test_an_unknown_channel_is_named() -> None:
    doc = json.loads(golden("whatsapp_text.json"))
    doc["channel"] = "telegram"
    with pytest.raises(PayloadError) as info:
        parse_callback_body(json.dumps(doc))
    assert info.value.field == "channel"


def test_destination_rules_by_channel() -> None:
    assert check_destination(_wa("x")) == "919876543210"
    with pytest.raises(ValueError, match="11 to 15 digits"):
        check_destination(_wa("x").with_changes(shortcode="56767"))
    with pytest.raises(ValueError, match="3 to 10 digits"):
        check_destination(_wa("x").with_changes(origin="http"))
