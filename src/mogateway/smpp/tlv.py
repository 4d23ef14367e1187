"""SMPP 3.4 optional parameters (TLVs): a 16-bit tag, a 16-bit length and that many value bytes.

Rules stated before the code:

* A TLV is kept as its raw value, **in the order it arrived**: known tags have names and typed readers,
  unknown and vendor tags (e.g. India's DLT 0x1400/0x1401) are passed through byte for byte in both
  directions.
* TLVs follow a PDU's mandatory fields to the end of its body; :func:`decode_tlvs` reads them all and
  :func:`encode_tlvs` writes them back, tag and length big-endian.
* A malformed TLV stream raises ValueError here; the PDU decoder turns it into the SMPP status
  ``ESME_RINVOPTPARSTREAM`` (this module knows nothing of PDUs).
"""

from __future__ import annotations

import struct
from typing import Final

from mogateway.core.immutable import immutable
from mogateway.smpp.constants import TlvTag

__all__ = ["Tlv", "decode_tlvs", "encode_tlvs", "find_tlv"]

_TAG_LENGTH: Final = struct.Struct(">HH")

# How the value of each known tag is read: an unsigned integer of n bytes, a C-string, or octets.
_TLV_INT_SIZES: Final[dict[int, int]] = {
    TlvTag.DEST_ADDR_SUBUNIT: 1,
    TlvTag.DEST_NETWORK_TYPE: 1,
    TlvTag.DEST_BEARER_TYPE: 1,
    TlvTag.SOURCE_ADDR_SUBUNIT: 1,
    TlvTag.SOURCE_NETWORK_TYPE: 1,
    TlvTag.SOURCE_BEARER_TYPE: 1,
    TlvTag.SOURCE_TELEMATICS_ID: 1,
    TlvTag.DEST_TELEMATICS_ID: 2,
    TlvTag.QOS_TIME_TO_LIVE: 4,
    TlvTag.PAYLOAD_TYPE: 1,
    TlvTag.MS_MSG_WAIT_FACILITIES: 1,
    TlvTag.PRIVACY_INDICATOR: 1,
    TlvTag.USER_MESSAGE_REFERENCE: 2,
    TlvTag.USER_RESPONSE_CODE: 1,
    TlvTag.SOURCE_PORT: 2,
    TlvTag.DESTINATION_PORT: 2,
    TlvTag.SAR_MSG_REF_NUM: 2,
    TlvTag.LANGUAGE_INDICATOR: 1,
    TlvTag.SAR_TOTAL_SEGMENTS: 1,
    TlvTag.SAR_SEGMENT_SEQNUM: 1,
    TlvTag.SC_INTERFACE_VERSION: 1,
    TlvTag.CALLBACK_NUM_PRES_IND: 1,
    TlvTag.NUMBER_OF_MESSAGES: 1,
    TlvTag.DPF_RESULT: 1,
    TlvTag.SET_DPF: 1,
    TlvTag.MS_AVAILABILITY_STATUS: 1,
    TlvTag.DELIVERY_FAILURE_REASON: 1,
    TlvTag.MORE_MESSAGES_TO_SEND: 1,
    TlvTag.MESSAGE_STATE: 1,
    TlvTag.USSD_SERVICE_OP: 1,
    TlvTag.DISPLAY_TIME: 1,
    TlvTag.SMS_SIGNAL: 2,
    TlvTag.MS_VALIDITY: 1,
    TlvTag.ITS_REPLY_TYPE: 1,
}
_TLV_CSTRINGS: Final = frozenset({TlvTag.ADDITIONAL_STATUS_INFO_TEXT, TlvTag.RECEIPTED_MESSAGE_ID})


@immutable
class Tlv:
    """One optional parameter: a 16-bit tag and its raw value, kept exactly as received."""

    tag: int
    value: bytes

    @property
    def name(self) -> str:
        """The name of the tag (``message_payload``, ``dlt_pe_id``), or its hex form (``0x1500``) for a tag
        it does not know."""
        try:
            return TlvTag(self.tag).name.lower()
        except ValueError:
            return f"0x{self.tag:04X}"

    def as_int(self) -> int:
        """The value as a big-endian unsigned integer (for integer tags)."""
        if not self.value or len(self.value) > 4:
            raise ValueError(f"{self.name}: {len(self.value)} bytes is not an integer value")
        return int.from_bytes(self.value, "big")

    def as_str(self) -> str:
        """The value as text: the bytes before the first NUL, decoded as ASCII/Latin-1."""
        return self.value.split(b"\x00", 1)[0].decode("latin-1")

    def decoded(self) -> int | str | bytes:
        """The value typed by its tag: int for integer tags, str for C-strings, bytes otherwise."""
        size = _TLV_INT_SIZES.get(self.tag)
        if size is not None and len(self.value) == size:
            return self.as_int()
        if self.tag in _TLV_CSTRINGS:
            return self.as_str()
        return self.value

    @classmethod
    def of_int(cls, tag: int, value: int, size: int | None = None) -> Tlv:
        """An integer TLV; ``size`` defaults to the tag's size in SMPP 3.4."""
        width = size or _TLV_INT_SIZES.get(tag)
        if width is None:
            raise ValueError(f"give the size of tag 0x{tag:04X}")
        return cls(tag, value.to_bytes(width, "big"))

    @classmethod
    def of_str(cls, tag: int, value: str, *, nul: bool = True) -> Tlv:
        """A text TLV (NUL-terminated C-string unless ``nul`` is False, as vendor tags often are)."""
        data = value.encode("latin-1")
        return cls(tag, data + b"\x00" if nul else data)


def find_tlv(tlvs: tuple[Tlv, ...], tag: int) -> Tlv | None:
    """The first TLV with ``tag``, or None."""
    for tlv in tlvs:
        if tlv.tag == tag:
            return tlv
    return None


def decode_tlvs(data: bytes, start: int = 0) -> tuple[Tlv, ...]:
    """Every TLV in ``data[start:]``, in order. Raises ValueError when the stream is cut short."""
    found: list[Tlv] = []
    pos, end = start, len(data)
    while pos < end:
        if end - pos < 4:
            raise ValueError(f"{end - pos} stray bytes after TLVs")
        tag, length = _TAG_LENGTH.unpack_from(data, pos)
        pos += 4
        if end - pos < length:
            raise ValueError(f"TLV 0x{tag:04X} announces {length} bytes, {end - pos} present")
        found.append(Tlv(tag, data[pos : pos + length]))
        pos += length
    return tuple(found)


def encode_tlvs(tlvs: tuple[Tlv, ...]) -> bytes:
    """The wire form of ``tlvs``, in order. Raises ValueError for a tag or value that does not fit."""
    out = bytearray()
    for tlv in tlvs:
        if not 0 <= tlv.tag <= 0xFFFF or len(tlv.value) > 0xFFFF:
            raise ValueError(f"TLV 0x{tlv.tag:04X} does not fit (tag 16 bits, value at most 65535 bytes)")
        out += _TAG_LENGTH.pack(tlv.tag, len(tlv.value)) + tlv.value
    return bytes(out)
