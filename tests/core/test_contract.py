"""The callback contract as pure functions: golden body bytes, headers, time fields, parsing, outcome rules.

The golden files in tests/fixtures/callback are the contract; these tests fail when a byte changes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from mogateway import __version__
from mogateway.core.contract import (
    MAX_RESPONSE_BYTES,
    OutcomeKind,
    PayloadError,
    callback_body,
    callback_headers,
    format_tsiso,
    judge_response,
    parse_callback_body,
    parse_tsiso,
    tsunix,
)
from mogateway.core.message import Message, Sender

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
AT = datetime(2022, 8, 8, 10, 20, 30, 123999, tzinfo=UTC)
AT_MS = AT.replace(microsecond=123000)


def golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _mo(message: str, sender: Sender, at: datetime = AT, msisdn: str = "919810012345") -> Message:
    return Message(
        id="m1", shortcode="56767", msisdn=msisdn, text=message, received_at=at.timestamp(), sender=sender
    )


AIRTEL_DELHI = Sender(91, 9810, 12345, "airtel", "delhi")
GOLDEN_CASES = [
    ("basic_ms.json", _mo("HELLO", AIRTEL_DELHI), "ms"),
    ("basic_s.json", _mo("HELLO", AIRTEL_DELHI), "s"),
    ("hindi_emoji.json", _mo('नमस्ते 👋 "BAL"\n', Sender(91, 9810, 12345, "vi", "mumbai")), "ms"),
    (
        "sn_zeros_unknown_sender.json",
        _mo("hi", Sender(91, 9800, 1), datetime(2022, 8, 8, 10, 20, 30, tzinfo=UTC), "919800000001"),
        "ms",
    ),
]


# ------------------------------------------------------------------------------------ the body


@pytest.mark.parametrize(("name", "mo", "unit"), GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES])
def test_callback_body_is_byte_for_byte_the_golden_fixture(name: str, mo: Message, unit: str) -> None:
    assert callback_body(mo, unit) == golden(name)  # type: ignore[arg-type]


def test_golden_body_keys_types_and_order() -> None:
    """Spelled out once, so a reader sees what the golden bytes mean."""
    doc = json.loads(golden("basic_ms.json"))
    assert list(doc) == ["shortcode", "msisdn", "message", "sender", "tsiso", "tsunix"]
    assert list(doc["sender"]) == ["cc", "ndc", "sn", "operator", "circle"]
    for key in ("shortcode", "msisdn", "tsunix"):
        assert type(doc[key]) is int, key
    for key in ("cc", "ndc", "sn"):
        assert type(doc["sender"][key]) is int, key
    assert doc["sender"]["sn"] == 12345  # 919810012345: ndc 9810, sn 012345 -> the number 12345
    assert len(str(doc["tsunix"])) == 13
    assert len(str(json.loads(golden("basic_s.json"))["tsunix"])) == 10


def test_non_ascii_message_is_raw_utf8_not_escaped() -> None:
    body = golden("hindi_emoji.json")
    assert "नमस्ते 👋".encode() in body
    assert b"\\u" not in body


@pytest.mark.parametrize(("name", "mo", "unit"), GOLDEN_CASES, ids=[c[0] for c in GOLDEN_CASES])
def test_parse_round_trip_of_golden_bodies(name: str, mo: Message, unit: str) -> None:
    parsed = parse_callback_body(golden(name), message_id="m1")
    sent = datetime.fromtimestamp(mo.received_at, UTC)
    expected_time = sent.replace(microsecond=sent.microsecond // 1000 * 1000)
    assert parsed == mo.with_changes(received_at=expected_time.timestamp(), origin="callback")
    assert parsed.sender is not None and mo.sender is not None
    assert parsed.sender.sn_digits == mo.msisdn[6:]
    assert callback_body(parsed, unit) == golden(name)  # type: ignore[arg-type]


def test_callback_headers_match_golden() -> None:
    template = json.loads((FIXTURES / "headers.json").read_text())
    expected = {
        k: v.format(token="tok-123", version=__version__, message_id="mid-1") for k, v in template.items()
    }
    headers = callback_headers("tok-123", "mid-1", __version__)
    assert headers == expected
    assert list(headers) == list(expected)


# ------------------------------------------------------------------------------------ time fields


def test_tsiso_truncates_never_rounds_into_the_next_second() -> None:
    moment = datetime(2022, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert format_tsiso(moment) == "2022-12-31T23:59:59.999Z"
    assert tsunix(moment, "ms") == 1672531199999
    assert tsunix(moment, "s") == 1672531199


def test_time_fields_convert_other_offsets_to_utc() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2022, 8, 8, 15, 50, 30, 123999, tzinfo=ist)
    assert format_tsiso(moment) == "2022-08-08T10:20:30.123Z"
    assert tsunix(moment) == tsunix(AT) == 1659954030123


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError):
        format_tsiso(datetime(2022, 8, 8))


def test_parse_tsiso_is_strict() -> None:
    assert parse_tsiso("2022-08-08T10:20:30.123Z") == AT_MS
    for bad in ("2022-08-08T10:20:30Z", "2022-08-08T10:20:30.123+00:00", "2022-08-08 10:20:30.123Z"):
        with pytest.raises(ValueError):
            parse_tsiso(bad)


# ------------------------------------------------------------------------------------ parsing


def _doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = json.loads(golden("basic_ms.json"))
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({k: v for k, v in _doc().items() if k != "message"}, "message"),
        (_doc(msisdn=14155550123), "msisdn"),
        (_doc(msisdn=445550123456), "msisdn"),
        (_doc(message=5), "message"),
        (_doc(sender={"ndc": 9810, "sn": 12345}), "sender.cc"),
        (_doc(sender={"cc": 91, "ndc": 9811, "sn": 12345}), "sender"),
        (_doc(tsiso="2022-08-08T10:20:30Z"), "tsiso"),
        (_doc(tsunix=1659954099000), "tsunix"),
        (_doc(shortcode=True), "shortcode"),
    ],
)
def test_parse_names_the_bad_field(doc: dict[str, object], field: str) -> None:
    with pytest.raises(PayloadError) as info:
        parse_callback_body(json.dumps(doc))
    assert info.value.field == field


def test_parse_restores_an_omitted_sn_from_the_msisdn() -> None:
    parsed = parse_callback_body(json.dumps(_doc(sender={"cc": 91, "ndc": 9810})))
    assert parsed.sender == Sender(91, 9810, 12345, "", "")


def test_parse_refuses_non_json() -> None:
    with pytest.raises(PayloadError) as info:
        parse_callback_body(b"not json")
    assert info.value.field == "body"


# ------------------------------------------------------------------------------------ outcome rules

LATIN1 = "text/plain; charset=iso-8859-1"


@pytest.mark.parametrize(
    ("status", "content_type", "body", "kind", "reply"),
    [
        (200, "text/plain", b"hi", OutcomeKind.REPLY, "hi"),
        (200, "text/plain; charset=utf-8", "नमस्ते".encode(), OutcomeKind.REPLY, "नमस्ते"),
        (200, LATIN1, "café".encode("latin-1"), OutcomeKind.REPLY, "café"),
        (200, 'TEXT/Plain; Charset="ISO-8859-1"', "café".encode("latin-1"), OutcomeKind.REPLY, "café"),
        (200, None, b"no content type counts as text", OutcomeKind.REPLY, "no content type counts as text"),
        (200, "text/plain", b"Line 1\\nLine 2", OutcomeKind.REPLY, "Line 1\nLine 2"),
        (200, "text/plain", b"", OutcomeKind.BLANK, None),
        (200, "text/plain", b" \t\r\n ", OutcomeKind.BLANK, None),
        (200, "text/plain", b"\\n\\n", OutcomeKind.BLANK, None),
        (200, "application/json", b'{"reply": "hi"}', OutcomeKind.BAD_RESPONSE, None),
        (200, "text/html", b"<p>hi</p>", OutcomeKind.BAD_RESPONSE, None),
        (200, "text/plain; charset=utf-8", b"\xff\xfe bad", OutcomeKind.BAD_RESPONSE, None),
        (200, "text/plain; charset=no-such-charset", b"hi", OutcomeKind.BAD_RESPONSE, None),
        (500, "text/plain", b"Internal error: stack trace", OutcomeKind.HTTP_ERROR, None),
        (404, "text/plain", b"Not found", OutcomeKind.HTTP_ERROR, None),
        (204, None, b"", OutcomeKind.HTTP_ERROR, None),
        (302, "text/plain", b"moved", OutcomeKind.HTTP_ERROR, None),
    ],
)
def test_judge_response(
    status: int, content_type: str | None, body: bytes, kind: OutcomeKind, reply: str | None
) -> None:
    outcome = judge_response(status, content_type, body)
    assert outcome.kind is kind
    assert outcome.reply == reply
    assert outcome.sends_reply is (kind is OutcomeKind.REPLY)
    if kind is OutcomeKind.HTTP_ERROR:
        assert outcome.status == status


def test_newline_unescaping_can_be_switched_off() -> None:
    outcome = judge_response(200, "text/plain", b"Line 1\\nLine 2", unescape_newlines=False)
    assert outcome.reply == "Line 1\\nLine 2"


def test_oversized_answer_is_a_bad_response_even_when_it_is_text() -> None:
    outcome = judge_response(200, "text/plain", b"", oversized=True)
    assert outcome.kind is OutcomeKind.BAD_RESPONSE
    assert str(MAX_RESPONSE_BYTES) in outcome.detail
    assert outcome.reply is None
