"""What the SMSC simulator (``testing.smsc``) keeps: the ESMEs connected to it, and records of what
passed — the submit_sm it received, the deliver_sm of a burst, the MOs of its store-and-forward outbox.

An :class:`SmscClient` writes what is sent in one turn of the event loop in one socket write, so the
simulator can keep up with the gateway in a benchmark.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from mogateway.smpp.pdu import BindMode, DeliverSm, Pdu, SubmitSm, encode

__all__ = ["Injected", "ReceivedSubmit", "SmscClient", "StoredMo"]


@dataclass(frozen=True, slots=True)
class ReceivedSubmit:
    """A submit_sm as the simulator received it, with the message id it answered."""

    pdu: SubmitSm
    message_id: str
    system_id: str
    at: float


@dataclass(slots=True)
class Injected:
    """One deliver_sm of :meth:`SimulatedSmsc.inject_burst`: when it was written and how it was answered
    (``status`` None: no answer before the connection closed)."""

    source: str
    sent_at: float = 0.0
    answered_at: float = 0.0
    status: int | None = None


@dataclass(eq=False)
class StoredMo:
    """An MO in the store-and-forward outbox (:meth:`SimulatedSmsc.queue_mo`) and what became of it."""

    source: str
    destination: str
    text: str
    system_id: str
    #: The deliver_sm written for it each time (sequence number aside): the same on every redelivery.
    pdu: DeliverSm
    #: deliver_sm written for it so far (more than one: it was redelivered).
    attempts: int = 0
    #: Every deliver_sm_resp status it got, in order.
    statuses: list[int] = field(default_factory=list)
    #: Times its connection closed while it was unanswered.
    dropped: int = 0
    #: time.monotonic() of its last deliver_sm written, and of its ESME_ROK (None: not acknowledged yet).
    written_at: float = 0.0
    acked_at: float | None = None

    @property
    def acknowledged(self) -> bool:
        return self.acked_at is not None


@dataclass(eq=False)
class SmscClient:
    """One connected ESME."""

    writer: asyncio.StreamWriter
    system_id: str = ""
    mode: BindMode | None = None
    waiters: dict[int, asyncio.Future[Pdu]] = field(default_factory=dict)
    #: Responses handled by a plain callback (bursts, receipts): no future, no task.
    on_response: dict[int, Callable[[Pdu], None]] = field(default_factory=dict)
    sequence: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: Outbox MOs written on this connection and not answered yet, by sequence number.
    holding: dict[int, StoredMo] = field(default_factory=dict)
    #: Set whenever the outbox pump of this connection may have something to do.
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None
    _out: list[bytes] = field(default_factory=list)

    @property
    def can_receive(self) -> bool:
        return self.mode is not None and self.mode.can_receive

    def send(self, pdu: Pdu) -> None:
        """Queue ``pdu``; what is queued in one turn of the event loop leaves in one socket write."""
        self.send_bytes(encode(pdu))

    def send_bytes(self, data: bytes) -> None:
        if not self._out:
            asyncio.get_running_loop().call_soon(self.flush)
        self._out.append(data)

    def flush(self) -> None:
        out, self._out = self._out, []
        if out and not self.writer.is_closing():
            self.writer.write(b"".join(out))
