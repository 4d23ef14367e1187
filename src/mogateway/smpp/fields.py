"""The fields of a PDU body, read and written: C-strings, single octets, octet strings and the TLVs
that end a body (sans-IO).

Rules stated before the code:

* A C-string has a maximum length that counts its NUL (SMPP 3.4 §3.1); text is Latin-1, byte for byte.
* Reading never goes past the body: every failure is a :class:`PduError` naming the field and carrying
  the status its own field has in §5.1.3 (a short body is ``ESME_RINVMSGLEN``), with the PDU's
  sequence number and command id so the answer can echo them.
* Writing a value that does not fit raises ValueError: the caller built a PDU SMPP 3.4 cannot carry.
"""

from __future__ import annotations

from mogateway.smpp.constants import Status
from mogateway.smpp.tlv import Tlv, decode_tlvs

__all__ = ["BodyReader", "PduError", "encode_cstring"]


class PduError(ValueError):
    """Input that is not a valid PDU. ``status`` is what to answer; ``fatal`` means framing is lost.

    ``sequence`` and ``command_id`` are filled when the header could be read, so a generic_nack (or the
    matching response) can echo the sequence number as §3.3 asks.
    """

    def __init__(
        self,
        status: Status,
        detail: str,
        *,
        sequence: int = 0,
        command_id: int | None = None,
        fatal: bool = False,
    ) -> None:
        super().__init__(f"{status.name}: {detail}")
        self.status = status
        self.detail = detail
        self.sequence = sequence
        self.command_id = command_id
        self.fatal = fatal


class BodyReader:
    """Reads fields from one PDU body; every failure is a PduError with the field's status."""

    __slots__ = ("command_id", "data", "pos", "sequence")

    def __init__(self, data: bytes, command_id: int, sequence: int) -> None:
        self.data = data
        self.pos = 0
        self.command_id = command_id
        self.sequence = sequence

    def error(self, status: Status, detail: str) -> PduError:
        return PduError(status, detail, sequence=self.sequence, command_id=self.command_id)

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def cstring(self, name: str, max_len: int, status: Status) -> str:
        """A NUL-terminated string of at most ``max_len`` bytes including the NUL."""
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise self.error(status, f"{name}: C-string has no terminating NUL (truncated)")
        if end - self.pos + 1 > max_len:
            raise self.error(status, f"{name}: {end - self.pos} bytes is longer than {max_len - 1}")
        value = self.data[self.pos : end].decode("latin-1")
        self.pos = end + 1
        return value

    def u8(self, name: str) -> int:
        if self.remaining < 1:
            raise self.error(Status.ESME_RINVMSGLEN, f"{name}: body ends before this field")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def octets(self, name: str, length: int) -> bytes:
        if self.remaining < length:
            raise self.error(
                Status.ESME_RINVMSGLEN, f"{name}: {length} bytes announced, {self.remaining} present"
            )
        value = self.data[self.pos : self.pos + length]
        self.pos += length
        return value

    def tlvs(self) -> tuple[Tlv, ...]:
        """Every TLV from here to the end of the body."""
        try:
            found = decode_tlvs(self.data, self.pos)
        except ValueError as exc:
            raise self.error(Status.ESME_RINVOPTPARSTREAM, str(exc)) from None
        self.pos = len(self.data)
        return found


def encode_cstring(value: str, name: str, max_len: int) -> bytes:
    """``value`` as a C-string of at most ``max_len`` bytes, NUL included (ValueError: it does not fit)."""
    data = value.encode("latin-1")
    if b"\x00" in data:
        raise ValueError(f"{name} must not contain NUL")
    if len(data) + 1 > max_len:
        raise ValueError(f"{name} is longer than {max_len - 1} bytes")
    return data + b"\x00"
