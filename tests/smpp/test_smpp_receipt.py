"""Delivery receipts: the Appendix B text and the TLVs, to the gateway's three outcomes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mogateway.smpp.constants import TlvTag
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.receipt import format_receipt_text, parse_receipt, receipt_tlvs
from mogateway.smpp.tlv import Tlv

TEXT = b"id:0a1b2c sub:001 dlvrd:001 submit date:2611051200 done date:2611051201 stat:DELIVRD err:000 text:Hi"


def test_text_receipt() -> None:
    receipt = parse_receipt(DeliverSm(esm_class=0x04, short_message=TEXT))
    assert receipt is not None
    assert (receipt.message_id, receipt.stat, receipt.err, receipt.outcome) == (
        "0a1b2c",
        "DELIVRD",
        "000",
        "delivered",
    )


def test_tlvs_win_over_text() -> None:
    pdu = DeliverSm(
        esm_class=0x04,
        short_message=TEXT,
        tlvs=(Tlv.of_str(TlvTag.RECEIPTED_MESSAGE_ID, "XYZ"), Tlv.of_int(TlvTag.MESSAGE_STATE, 3)),
    )
    receipt = parse_receipt(pdu)
    assert receipt is not None and (receipt.message_id, receipt.outcome) == ("XYZ", "expired")


@pytest.mark.parametrize(
    ("stat", "outcome"),
    [
        ("DELIVRD", "delivered"),
        ("UNDELIV", "failed"),
        ("REJECTD", "failed"),
        ("EXPIRED", "expired"),
        ("ENROUTE", None),
    ],
)
def test_states(stat: str, outcome: str | None) -> None:
    moment = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
    text = format_receipt_text("m9", stat, "000", moment, moment)
    pdu = DeliverSm(esm_class=0x04, short_message=text.encode(), tlvs=receipt_tlvs("m9", stat))
    assert pdu.is_receipt
    receipt = parse_receipt(pdu)
    assert receipt is not None and receipt.outcome == outcome and receipt.message_id == "m9"


def test_no_id_is_not_a_receipt() -> None:
    assert parse_receipt(DeliverSm(esm_class=0x04, short_message=b"stat:DELIVRD")) is None
