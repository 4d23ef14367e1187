"""Delivery receipts: the ``id:… stat:DELIVRD err:…`` text of SMPP 3.4 Appendix B, both ways.

A receipt is a deliver_sm with esm_class 0x04. The message id is taken from the receipted_message_id
TLV when present (it is exact), else from the text's ``id:`` field; the state from the message_state
TLV when present, else from ``stat:``. States map onto the gateway's three outcomes. The ``err:`` of a
receipt that is not ``delivered`` is described when the DLT error table passed in knows it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final, Literal

from mogateway.core.immutable import immutable
from mogateway.core.text import decode_short_message
from mogateway.smpp.constants import TlvTag
from mogateway.smpp.dlt import DltErrors
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.tlv import Tlv, find_tlv

__all__ = ["Receipt", "format_receipt_text", "parse_receipt", "receipt_tlvs"]

Outcome = Literal["delivered", "failed", "expired"]

# message_state TLV values (§5.3.2.35) → the receipt text's stat: words.
_STATE_WORDS: Final = {
    1: "ENROUTE",
    2: "DELIVRD",
    3: "EXPIRED",
    4: "DELETED",
    5: "UNDELIV",
    6: "ACCEPTD",
    7: "UNKNOWN",
    8: "REJECTD",
}
_OUTCOMES: Final[dict[str, Outcome]] = {
    "DELIVRD": "delivered",
    "DELIVERED": "delivered",
    "EXPIRED": "expired",
    "DELETED": "failed",
    "UNDELIV": "failed",
    "UNDELIVERABLE": "failed",
    "REJECTD": "failed",
    "REJECTED": "failed",
    "UNKNOWN": "failed",
}
_FIELD: Final = re.compile(r"(id|sub|dlvrd|submit date|done date|stat|err|text):", re.IGNORECASE)
# Matching the lower-cased text case-sensitively finds the same fields about twice as fast.
_FIELD_LOWER: Final = re.compile(r"(id|sub|dlvrd|submit date|done date|stat|err|text):")


@immutable
class Receipt:
    """What a receipt says. ``outcome`` is None for intermediate states (ENROUTE, ACCEPTD);
    ``dlt_meaning`` is what ``err`` means as a DLT code, when known and the message was not delivered."""

    message_id: str
    stat: str
    err: str
    outcome: Outcome | None
    text: str
    dlt_meaning: str | None = None

    @property
    def detail(self) -> str:
        """A short line for the timeline, with the meaning of a known DLT error code."""
        meaning = self.dlt_meaning
        return f"stat:{self.stat} err:{self.err}" + (f" ({meaning})" if meaning else "")


def _fields(text: str) -> dict[str, str]:
    """Field name (lower case) -> value, the first of each name, values cut at the next field."""
    lowered = text.lower()
    folded = len(lowered) != len(text)  # a character whose lower case is longer: positions would shift
    found: dict[str, str] = {}
    name, value_start = "", 0
    for match in _FIELD.finditer(text) if folded else _FIELD_LOWER.finditer(lowered):
        if name and name not in found:
            found[name] = text[value_start : match.start()].strip()
        name, value_start = match.group(1), match.end()
        if folded:
            name = name.lower()
    if name and name not in found:
        found[name] = text[value_start:].strip()
    return found


def _field(text: str, name: str) -> str:
    """The value of the first field ``name`` ("id", "stat" or "err") as :func:`_fields` finds it ("" when
    there is none), without reading the other fields: one ``find`` and one search for the next field.

    It is the same value: no field name ends in "id", "stat" or "err" but that name itself, so no
    earlier match of the field pattern can cover the first "<name>:" of the text, and the value ends
    where the pattern next matches."""
    lowered = text.lower()
    if len(lowered) != len(text):  # positions would shift (see _fields)
        return _fields(text).get(name, "")
    start = lowered.find(name + ":")
    if start < 0:
        return ""
    after = start + len(name) + 1
    following = _FIELD_LOWER.search(lowered, after)
    return text[after : following.start() if following is not None else len(text)].strip()


def parse_receipt(pdu: DeliverSm, dlt_errors: DltErrors | None = None) -> Receipt | None:
    """The receipt in ``pdu``, or None when it names no message id at all; its ``err:`` described from
    ``dlt_errors`` (None: not described). Only the fields its TLVs do not give are read from the text."""
    text = decode_short_message(pdu.short_message, pdu.data_coding, "latin1").text
    payload = find_tlv(pdu.tlvs, TlvTag.MESSAGE_PAYLOAD)
    if not text and payload is not None:
        text = decode_short_message(payload.value, pdu.data_coding, "latin1").text
    id_tlv = find_tlv(pdu.tlvs, TlvTag.RECEIPTED_MESSAGE_ID)
    message_id = id_tlv.as_str() if id_tlv is not None else _field(text, "id")
    if not message_id:
        return None
    state_tlv = find_tlv(pdu.tlvs, TlvTag.MESSAGE_STATE)
    if state_tlv is not None and len(state_tlv.value) == 1:
        stat = _STATE_WORDS.get(state_tlv.as_int(), "") or _field(text, "stat").upper() or "UNKNOWN"
    else:
        stat = _field(text, "stat").upper()
    err, outcome = _field(text, "err"), _OUTCOMES.get(stat)
    meaning = None
    if dlt_errors is not None and outcome != "delivered":
        meaning = dlt_errors.describe_receipt_error(err)
    return Receipt(message_id, stat, err, outcome, text, meaning)


def format_receipt_text(
    message_id: str, stat: str, err: str, submitted: datetime, done: datetime, text: str = ""
) -> str:
    """The Appendix B receipt text an SMSC sends (used by the simulator)."""
    delivered = "001" if stat == "DELIVRD" else "000"
    return (
        f"id:{message_id} sub:001 dlvrd:{delivered} submit date:{submitted:%y%m%d%H%M} "
        f"done date:{done:%y%m%d%H%M} stat:{stat} err:{err} text:{text[:20]}"
    )


def receipt_tlvs(message_id: str, stat: str) -> tuple[Tlv, ...]:
    """receipted_message_id and message_state TLVs for a receipt (used by the simulator)."""
    state = {v: k for k, v in _STATE_WORDS.items()}.get(stat, 7)
    return (Tlv.of_str(TlvTag.RECEIPTED_MESSAGE_ID, message_id), Tlv.of_int(TlvTag.MESSAGE_STATE, state))
