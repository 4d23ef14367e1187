"""Cutting a received byte stream into SMPP PDUs (sans-IO: the caller feeds bytes it read).

Rules stated before the code:

* ``command_length`` (the first 4 bytes of each header) says where a PDU ends; the framer waits until
  that many bytes arrived, then decodes them with :func:`mogateway.smpp.pdu.decode`.
* :meth:`Framer.feed` never raises: a PDU that cannot be decoded comes out as a :class:`PduError`, in
  order with the good ones, so the session can answer it.
* A PDU whose header is readable but whose body is bad is skipped (its length is known) and the stream
  goes on. A ``command_length`` below the header's or above the limit loses the framing: one fatal error,
  then nothing more; the connection must be closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mogateway.smpp.constants import HEADER, HEADER_LENGTH, Status
from mogateway.smpp.pdu import Pdu, PduError, decode

__all__ = ["DEFAULT_MAX_PDU_LENGTH", "Framer"]

#: Longest PDU accepted by default: a full 64 KiB message_payload plus headroom.
DEFAULT_MAX_PDU_LENGTH: Final = 70_000


class Framer:
    """Cuts a byte stream into PDUs. ``feed`` never raises: bad PDUs come out as :class:`PduError`.

    A PDU whose header is readable but whose body is bad is skipped (its length is known), so the
    session carries on after answering generic_nack. A bad ``command_length`` loses the framing: the
    framer yields one fatal error and ignores everything after it; the connection must be closed.
    """

    def __init__(self, max_length: int = DEFAULT_MAX_PDU_LENGTH) -> None:
        self._buffer = bytearray()
        self._max_length = max_length
        self.broken = False

    def feed(self, data: bytes) -> list[Pdu | PduError]:
        """Add received bytes; return every PDU (or error) now complete, in order."""
        return list(self._events(data))

    def _events(self, data: bytes) -> Iterator[Pdu | PduError]:
        if self.broken:
            return
        self._buffer += data
        while len(self._buffer) >= HEADER_LENGTH:
            length, command_id, _status, sequence = HEADER.unpack_from(self._buffer)
            if length < HEADER_LENGTH or length > self._max_length:
                self.broken = True
                self._buffer.clear()
                yield PduError(
                    Status.ESME_RINVCMDLEN,
                    f"command_length {length} outside {HEADER_LENGTH}..{self._max_length}",
                    sequence=sequence,
                    command_id=command_id,
                    fatal=True,
                )
                return
            if len(self._buffer) < length:
                return
            chunk = bytes(self._buffer[:length])
            del self._buffer[:length]
            try:
                yield decode(chunk)
            except PduError as exc:
                yield exc
            except Exception as exc:  # a decoder bug must not take the session down
                yield PduError(
                    Status.ESME_RSYSERR,
                    f"undecodable PDU ({type(exc).__name__})",
                    sequence=sequence,
                    command_id=command_id,
                )

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete PDU."""
        return len(self._buffer)
