"""Text ↔ short_message octets for SMPP: choosing data_coding, splitting replies, reading MO parts.

Rules stated before the code:

* A reply goes as GSM-7 (data_coding 0, in the link's default alphabet) when every character fits that
  alphabet, else as UCS-2 (data_coding 8). Sizes: GSM-7 160 septets single / 153 per part; octet
  alphabets (Latin-1, ASCII on data_coding 0) 140 / 134; UCS-2 70 / 67 UTF-16 units.
* A long reply is split as the link wants: ``udh`` (esm_class UDHI 0x40 and a 6-byte header with an
  8-bit reference), ``sar`` (sar_msg_ref_num / sar_total_segments / sar_segment_seqnum TLVs) or
  ``payload`` (one submit_sm whose whole text is in message_payload; the SMSC splits).
* An MO part is read from message_payload when present, else short_message; its place in a long
  message from the UDH (when esm_class has UDHI) or the SAR TLVs.
"""

from __future__ import annotations

from typing import Final, Literal

from mogateway.core.immutable import immutable
from mogateway.core.reassembly import PartInfo, parse_udh
from mogateway.core.text import (
    Alphabet,
    DefaultAlphabet,
    TextEncodeError,
    decode_short_message,
    encode_text,
    gsm7_septets,
    split_text,
)
from mogateway.smpp.constants import TlvTag
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.tlv import Tlv, find_tlv

__all__ = ["ESM_UDHI", "Segment", "SplitMethod", "choose_alphabet", "join_segments", "mo_part", "plan_reply"]

SplitMethod = Literal["udh", "sar", "payload"]
ESM_UDHI: Final = 0x40
_DATA_CODING: Final[dict[str, int]] = {"gsm7": 0x00, "latin1": 0x00, "ascii": 0x00, "ucs2": 0x08}
# (single, per part) in the alphabet's units
_SIZES: Final[dict[str, tuple[int, int]]] = {
    "gsm7": (160, 153),
    "latin1": (140, 134),
    "ascii": (140, 134),
    "ucs2": (70, 67),
}


@immutable
class Segment:
    """What one submit_sm of a reply carries (the rest of the PDU comes from the link)."""

    data_coding: int
    short_message: bytes
    esm_class: int = 0
    tlvs: tuple[Tlv, ...] = ()


def choose_alphabet(text: str, default: DefaultAlphabet) -> Alphabet:
    """``default`` (sent as data_coding 0) when ``text`` fits it, else ``ucs2``."""
    if default == "gsm7":
        return "gsm7" if gsm7_septets(text) is not None else "ucs2"
    try:
        encode_text(text, default)
    except TextEncodeError:
        return "ucs2"
    return default


def plan_reply(text: str, *, default: DefaultAlphabet, split: SplitMethod, reference: int) -> list[Segment]:
    """The submit_sm contents for ``text``: one segment when it fits, else split by ``split``.

    ``reference`` numbers the set (the low 8 bits in a UDH, 16 bits in SAR).
    """
    alphabet = choose_alphabet(text, default)
    data_coding = _DATA_CODING[alphabet]
    single, per_part = _SIZES[alphabet]
    whole = encode_text(text, alphabet)
    # Its length in the alphabet's units, read off the octets: an unpacked septet (ESC + septet for the
    # extension table, which counts two) is one octet, a UTF-16 unit two, an octet alphabet's unit one.
    units = len(whole) // 2 if alphabet == "ucs2" else len(whole)
    if units <= single:
        return [Segment(data_coding, whole)]
    if split == "payload":
        return [Segment(data_coding, b"", tlvs=(Tlv(TlvTag.MESSAGE_PAYLOAD, whole),))]
    chunks = split_text(text, alphabet, per_part)
    total = len(chunks)
    if total > 255:
        raise ValueError(f"text needs {total} parts; at most 255 fit a concatenated message")
    segments = []
    for number, chunk in enumerate(chunks, start=1):
        data = encode_text(chunk, alphabet)
        if split == "udh":
            udh = bytes((0x05, 0x00, 0x03, reference & 0xFF, total, number))
            segments.append(Segment(data_coding, udh + data, esm_class=ESM_UDHI))
        else:
            sar = (
                Tlv.of_int(TlvTag.SAR_MSG_REF_NUM, reference & 0xFFFF),
                Tlv.of_int(TlvTag.SAR_TOTAL_SEGMENTS, total),
                Tlv.of_int(TlvTag.SAR_SEGMENT_SEQNUM, number),
            )
            segments.append(Segment(data_coding, data, tlvs=sar))
    return segments


def mo_part(pdu: DeliverSm) -> tuple[PartInfo | None, bytes]:
    """Where ``pdu`` sits in a long message (None: it is whole) and its payload octets.

    Raises ValueError for a UDH that overruns the message (the caller answers a permanent error).
    """
    payload_tlv = find_tlv(pdu.tlvs, TlvTag.MESSAGE_PAYLOAD)
    data = payload_tlv.value if payload_tlv is not None and not pdu.short_message else pdu.short_message
    info: PartInfo | None = None
    if pdu.esm_class & ESM_UDHI:
        info, data = parse_udh(data)
    ref = find_tlv(pdu.tlvs, TlvTag.SAR_MSG_REF_NUM)
    total = find_tlv(pdu.tlvs, TlvTag.SAR_TOTAL_SEGMENTS)
    seq = find_tlv(pdu.tlvs, TlvTag.SAR_SEGMENT_SEQNUM)
    if info is None and ref is not None and total is not None and seq is not None:
        try:
            info = PartInfo(ref.as_int(), total.as_int(), seq.as_int())
        except ValueError:
            info = None
    if info is not None and not info.is_multipart:
        info = None
    return info, data


def join_segments(segments: list[Segment], default: DefaultAlphabet = "gsm7") -> str:
    """The text a handset shows for ``segments`` (used to check splitting; parts in order)."""
    pieces = []
    for seg in segments:
        pdu = DeliverSm(
            data_coding=seg.data_coding,
            short_message=seg.short_message,
            esm_class=seg.esm_class,
            tlvs=seg.tlvs,
        )
        pieces.append(mo_part(pdu)[1])
    return decode_short_message(b"".join(pieces), segments[0].data_coding, default).text
