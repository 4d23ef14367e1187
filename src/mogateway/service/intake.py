"""Intake: turn what a source sent into a stored MO (or a recorded rejection), then queue it.

Every source — the HTTP ingest API, SMPP binds, ``mogateway send`` — comes through :meth:`Intake.accept`.
It validates, derives the sender object, stores the batch durably in one journal write, and only then
returns, so the caller may acknowledge its source. A message the source already sent (same origin and
source id) is not stored or dispatched again; the result points to the first one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from mogateway.core.numbering import NumberRejected, SenderResolver, normalize_msisdn
from mogateway.core.timeline import State
from mogateway.queue.base import QueuedMO, WorkQueue
from mogateway.service.metrics import Metrics
from mogateway.storage.journal import Journal, NewMessage, StoreResult, id_for_source, new_message_id

__all__ = ["IncomingMO", "Intake", "IntakeResult", "MAX_MESSAGE_CHARS"]

#: Longest MO text accepted (a 255-part concatenated SMS is < 40,000 characters).
MAX_MESSAGE_CHARS = 40_000
MAX_SOURCE_ID = 128
_SHORTCODE = re.compile(r"\A[1-9][0-9]{2,9}\Z")


@dataclass(frozen=True, slots=True)
class IncomingMO:
    """An MO as a source delivered it, before validation.

    ``origin`` names the source ("http", "smpp:<bind>"); ``source_id`` is the source's own message id,
    used for deduplication. ``problem`` lets an adapter hand over an MO it already found invalid (field,
    reason) so that it is recorded as rejected like any other.
    """

    shortcode: str
    msisdn: str
    message: str
    source_id: str | None = None
    received_at: datetime | None = None
    operator: str | None = None
    circle: str | None = None
    origin: str = "http"
    notes: tuple[str, ...] = ()
    problem: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class IntakeResult:
    id: str
    state: str
    duplicate: bool = False
    field: str | None = None
    reason: str | None = None

    @property
    def rejected(self) -> bool:
        return self.state == State.REJECTED.value


class Intake:
    def __init__(self, journal: Journal, queue: WorkQueue, senders: SenderResolver, metrics: Metrics) -> None:
        self._journal = journal
        self._queue = queue
        self._senders = senders
        self._metrics = metrics

    def _prepare(self, mo: IncomingMO, now: float) -> tuple[NewMessage, QueuedMO | None]:
        if mo.source_id:
            source_id = mo.source_id[:MAX_SOURCE_ID]
            message_id = id_for_source(f"{mo.origin}:{source_id}")
        else:
            source_id = None
            message_id = new_message_id()
        received = mo.received_at.timestamp() if mo.received_at is not None else now

        def rejected(field: str, reason: str, msisdn: str = mo.msisdn) -> tuple[NewMessage, None]:
            return (
                NewMessage(
                    id=message_id,
                    origin=mo.origin,
                    source_id=source_id,
                    shortcode=mo.shortcode[:32],
                    msisdn=msisdn[:32],
                    message=mo.message[:MAX_MESSAGE_CHARS],
                    received_at=received,
                    state=State.REJECTED,
                    reason=reason,
                    reason_field=field,
                    notes=mo.notes,
                ),
                None,
            )

        if mo.problem is not None:
            return rejected(*mo.problem)
        if mo.source_id is not None and len(mo.source_id) > MAX_SOURCE_ID:
            return rejected("id", f"must be at most {MAX_SOURCE_ID} characters")
        if not _SHORTCODE.match(mo.shortcode):
            return rejected("shortcode", "must be 3 to 10 digits, not starting with 0")
        if len(mo.message) > MAX_MESSAGE_CHARS:
            return rejected("message", f"must be at most {MAX_MESSAGE_CHARS} characters")
        try:
            msisdn = normalize_msisdn(mo.msisdn)
        except NumberRejected as exc:
            return rejected("msisdn", exc.reason)
        sender = self._senders.sender(msisdn, mo.operator, mo.circle)
        new = NewMessage(
            id=message_id,
            origin=mo.origin,
            source_id=source_id,
            shortcode=mo.shortcode,
            msisdn=msisdn,
            message=mo.message,
            received_at=received,
            state=State.QUEUED,
            cc=sender.cc,
            ndc=sender.ndc,
            sn=sender.sn,
            operator=sender.operator,
            circle=sender.circle,
            notes=mo.notes,
        )
        queued = QueuedMO(
            id=message_id,
            origin=mo.origin,
            shortcode=mo.shortcode,
            msisdn=msisdn,
            message=mo.message,
            cc=sender.cc,
            ndc=sender.ndc,
            sn=sender.sn,
            operator=sender.operator,
            circle=sender.circle,
            received_at=received,
        )
        return new, queued

    async def accept(self, items: Sequence[IncomingMO]) -> list[IntakeResult]:
        """Validate, store durably, queue. Returns one result per item, in order.

        Raises only when the journal could not store the batch: nothing was acknowledged then, and the
        source should deliver again.
        """
        now = time.time()
        prepared = [self._prepare(mo, now) for mo in items]
        stored: list[StoreResult] = await self._journal.store([new for new, _ in prepared])
        to_queue: list[QueuedMO] = []
        results: list[IntakeResult] = []
        metrics = self._metrics
        for (_new, queued), res in zip(prepared, stored, strict=True):
            if res.state is State.REJECTED:
                results.append(
                    IntakeResult(res.id, res.state.value, res.duplicate, res.reason_field, res.reason)
                )
                if not res.duplicate:
                    metrics.rejected.labels(res.reason_field or "other").inc()
                continue
            if not res.duplicate and queued is not None:
                to_queue.append(queued)
            results.append(IntakeResult(res.id, res.state.value, res.duplicate))
        if to_queue:
            metrics.received.inc(len(to_queue))
            await self._queue.put(to_queue)
        duplicates = sum(1 for r in results if r.duplicate)
        if duplicates:
            metrics.duplicates.inc(duplicates)
        return results
