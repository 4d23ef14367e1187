"""An SMSC simulator for tests and for watching the whole loop on a laptop (``mogateway smsc-sim``).

It accepts binds (checking system_id/password when given), answers enquire_link and unbind, injects MOs
as deliver_sm (single, multipart with UDH or SAR TLVs, GSM-7 or UCS-2), records every submit_sm it
receives, answers it with a message id (at once, or after ``submit_delay_s`` like an SMSC at a network's
distance) and, when asked for, sends a delivery receipt (esm_class 0x04, ``id:… stat:DELIVRD err:000``
text and the receipted_message_id / message_state TLVs).

It speaks through the gateway's own codec; interoperability with independent implementations is
tested separately (tests/interop).

It is fast enough to benchmark a gateway with (``bench/smpp_throughput.py``): its
:meth:`SimulatedSmsc.inject_burst` keeps a window of deliver_sm in flight without a task or timer per
message, receipts go out without a task of their own, and what is written in one turn of the event
loop leaves in one socket write.

Store and forward (:meth:`SimulatedSmsc.queue_mo`), as a real SMSC behaves across an ESME's crash: MOs
wait in an outbox per system_id and are written to whichever ESME is bound with that system_id, up to
``outbox_window`` unanswered per connection. An MO answered ``ESME_ROK`` is done and never sent again;
one still unanswered when its connection closes goes back to the front of the outbox and is delivered
again, with the same content, after the next bind; one answered with an error is delivered again after
``retry_delay_s``. Such MOs carry no SMSC message id TLV, so an ESME can only recognise a redelivery by
its content (``bench/chaos.py`` relies on exactly that).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import itertools
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from mogateway.smpp.constants import Status
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import (
    Bind,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    EnquireLinkResp,
    GenericNack,
    Pdu,
    PduError,
    SubmitSm,
    SubmitSmResp,
    Unbind,
    UnbindResp,
    encode,
)
from mogateway.smpp.receipt import format_receipt_text, receipt_tlvs
from mogateway.smpp.segments import Segment, plan_reply
from mogateway.testing.smsc_records import Injected, ReceivedSubmit, SmscClient, StoredMo

__all__ = ["Injected", "ReceivedSubmit", "SimulatedSmsc", "SmscClient", "StoredMo"]


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
        receipt_err: str | None = None,
        receipt_delay_s: float = 0.0,
        submit_delay_s: float = 0.0,
        on_event: Callable[[str], None] | None = None,
        outbox_window: int = 100,
        retry_delay_s: float = 1.0,
        receive_buffer: int | None = None,
    ) -> None:
        if outbox_window < 1:
            raise ValueError("outbox_window must be at least 1")
        self.host = host
        self.port = port
        self.system_id = system_id
        self.password = password
        self.receipt_stat = receipt_stat
        self.receipt_err = receipt_err  # the err: of receipts (None: 000 when delivered, else 001)
        self.receipt_delay_s = receipt_delay_s
        self.submit_delay_s = submit_delay_s
        self._unanswered_submits = 0
        self.on_event = on_event
        self.submits: list[ReceivedSubmit] = []
        self.clients: list[SmscClient] = []
        self.refuse_next: list[int] = []  # statuses to answer the next submit_sm with, in order
        #: Take the next this many submit_sm (recorded, like an SMSC that accepted them) and then close
        #: the connection without answering: the ESME cannot know whether they went out.
        self.drop_after_submit = 0
        self.receipt_answers: list[int] = []  # deliver_sm_resp statuses of the receipts sent
        self._server: asyncio.Server | None = None
        self._message_ids = itertools.count(0x1000)
        self._submit_arrived = asyncio.Event()
        self._bound = asyncio.Event()
        self._references = itertools.count(1)
        self.outbox_window = outbox_window
        self.retry_delay_s = retry_delay_s
        self.receive_buffer = receive_buffer
        #: Every MO ever queued with :meth:`queue_mo`, in order.
        self.stored: list[StoredMo] = []
        self._outboxes: dict[str, collections.deque[StoredMo]] = {}
        self._retries: set[asyncio.TimerHandle] = set()

    # ---------------------------------------------------------------------------------- lifecycle

    async def start(self) -> SimulatedSmsc:
        if self.receive_buffer is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        else:
            # Set before listen(): connections inherit it, and the window they advertise follows it.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            sock.bind((self.host, self.port))
            self._server = await asyncio.start_server(self._serve, sock=sock)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        for client in self.clients:
            client.writer.close()
            if client.pump is not None:
                client.pump.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

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
            self._requeue_held(client)
            for waiter in client.waiters.values():
                if not waiter.done():
                    waiter.set_exception(ConnectionError("ESME disconnected"))
            client.on_response.clear()
            client.flush()
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
            client.wake.set()  # its pump stops writing; what it holds is delivered again elsewhere
        elif isinstance(item, SubmitSm):
            self._submit(client, item)
        elif isinstance(item, DeliverSmResp | UnbindResp | EnquireLinkResp | GenericNack):
            handler = client.on_response.pop(item.sequence, None)
            if handler is not None:
                handler(item)
                return
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
        if bind.mode.can_receive and client.pump is None:
            client.pump = asyncio.get_running_loop().create_task(
                self._pump(client), name=f"smsc-outbox-{bind.system_id}"
            )
        self._log(f"bound {bind.system_id} as {bind.mode}")
        return BindResp(mode=bind.mode, system_id="mogwsim", sequence=bind.sequence)

    def _submit(self, client: SmscClient, pdu: SubmitSm) -> None:
        """Record and answer one submit_sm (after ``submit_delay_s``: an SMSC's own latency; the message
        counts as received at once, as an SMSC that stores before answering has it)."""
        if client.mode is None or not client.mode.can_transmit:
            client.send(SubmitSmResp(status=Status.ESME_RINVBNDSTS, sequence=pdu.sequence))
            return
        if self.refuse_next:
            client.send(SubmitSmResp(status=self.refuse_next.pop(0), sequence=pdu.sequence))
            return
        message_id = f"{next(self._message_ids):08x}"
        self.submits.append(ReceivedSubmit(pdu, message_id, client.system_id, time.monotonic()))
        self._submit_arrived.set()
        if self.on_event is not None:
            # Vendor TLVs (0x1400 and up) are where DLT ids travel: show them, they are what one checks.
            vendor = " ".join(
                f"0x{t.tag:04X}={t.value.decode('latin-1')}" for t in pdu.tlvs if t.tag >= 0x1400
            )
            self._log(
                f"submit_sm {message_id}: {pdu.source_addr} -> {pdu.destination_addr} dc={pdu.data_coding}"
                + (f" {vendor}" if vendor else "")
            )
        if self.drop_after_submit > 0:
            self.drop_after_submit -= 1
            self._log(f"closing the session without answering submit_sm {message_id}")
            client.writer.close()
            return
        if self.submit_delay_s:
            self._unanswered_submits += 1
            asyncio.get_running_loop().call_later(
                self.submit_delay_s, self._answer_submit, client, pdu, message_id, True
            )
        else:
            self._answer_submit(client, pdu, message_id, False)

    def _answer_submit(self, client: SmscClient, pdu: SubmitSm, message_id: str, late: bool) -> None:
        if late:
            self._unanswered_submits -= 1
            if client not in self.clients:
                return  # the ESME went away before the answer: it never learns the message id
        client.send(SubmitSmResp(message_id=message_id, sequence=pdu.sequence))
        if pdu.registered_delivery & 0x01:
            if self.receipt_delay_s:
                loop = asyncio.get_running_loop()
                loop.call_later(self.receipt_delay_s, self._send_receipt, client, pdu, message_id)
            else:  # after the submit_sm_resp, as an SMSC does
                asyncio.get_running_loop().call_soon(self._send_receipt, client, pdu, message_id)

    def unanswered_submits(self) -> int:
        """submit_sm received (and recorded) whose submit_sm_resp is not sent yet (``submit_delay_s``)."""
        return self._unanswered_submits

    def _send_receipt(self, client: SmscClient, pdu: SubmitSm, message_id: str) -> None:
        """Send the receipt for one submit_sm; its deliver_sm_resp status goes to :attr:`receipt_answers`."""
        now = datetime.now(UTC)
        stat = self.receipt_stat
        err = self.receipt_err or ("000" if stat == "DELIVRD" else "001")
        receipt = DeliverSm(
            source_addr=pdu.destination_addr,
            destination_addr=pdu.source_addr,
            esm_class=0x04,
            short_message=format_receipt_text(message_id, stat, err, now, now).encode(),
            tlvs=receipt_tlvs(message_id, stat),
        )
        target = client if client.can_receive else next((c for c in self.clients if c.can_receive), None)
        if target is None or target.writer.is_closing():
            return
        seq = next(target.sequence)
        target.on_response[seq] = lambda resp: self.receipt_answers.append(resp.status)
        target.send(replace(receipt, sequence=seq))

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
        receiver: int = 0,
    ) -> list[int]:
        """Deliver one MO (split into parts if long) to a bound receiver (``receiver``: its index in
        :meth:`receivers`, the first by default; another one is how an SMSC redelivers over another bind
        of the account); the statuses of the deliver_sm_resp, one per part sent. ``order`` (0-based part
        indexes) sends parts in that order, repeating or leaving out parts as listed; ``repeat`` sends
        the whole thing that many times."""
        targets = self.receivers()
        if len(targets) <= receiver:
            raise RuntimeError(f"no receiver {receiver}: {len(targets)} ESME(s) bound to receive")
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
                response = await self._deliver(targets[receiver], pdu, timeout)
                statuses.append(response.status)
                self._log(f"deliver_sm {source} -> {destination}: {Status.describe(response.status)}")
        return statuses

    async def inject_burst(
        self,
        messages: Sequence[tuple[str, str, str]],
        *,
        window: int = 100,
        timeout: float = 600.0,
        rate: float | None = None,
    ) -> list[Injected]:
        """Deliver ``(source, destination, text)`` MOs (one deliver_sm each: the text must fit one SMS)
        to the first bound receiver, keeping up to ``window`` unanswered, as an SMSC under load does.
        With ``rate``, the ``i``-th deliver_sm is written no sooner than ``i / rate`` seconds after the
        first (a steady load; the window still applies).

        Returns one :class:`Injected` per message once every one is answered; raises TimeoutError when
        answers stop coming for ``timeout`` seconds, ConnectionError when the ESME goes away.
        """
        targets = self.receivers()
        if not targets:
            raise RuntimeError("no ESME is bound as receiver or transceiver")
        client = targets[0]
        results = [Injected(source) for source, _, _ in messages]
        room = asyncio.Event()
        outstanding = 0
        answered = 0

        def answer(index: int) -> Callable[[Pdu], None]:
            def on_response(response: Pdu) -> None:
                nonlocal outstanding, answered
                result = results[index]
                result.answered_at, result.status = time.monotonic(), response.status
                outstanding -= 1
                answered += 1
                room.set()

            return on_response

        clock = time.monotonic
        began = clock()
        for index, (source, destination, text) in enumerate(messages):
            (segment,) = self.segments_for(text, split="udh", data_coding=None)
            if rate is not None:
                ahead = began + index / rate - clock()
                if ahead > 0.0005:
                    await asyncio.sleep(ahead)
            while outstanding >= window:
                room.clear()
                await self._wait_room(room, client, timeout)
            seq = next(client.sequence)
            client.on_response[seq] = answer(index)
            client.send_bytes(
                encode(
                    DeliverSm(
                        source_addr_ton=1,
                        source_addr_npi=1,
                        source_addr=source,
                        destination_addr=destination,
                        data_coding=segment.data_coding,
                        short_message=segment.short_message,
                        sequence=seq,
                    )
                )
            )
            results[index].sent_at = clock()
            outstanding += 1
        while answered < len(messages):
            room.clear()
            await self._wait_room(room, client, timeout)
        return results

    async def _wait_room(self, room: asyncio.Event, client: SmscClient, timeout: float) -> None:
        if client not in self.clients:
            raise ConnectionError("the ESME disconnected during the burst")
        try:
            await asyncio.wait_for(room.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no deliver_sm_resp for {timeout} s") from None
        if client not in self.clients:
            raise ConnectionError("the ESME disconnected during the burst")

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

    # --------------------------------------------------------------------------------- stalling

    def pause_reading(self) -> None:
        """Stop reading from every connected ESME, as a stalled SMSC does: what they write waits in the
        socket buffers (set ``receive_buffer`` small to make that little) and then in the ESME."""
        for client in self.clients:
            transport = client.writer.transport
            if isinstance(transport, asyncio.ReadTransport) and not transport.is_closing():
                transport.pause_reading()

    def resume_reading(self) -> None:
        for client in self.clients:
            transport = client.writer.transport
            if isinstance(transport, asyncio.ReadTransport) and not transport.is_closing():
                transport.resume_reading()

    def ping(self) -> None:
        """Send an enquire_link to every bound ESME (its answer is read and dropped)."""
        for client in self.clients:
            if client.mode is not None:
                seq = next(client.sequence)
                client.on_response[seq] = lambda _response: None
                client.send(EnquireLink(sequence=seq))

    # ------------------------------------------------------------------------- store and forward

    def queue_mo(self, source: str, destination: str, text: str, *, system_id: str | None = None) -> StoredMo:
        """Keep a single-part MO until an ESME bound as ``system_id`` (default: the simulator's own)
        answers it ESME_ROK, delivering it again after every drop or error (see the module docstring).
        The deliver_sm carries no SMSC message id: only its content identifies it."""
        owner = system_id if system_id is not None else self.system_id
        if owner is None:
            raise ValueError("name the system_id whose binds receive this MO")
        segments = self.segments_for(text, split="udh", data_coding=None)
        if len(segments) != 1:
            raise ValueError("queue_mo takes a text that fits one SMS")
        pdu = DeliverSm(
            source_addr_ton=1,
            source_addr_npi=1,
            source_addr=source,
            destination_addr=destination,
            data_coding=segments[0].data_coding,
            short_message=segments[0].short_message,
        )
        mo = StoredMo(source, destination, text, owner, pdu)
        self.stored.append(mo)
        self._outboxes.setdefault(owner, collections.deque()).append(mo)
        self._wake(owner)
        return mo

    def outbox_size(self, system_id: str | None = None) -> int:
        """MOs not acknowledged yet: waiting in the outbox or written and unanswered."""
        return sum(
            1
            for mo in self.stored
            if not mo.acknowledged and (system_id is None or mo.system_id == system_id)
        )

    def unanswered(self) -> list[StoredMo]:
        """Outbox MOs written to an ESME and not answered yet, over every connection."""
        return [mo for client in self.clients for mo in client.holding.values()]

    async def wait_outbox_empty(self, timeout: float = 30.0) -> None:
        """Wait until every queued MO is acknowledged; raises TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while (left := self.outbox_size()) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{left} queued MOs still unacknowledged after {timeout} s")
            await asyncio.sleep(0.02)

    def _wake(self, system_id: str) -> None:
        for client in self.clients:
            if client.system_id == system_id and client.pump is not None:
                client.wake.set()

    async def _pump(self, client: SmscClient) -> None:
        """Write outbox MOs to ``client`` while it is bound as a receiver, keeping the window."""
        box = self._outboxes.setdefault(client.system_id, collections.deque())
        while client in self.clients and client.can_receive and not client.writer.is_closing():
            # No await inside: nothing can set ``wake`` between this loop and the clear() below.
            while box and len(client.holding) < self.outbox_window:
                self._write_stored(client, box.popleft())
            client.wake.clear()
            await client.wake.wait()
        # Unbound but still connected: hand back what it holds (a closed connection does this itself).
        if client in self.clients:
            self._requeue_held(client)

    def _write_stored(self, client: SmscClient, mo: StoredMo) -> None:
        seq = next(client.sequence)
        client.holding[seq] = mo
        mo.attempts += 1
        mo.written_at = time.monotonic()

        def on_response(response: Pdu) -> None:
            if client.holding.pop(seq, None) is None:
                return  # already handed back (the ESME unbound): the redelivery is under way
            mo.statuses.append(response.status)
            client.wake.set()
            if response.status == Status.ESME_ROK:
                mo.acked_at = time.monotonic()
            else:  # a temporary (or any) error: an SMSC tries again later
                self._retry_later(mo)

        client.on_response[seq] = on_response
        client.send(replace(mo.pdu, sequence=seq))

    def _retry_later(self, mo: StoredMo) -> None:
        def again() -> None:
            self._retries.discard(handle)
            self._outboxes.setdefault(mo.system_id, collections.deque()).append(mo)
            self._wake(mo.system_id)

        handle = asyncio.get_running_loop().call_later(self.retry_delay_s, again)
        self._retries.add(handle)

    def _requeue_held(self, client: SmscClient) -> None:
        """Put the MOs ``client`` left unanswered back at the front of their outbox, in order."""
        if client.pump is not None:
            client.wake.set()
        if not client.holding:
            return
        held = [client.holding[seq] for seq in sorted(client.holding)]
        client.holding.clear()
        box = self._outboxes.setdefault(client.system_id, collections.deque())
        for mo in reversed(held):
            mo.dropped += 1
            box.appendleft(mo)
        self._log(f"{len(held)} unanswered deliver_sm of {client.system_id} kept for redelivery")
        self._wake(client.system_id)
