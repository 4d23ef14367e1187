"""What a bind does with each deliver_sm: store the MO (joining long ones) or record the receipt.

Rules stated before the code:

* The status returned is the deliver_sm_resp status. ``ESME_ROK`` only once the MO is in the journal
  (or was already there: a redelivery); ``ESME_RX_T_APPN`` when storing failed, so the SMSC tries again.
  An MO refused by intake (not an Indian mobile...) is stored as rejected and acknowledged: sending it
  again would not change the answer.
* A part of a long MO is held unanswered until its message is stored, at most ``PART_ACK_HOLD_S``; an
  SMSC that waits for each answer before sending the next part would otherwise stall until the
  reassembly timeout. A part answered that way lives only in memory until its message completes.
* Redeliveries are one message, over whichever bind they come. The source id is the SMSC's
  receipted_message_id when an MO carries one (``s:<id>``); otherwise a content id, ``c:<hash>:<ms>``
  (the hash covers sender, shortcode, coding, octets and part numbers). The journal deduplicates on
  (origin, source id), and, inside the write that stores an MO, takes an MO from the same number with
  the same SMSC id or the same content hash received within the bind's ``dedupe_window_s`` for the
  same MO (``core.repeats.find_repeats``): a redelivery over another bind of the account, in another
  worker, is recognised; the same text sent again later is a new MO. Nothing of it lives in the bind,
  so it holds across restarts, binds and workers.
* Receipts (esm_class 0x04) go to ``journal.record_deliveries`` and are always acknowledged unless the
  journal fails; a receipt for an unknown message is acknowledged and counted. Like MOs, the receipts
  of one turn of the event loop are recorded with one call, and answered without a task of their own.
* The MOs of every deliver_sm handled in one turn of the event loop (at most ``MAX_INTAKE_BATCH``) are
  stored with one ``Intake.accept`` call: one journal write instead of one per MO, and no added wait.
  Each deliver_sm is still answered only once its own MO is stored; if the batch cannot be stored,
  every deliver_sm in it is answered ESME_RX_T_APPN.
* A single-part MO (nearly all traffic) goes from :meth:`InboundHandler.begin` straight into that batch
  and is answered from the batch's result, without a task of its own; receipts and parts of long MOs
  run :meth:`InboundHandler.__call__` in a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

from mogateway.config.smpp import BindConfig
from mogateway.core.message import Arrival, Message, Rejection
from mogateway.core.numbering import NumberRejected, normalize_msisdn
from mogateway.core.ports import Stored
from mogateway.core.reassembly import Assembled, Reassembler
from mogateway.core.repeats import content_source_id
from mogateway.core.text import decode_short_message
from mogateway.edges.dlt_errors import parse_receipt
from mogateway.service.journal_health import JournalUnavailable
from mogateway.service.running_loop import RunningLoop
from mogateway.smpp.constants import Status, TlvTag
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.segments import mo_part
from mogateway.smpp.tlv import find_tlv

__all__ = ["MAX_INTAKE_BATCH", "PART_ACK_HOLD_S", "DeliveryJournal", "InboundHandler", "IntakeLike"]

Item = TypeVar("Item")
Result = TypeVar("Result")

log = logging.getLogger("mogateway.smpp")

#: Longest a part of a long MO waits for its answer before it is acknowledged from memory.
PART_ACK_HOLD_S: Final = 3.0
#: How long to look again for the reply a receipt names before counting the receipt as unknown.
RECEIPT_RETRY_DELAYS_S: Final = (0.2, 1.0, 5.0)
#: Most MOs stored by one ``Intake.accept`` call.
MAX_INTAKE_BATCH: Final = 500


class IntakeLike(Protocol):
    """The part of ``mogateway.service.intake.Intake`` a bind uses."""

    async def accept(self, items: Sequence[Arrival]) -> list[Stored]: ...


class DeliveryJournal(Protocol):
    """The part of the journal a bind uses for receipts (``core.ports.ReceiptStore``)."""

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]: ...


class _TurnBatcher(Generic[Item, Result]):
    """Gathers the items handed over during one turn of the event loop into one call of ``run`` (MOs
    into one ``Intake.accept``, receipts into one ``record_deliveries``).

    Needs no timer: the deliver_sm of one socket read all reach :meth:`submit` in the same turn, and
    the flush is scheduled with ``call_soon``, so it runs right after them.
    """

    def __init__(
        self, run: Callable[[list[Item]], Awaitable[Sequence[Result]]], max_batch: int = MAX_INTAKE_BATCH
    ) -> None:
        self._run = run
        self._max = max_batch
        self._items: list[tuple[Item, asyncio.Future[Result]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = RunningLoop()

    def submit(self, item: Item) -> asyncio.Future[Result]:
        """A future of the result for ``item``, set once its batch ran (or ``run``'s exception)."""
        loop = self._loop()
        future: asyncio.Future[Result] = loop.create_future()
        if not self._items:
            loop.call_soon(self._flush)
        self._items.append((item, future))
        if len(self._items) >= self._max:
            self._flush()
        return future

    def _flush(self) -> None:
        items, self._items = self._items, []
        if items:
            task = self._loop().create_task(self._batch(items))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _batch(self, items: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results = await self._run([item for item, _ in items])
            if len(results) != len(items):
                raise RuntimeError(f"{len(results)} results for {len(items)} items")
        except Exception as exc:  # every deliver_sm of the batch gets a temporary error
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(items, results, strict=True):  # lengths checked above
            if not future.done():
                future.set_result(result)

    async def close(self) -> None:
        """Let batches already handed over finish (their MOs are being stored)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)


class InboundHandler:
    """The ``on_deliver`` of one bind."""

    def __init__(
        self,
        config: BindConfig,
        intake: IntakeLike,
        journal: DeliveryJournal,
        *,
        clock: Callable[[], float] = time.monotonic,
        part_ack_hold_s: float = PART_ACK_HOLD_S,
    ) -> None:
        self.config = config
        self.origin = f"smpp:{config.name}"
        self._intake: _TurnBatcher[Arrival, Stored] = _TurnBatcher(intake.accept)
        self._receipts: _TurnBatcher[tuple[str, str, str], str | None] = _TurnBatcher(
            journal.record_deliveries
        )
        self._journal = journal
        self._clock = clock
        self._hold = part_ack_hold_s
        self._parts: Reassembler[asyncio.Future[int]] = Reassembler(config.reassembly_timeout_s)
        self._expiry: asyncio.Task[None] | None = None
        self.counters: dict[str, int] = {
            "mo_stored": 0,
            "mo_duplicates": 0,
            "mo_rejected": 0,
            "mo_incomplete": 0,
            "receipts": 0,
            "receipts_unknown": 0,
        }
        self._tasks: set[asyncio.Task[int]] = set()
        self._late_receipts: set[asyncio.Task[None]] = set()

    def begin(self, pdu: DeliverSm, answer: Callable[[int], None]) -> None:
        """Handle ``pdu`` and call ``answer`` with the deliver_sm_resp status once it is known (not at
        all if the handler is closed first: the SMSC then delivers again)."""
        if pdu.is_receipt:
            self._begin_receipt(pdu, answer)
            return
        try:
            info, payload = mo_part(pdu)
        except ValueError:
            info, payload = None, None  # __call__ logs it and stores the message without its UDH
        if info is None and payload is not None:
            try:
                stored = self._intake.submit(self._incoming(pdu, payload, (), ()))
            except Exception:
                log.exception("%s: could not prepare an MO; asking the SMSC to redeliver", self.origin)
                answer(Status.ESME_RX_T_APPN)
                return
            stored.add_done_callback(functools.partial(self._answer_stored, answer))
            return
        task = asyncio.create_task(self(pdu))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._answer_task, answer))

    def _answer_stored(self, answer: Callable[[int], None], stored: asyncio.Future[Any]) -> None:
        if stored.cancelled():
            return
        exc = stored.exception()
        answer(self._failed(exc) if exc is not None else self._count(stored.result()))

    def _answer_task(self, answer: Callable[[int], None], task: asyncio.Task[int]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # a handler bug must not lose the MO: ask the SMSC to deliver it again
            log.error("%s: handling a deliver_sm failed", self.origin, exc_info=exc)
            answer(Status.ESME_RX_T_APPN)
        else:
            answer(task.result())

    async def __call__(self, pdu: DeliverSm) -> int:
        if pdu.is_receipt:
            return await self._receipt(pdu)
        try:
            info, payload = mo_part(pdu)
        except ValueError as exc:  # a broken UDH: keep the whole message rather than lose it
            log.warning("%s: %s; storing the message without its UDH", self.origin, exc)
            info, payload = None, pdu.short_message
        if info is None:
            return await self._store(pdu, payload, notes=())
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        key = (pdu.source_addr, pdu.destination_addr, pdu.data_coding)
        done = self._parts.add(key, info, payload, self._clock(), waiter)
        if done is not None:
            await self._finish(pdu, done)
        else:
            self._ensure_expiry()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), self._hold)
        except TimeoutError:
            return Status.ESME_ROK

    async def _finish(self, first: DeliverSm, assembled: Assembled[asyncio.Future[int]]) -> None:
        notes = (assembled.note,) if assembled.note else ()
        if not assembled.complete:
            self.counters["mo_incomplete"] += 1
        status = await self._store(first, assembled.payload, notes=notes, parts=assembled.received)
        for waiter in assembled.items:
            if not waiter.done():
                waiter.set_result(status)

    def _ensure_expiry(self) -> None:
        if self._expiry is None or self._expiry.done():
            self._expiry = asyncio.create_task(self._expire_loop(), name=f"smpp-reassembly-{self.origin}")

    async def _expire_loop(self) -> None:
        """Hand out long MOs whose parts stopped coming, until nothing waits."""
        while True:
            deadline = self._parts.next_deadline()
            if deadline is None:
                return
            await asyncio.sleep(max(0.0, deadline - self._clock()) + 0.01)
            for assembled in self._parts.expire(self._clock()):
                with contextlib.suppress(Exception):
                    first_key = assembled.key
                    assert isinstance(first_key, tuple)
                    src, dst, dc = first_key
                    await self._finish(
                        DeliverSm(source_addr=src, destination_addr=dst, data_coding=dc), assembled
                    )

    async def close(self) -> None:
        """Stop the expiry task (parts still waiting are answered by the SMSC's redelivery)."""
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        for task in [*self._tasks, *self._late_receipts]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._late_receipts, return_exceptions=True)
        await self._intake.close()
        await self._receipts.close()

    # ------------------------------------------------------------------------------------ storing

    def _source_id(self, pdu: DeliverSm, payload: bytes, parts: tuple[int, ...]) -> tuple[str, int | None]:
        """The MO's source id, and the wall-clock ms it carries (content ids) which dates its id."""
        smsc_id = find_tlv(pdu.tlvs, TlvTag.RECEIPTED_MESSAGE_ID)
        if smsc_id is not None and smsc_id.as_str():
            return f"s:{smsc_id.as_str()}", None
        digest = hashlib.sha256(
            b"\x00".join(
                (
                    pdu.source_addr.encode(),
                    pdu.destination_addr.encode(),
                    bytes((pdu.data_coding,)),
                    payload,
                    ",".join(map(str, parts)).encode(),
                )
            )
        ).hexdigest()[:32]
        seen_ms = int(time.time() * 1000)
        return content_source_id(digest, seen_ms), seen_ms

    def _incoming(
        self, pdu: DeliverSm, payload: bytes, notes: tuple[str, ...], parts: tuple[int, ...]
    ) -> Arrival:
        decoded = decode_short_message(payload, pdu.data_coding, self.config.default_alphabet)
        if decoded.binary:
            notes = (*notes, f"data_coding 0x{pdu.data_coding:02X}: binary, recorded as hex")
        problem: Rejection | None = None
        try:
            msisdn = normalize_msisdn(pdu.source_addr, ton=pdu.source_addr_ton, npi=pdu.source_addr_npi)
        except NumberRejected as exc:
            msisdn, problem = pdu.source_addr, Rejection("msisdn", exc.reason)
        source_id, first_seen_ms = self._source_id(pdu, payload, parts)
        message = Message(
            id="",
            shortcode=pdu.destination_addr.lstrip("+"),
            msisdn=msisdn,
            text=decoded.text,
            received_at=time.time(),
            origin=self.origin,
            source_id=source_id,
            notes=notes,
        )
        return Arrival(
            message,
            operator=self.config.operator or None,
            circle=self.config.circle or None,
            problem=problem,
            first_seen_ms=first_seen_ms,
            repeat_window_s=self.config.dedupe_window_s,
        )

    async def _store(
        self, pdu: DeliverSm, payload: bytes, *, notes: tuple[str, ...], parts: tuple[int, ...] = ()
    ) -> int:
        try:
            result = await self._intake.submit(self._incoming(pdu, payload, notes, parts))
        except Exception as exc:
            return self._failed(exc)
        return self._count(result)

    def _failed(self, exc: BaseException) -> int:
        if not isinstance(exc, JournalUnavailable):  # that one is logged already, rate-limited
            log.error("%s: storing an MO failed (%s); asking the SMSC to redeliver", self.origin, exc)
        return Status.ESME_RX_T_APPN

    def _count(self, result: Stored) -> int:
        """Count a stored MO by what the intake made of it; the status to answer."""
        if result.duplicate:
            self.counters["mo_duplicates"] += 1
        elif result.state == "rejected":
            self.counters["mo_rejected"] += 1
        else:
            self.counters["mo_stored"] += 1
        return Status.ESME_ROK

    async def _receipt(self, pdu: DeliverSm) -> int:
        receipt = self._parse_receipt(pdu)
        if receipt is None:
            return Status.ESME_ROK
        try:
            found = await self._receipts.submit(receipt)
        except Exception as exc:
            return self._receipt_failed(exc)
        return self._receipt_recorded(receipt, found)

    def _begin_receipt(self, pdu: DeliverSm, answer: Callable[[int], None]) -> None:
        """:meth:`_receipt` without a task: answered from its batch's result."""
        try:
            receipt = self._parse_receipt(pdu)
        except Exception:
            log.exception("%s: could not read a receipt; asking the SMSC to redeliver", self.origin)
            answer(Status.ESME_RX_T_APPN)
            return
        if receipt is None:
            answer(Status.ESME_ROK)
            return
        recorded = self._receipts.submit(receipt)

        def done(fut: asyncio.Future[str | None]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if exc is not None:
                answer(self._receipt_failed(exc))
            else:
                answer(self._receipt_recorded(receipt, fut.result()))

        recorded.add_done_callback(done)

    def _parse_receipt(self, pdu: DeliverSm) -> tuple[str, str, str] | None:
        """(ref, outcome, detail) of a final receipt; None for one to acknowledge and forget."""
        receipt = parse_receipt(pdu)
        if receipt is None:
            log.warning("%s: a receipt without a message id; acknowledged and dropped", self.origin)
            self.counters["receipts_unknown"] += 1
            return None
        if receipt.outcome is None:  # ENROUTE / ACCEPTD: nothing final to record
            return None
        return receipt.message_id, receipt.outcome, receipt.detail

    def _receipt_failed(self, exc: BaseException) -> int:
        log.error("%s: recording a receipt failed (%s)", self.origin, exc)
        return Status.ESME_RX_T_APPN

    def _receipt_recorded(self, receipt: tuple[str, str, str], found: str | None) -> int:
        self.counters["receipts"] += 1
        if found is None:
            # An SMSC may send the receipt right after the submit_sm_resp, before the dispatcher has
            # recorded that message id: look again a little later before calling it unknown.
            task = asyncio.create_task(self._receipt_later(*receipt))
            self._late_receipts.add(task)
            task.add_done_callback(self._late_receipts.discard)
        return Status.ESME_ROK

    async def _receipt_later(self, ref: str, outcome: str, detail: str) -> None:
        for delay in RECEIPT_RETRY_DELAYS_S:
            await asyncio.sleep(delay)
            try:
                (found,) = await self._journal.record_deliveries([(ref, outcome, detail)])
                if found is not None:
                    return
            except Exception as exc:
                log.error("%s: recording a receipt failed (%s)", self.origin, exc)
                return
        self.counters["receipts_unknown"] += 1
        log.info("%s: receipt for unknown message id %s (%s)", self.origin, ref, outcome)
