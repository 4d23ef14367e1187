"""InboundMessage: what an application gets from a callback body, and the one error type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from mogateway.client import InboundMessage, InvalidPayload, parse_message
from mogateway.core import contract
from mogateway.testing.payloads import make_callback, make_message

# Written by hand in the seed's shape, so the parser is not only tested against our own serializer.
SAMPLE = (
    b'{"shortcode":56767,"msisdn":919812345678,"message":"BAL savings",'
    b'"sender":{"cc":91,"ndc":9812,"sn":345678,"operator":"airtel","circle":"delhi"},'
    b'"tsiso":"2022-08-08T10:20:30.123Z","tsunix":1659954030123}'
)


def test_sample_body_gives_every_field() -> None:
    m = parse_message(SAMPLE, message_id="abc")
    assert isinstance(m, InboundMessage)
    assert (m.shortcode, m.shortcode_number) == ("56767", 56767)
    assert (m.msisdn, m.msisdn_number) == ("919812345678", 919812345678)
    assert m.message == "BAL savings"
    assert (m.sender.cc, m.sender.ndc, m.sender.sn) == (91, 9812, 345678)
    assert (m.sender.operator, m.sender.circle) == ("airtel", "delhi")
    assert m.time == datetime(2022, 8, 8, 10, 20, 30, 123000, tzinfo=UTC)
    assert m.time.tzinfo is not None
    assert (m.tsunix, m.tsunix_unit, m.tsunix_ms) == (1659954030123, "ms", 1659954030123)
    assert (m.keyword, m.argument) == ("BAL", "savings")
    assert m.message_id == "abc"


def test_tsunix_in_seconds_is_recognised_by_magnitude() -> None:
    body = SAMPLE.replace(b"1659954030123", b"1659954030")
    m = parse_message(body)
    assert (m.tsunix, m.tsunix_unit, m.tsunix_ms) == (1659954030, "s", 1659954030000)


def test_sn_that_lost_its_leading_zero_is_restored() -> None:
    body, _ = make_callback("HI", msisdn="919812012345")
    assert b'"sn":12345' in body  # a JSON number: the zero is gone on the wire
    m = parse_message(body)
    assert m.sender.sn == 12345
    assert m.sender.sn_digits == "012345"
    assert m.sender.msisdn == m.msisdn == "919812012345"


@pytest.mark.parametrize("unit", ["ms", "s"])
def test_payload_helpers_round_trip(unit: contract.TsunixUnit) -> None:
    at = datetime(2024, 1, 2, 3, 4, 5, 678999, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    m = make_message("hello", operator="jio", circle="mumbai", at=at, tsunix_unit=unit)
    assert m.time == at.replace(microsecond=678000).astimezone(UTC)  # truncated to the millisecond
    assert m.tsunix_unit == unit
    assert m.sender.operator == "jio" and m.sender.circle == "mumbai"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body"),
        (b"[]", "body"),
        (SAMPLE.replace(b'"message":"BAL savings",', b""), "message"),
        (SAMPLE.replace(b"919812345678", b"449812345678"), "msisdn"),
        (SAMPLE.replace(b'"cc":91', b'"cc":44'), "sender.cc"),
        (SAMPLE.replace(b"10:20:30.123Z", b"10:20:30Z"), "tsiso"),
        (SAMPLE.replace(b"1659954030123", b"1659954099123"), "tsunix"),
        (SAMPLE.replace(b'"sn":345678', b'"sn":345679'), "sender"),
    ],
)
def test_invalid_payload_names_the_field(body: bytes, field: str) -> None:
    with pytest.raises(InvalidPayload) as caught:
        parse_message(body)
    assert caught.value.field == field
    assert caught.value.reason
    assert str(caught.value).startswith(f"{field}: ")
    # One error type for applications, and still the contract's for code that catches that.
    assert isinstance(caught.value, contract.PayloadError)


def test_keyword_of_blank_message_is_empty() -> None:
    m = make_message("   ")
    assert (m.keyword, m.argument) == ("", "")
