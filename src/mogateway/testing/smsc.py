"""An SMSC simulator for tests and for watching the whole loop on a laptop (``mogateway smsc-sim``).

It accepts binds (checking system_id/password when given), answers enquire_link and unbind, injects MOs
as deliver_sm (single, multipart with UDH or SAR TLVs, GSM-7 or UCS-2), records every submit_sm it
receives, answers it with a message id and, when asked for, sends a delivery receipt (esm_class 0x04,
``id:… stat:DELIVRD err:000`` text and the receipted_message_id / message_state TLVs).

It speaks through the gateway's own codec; interoperability with independent implementations is
tested separately (tests/interop).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from mogateway.smpp.pdu import (
    Bind,
    BindMode,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    EnquireLinkResp,
    Framer,
    GenericNack,
    Pdu,
    PduError,
    Status,
    SubmitSm,
    SubmitSmResp,
    Unbind,
    UnbindResp,
    encode,
)
from mogateway.smpp.receipt import format_receipt_text, receipt_tlvs
from mogateway.smpp.segments import Segment, plan_reply

__all__ = ["ReceivedSubmit", "SimulatedSmsc", "SmscClient"]


@dataclass(frozen=True, slots=True)
class ReceivedSubmit:
    """A submit_sm as the simulator received it, with the message id it answered."""

    pdu: SubmitSm
    message_id: str
    system_id: str
    at: float


@dataclass(eq=False)
class SmscClient:
    """One connected ESME."""

    writer: asyncio.StreamWriter
    system_id: str = ""
    mode: BindMode | None = None
    waiters: dict[int, asyncio.Future[Pdu]] = field(default_factory=dict)
    sequence: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def can_receive(self) -> bool:
        return self.mode is not None and self.mode.can_receive

    def send(self, pdu: Pdu) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode(pdu))


class SimulatedSmsc:
    """An asyncio SMSC on ``host:port`` (port 0 picks a free one; see :attr:`port`)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        system_id: str | None = None,
        password: str | None = None,
        receipt_stat: str = "DELIVRD",
        receipt_delay_s: float = 0.0,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.system_id = system_id
        self.password = password
        self.receipt_stat = receipt_stat
        self.receipt_delay_s = receipt_delay_s
        self.on_event = on_event
        self.submits: list[ReceivedSubmit] = []
        self.clients: list[SmscClient] = []
        self.refuse_next: list[int] = []  # statuses to answer the next submit_sm with, in order
        self._server: asyncio.Server | None = None
        self._message_ids = itertools.count(0x1000)
        self._submit_arrived = asyncio.Event()
        self._bound = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._references = itertools.count(1)

    # ---------------------------------------------------------------------------------- lifecycle

    async def start(self) -> SimulatedSmsc:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for client in self.clients:
            client.writer.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> SimulatedSmsc:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _log(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)

    # ----------------------------------------------------------------------------------- serving

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = SmscClient(writer)
        self.clients.append(client)
        framer = Framer()
        try:
            while data := await reader.read(65536):
                for item in framer.feed(data):
                    self._on_item(client, item)
                await writer.drain()
                if framer.broken:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.clients.remove(client)
            for waiter in client.waiters.values():
                if not waiter.done():
                    waiter.set_exception(ConnectionError("ESME disconnected"))
            writer.close()
            if client.mode is not None:
                self._log(f"unbound {client.system_id}")

    def _on_item(self, client: SmscClient, item: Pdu | PduError) -> None:
        if isinstance(item, PduError):
            self._log(f"bad PDU: {item}")
            client.send(GenericNack(status=item.status, sequence=item.sequence))
            return
        if isinstance(item, Bind):
            client.send(self._bind(client, item))
        elif isinstance(item, EnquireLink):
            client.send(EnquireLinkResp(sequence=item.sequence))
        elif isinstance(item, Unbind):
            client.send(UnbindResp(sequence=item.sequence))
            client.mode = None
        elif isinstance(item, SubmitSm):
            client.send(self._submit(client, item))
        elif isinstance(item, DeliverSmResp | UnbindResp | EnquireLinkResp | GenericNack):
            waiter = client.waiters.pop(item.sequence, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(item)
        else:
            client.send(GenericNack(status=Status.ESME_RINVCMDID, sequence=item.sequence))

    def _bind(self, client: SmscClient, bind: Bind) -> BindResp:
        ok = (self.system_id is None or hmac.compare_digest(bind.system_id, self.system_id)) and (
            self.password is None or hmac.compare_digest(bind.password.encode(), self.password.encode())
        )
        if not ok:
            self._log(f"refused bind from {bind.system_id!r}")
            return BindResp(mode=bind.mode, status=Status.ESME_RBINDFAIL, sequence=bind.sequence)
        client.system_id, client.mode = bind.system_id, bind.mode
        self._bound.set()
        self._log(f"bound {bind.system_id} as {bind.mode}")
        return BindResp(mode=bind.mode, system_id="mogwsim", sequence=bind.sequence)

    def _submit(self, client: SmscClient, pdu: SubmitSm) -> SubmitSmResp:
        if client.mode is None or not client.mode.can_transmit:
            return SubmitSmResp(status=Status.ESME_RINVBNDSTS, sequence=pdu.sequence)
        if self.refuse_next:
            return SubmitSmResp(status=self.refuse_next.pop(0), sequence=pdu.sequence)
        message_id = f"{next(self._message_ids):08x}"
        self.submits.append(ReceivedSubmit(pdu, message_id, client.system_id, time.monotonic()))
        self._submit_arrived.set()
        self._log(f"submit_sm {message_id}: {pdu.source_addr} -> {pdu.destination_addr} dc={pdu.data_coding}")
        if pdu.registered_delivery & 0x01:
            self._spawn(self._receipt_later(client, pdu, message_id))
        return SubmitSmResp(message_id=message_id, sequence=pdu.sequence)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _receipt_later(self, client: SmscClient, pdu: SubmitSm, message_id: str) -> None:
        if self.receipt_delay_s:
            await asyncio.sleep(self.receipt_delay_s)
        now = datetime.now(UTC)
        stat = self.receipt_stat
        err = "000" if stat == "DELIVRD" else "001"
        receipt = DeliverSm(
            source_addr=pdu.destination_addr,
            destination_addr=pdu.source_addr,
            esm_class=0x04,
            short_message=format_receipt_text(message_id, stat, err, now, now).encode(),
            tlvs=receipt_tlvs(message_id, stat),
        )
        target = client if client.can_receive else next((c for c in self.clients if c.can_receive), None)
        if target is not None:
            with contextlib.suppress(Exception):
                await self._deliver(target, receipt)

    # --------------------------------------------------------------------------------- injecting

    async def wait_bound(self, timeout: float = 10.0) -> None:
        """Wait until some ESME is bound."""
        await asyncio.wait_for(self._bound.wait(), timeout)

    def receivers(self) -> list[SmscClient]:
        return [c for c in self.clients if c.can_receive]

    async def _deliver(self, client: SmscClient, pdu: DeliverSm, timeout: float = 30.0) -> Pdu:
        seq = next(client.sequence)
        waiter: asyncio.Future[Pdu] = asyncio.get_running_loop().create_future()
        client.waiters[seq] = waiter
        client.send(replace(pdu, sequence=seq))
        await client.writer.drain()
        return await asyncio.wait_for(waiter, timeout)

    async def inject_mo(
        self,
        source: str,
        destination: str,
        text: str,
        *,
        split: Literal["udh", "sar", "payload"] = "udh",
        data_coding: int | None = None,
        source_ton: int = 1,
        source_npi: int = 1,
        order: list[int] | None = None,
        repeat: int = 1,
        timeout: float = 30.0,
    ) -> list[int]:
        """Deliver one MO (split into parts if long) to the first bound receiver; the statuses of the
        deliver_sm_resp, one per part sent. ``order`` (0-based part indexes) sends parts in that order,
        repeating or leaving out parts as listed; ``repeat`` sends the whole thing that many times."""
        targets = self.receivers()
        if not targets:
            raise RuntimeError("no ESME is bound as receiver or transceiver")
        segments = self.segments_for(text, split=split, data_coding=data_coding)
        indexes = order if order is not None else list(range(len(segments)))
        statuses = []
        for _ in range(repeat):
            for index in indexes:
                seg = segments[index]
                pdu = DeliverSm(
                    source_addr_ton=source_ton,
                    source_addr_npi=source_npi,
                    source_addr=source,
                    destination_addr=destination,
                    esm_class=seg.esm_class,
                    data_coding=seg.data_coding,
                    short_message=seg.short_message,
                    tlvs=seg.tlvs,
                )
                response = await self._deliver(targets[0], pdu, timeout)
                statuses.append(response.status)
                self._log(f"deliver_sm {source} -> {destination}: {Status.describe(response.status)}")
        return statuses

    def segments_for(
        self, text: str, *, split: Literal["udh", "sar", "payload"], data_coding: int | None
    ) -> list[Segment]:
        """The deliver_sm contents for an MO ``text`` (GSM-7 when it fits, else UCS-2)."""
        reference = next(self._references)
        segments = plan_reply(text, default="gsm7", split=split, reference=reference)
        if data_coding is not None and data_coding != segments[0].data_coding:
            raise ValueError(f"text needs data_coding {segments[0].data_coding}, not {data_coding}")
        return segments

    async def send_raw(self, data: bytes) -> None:
        """Write raw bytes to every bound receiver (for malformed-input tests)."""
        for client in self.receivers():
            client.writer.write(data)
            await client.writer.drain()

    async def wait_submits(self, count: int, timeout: float = 10.0) -> list[ReceivedSubmit]:
        """Wait until at least ``count`` submit_sm were received; all of them."""
        deadline = time.monotonic() + timeout
        while len(self.submits) < count:
            self._submit_arrived.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(self.submits)} of {count} submit_sm arrived")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._submit_arrived.wait(), remaining)
        return list(self.submits)
