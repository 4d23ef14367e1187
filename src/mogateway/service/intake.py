"""Intake: turn what a source sent into a stored MO (or a recorded rejection), then queue it.

Every source — the HTTP ingest API, SMPP binds, ``mogateway send`` — comes through :meth:`Intake.accept`
with :class:`~mogateway.core.message.Arrival` values. It names each message, validates it, derives the
sender object, stores the batch durably in one journal write, and only then returns, so the caller may
acknowledge its source. A message the source already sent (same origin and source id; or, with the
arrival's repeat window, an SMPP MO from the same number with the same SMSC id or content over any bind
within the window) is not stored or dispatched again; its result points to the first one.

With several worker processes (``core.workers``) the worker that dispatches an MO is a pure function of
its id and route. An MO without a source id gets a fresh id, and the random part of a fresh id is free:
intake draws it again (up to :data:`OWN_ID_DRAWS` times) until the MO is owned by this worker, so an MO
pushed to a worker that may dispatch its client stays there — no hint to a sibling, no second process
touching it — while the owner stays the same pure function everywhere (recovery, orphans, replay).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence

from mogateway.core.message import Arrival, Message, Rejection, check_destination, id_for_source, message_id
from mogateway.core.numbering import NumberRejected, SenderResolver, normalize_msisdn
from mogateway.core.ports import Clock, MessageStore, Stored, WorkQueue
from mogateway.core.timeline import State
from mogateway.service.journal_health import JournalHealth, JournalUnavailable
from mogateway.service.metrics import Metrics

__all__ = ["MAX_MESSAGE_CHARS", "MAX_SOURCE_ID", "OWN_ID_DRAWS", "Intake"]

#: Longest MO text accepted (a 255-part concatenated SMS is < 40,000 characters).
MAX_MESSAGE_CHARS = 40_000
#: The span of a source's own ``received_at``: from 2000-01-01T00:00:00Z to a day after now. Earlier is a
#: zeroed or misparsed clock (year 1 does not even survive formatting as UTC), later is not clock skew.
EARLIEST_RECEIVED_AT = 946_684_800.0
MAX_RECEIVED_AHEAD_S = 86_400.0
MAX_SOURCE_ID = 128
#: Fresh ids drawn at most per MO to find one this worker owns (with 2 workers 1 in 2^8 MOs stays
#: with the id the last draw gave; an MO routed to a client this worker does not dispatch costs the
#: draws and goes to its owner).
OWN_ID_DRAWS = 8
#: What happens to MOs the journal could not store (for the log).
_REFUSED = "new MOs are refused (503, or a temporary SMPP error): their sources send them again"


class Intake:
    def __init__(
        self,
        store: MessageStore,
        queue: WorkQueue,
        senders: SenderResolver,
        metrics: Metrics,
        *,
        clock: Clock = time.time,
        random_bytes: Callable[[int], bytes] = os.urandom,
        owner_of: Callable[[Message], int] | None = None,
        me: int | None = None,
        health: JournalHealth | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._senders = senders
        self._metrics = metrics
        self._clock = clock
        self._random = random_bytes
        self._owner_of = owner_of  # with worker processes: the one that dispatches each MO
        self._me = me  # ... and this worker's index: fresh ids are drawn to be its own
        self._health = health

    def judge(self, arrival: Arrival, now: float) -> Message:
        """The message ``arrival`` becomes: named, and either accepted (with its sender) or rejected."""
        m = arrival.message
        if m.source_id:
            source_id: str | None = m.source_id[:MAX_SOURCE_ID]
            mid = id_for_source(f"{m.origin}:{source_id}", arrival.first_seen_ms)
        else:
            source_id = None
            mid = message_id(int(now * 1000), self._random(10))
        received = m.received_at
        time_out_of_range = not EARLIEST_RECEIVED_AT <= received <= now + MAX_RECEIVED_AHEAD_S
        if time_out_of_range:
            m = m.with_changes(received_at=now)  # the rejection is kept at its arrival: every reader shows it

        def rejected(field: str, reason: str) -> Message:
            return m.with_changes(
                id=mid,
                source_id=source_id,
                shortcode=m.shortcode[:32],
                msisdn=m.msisdn[:32],
                text=m.text[:MAX_MESSAGE_CHARS],
                sender=None,
                rejection=Rejection(field, reason),
            )

        if arrival.problem is not None:
            return rejected(arrival.problem.field, arrival.problem.reason)
        if time_out_of_range:
            return rejected("received_at", "must be from 2000-01-01T00:00:00Z to one day after now")
        if m.source_id is not None and len(m.source_id) > MAX_SOURCE_ID:
            return rejected("id", f"must be at most {MAX_SOURCE_ID} characters")
        try:
            check_destination(m)  # a shortcode; for WhatsApp, the business number
        except ValueError as exc:
            return rejected("shortcode", str(exc))
        if len(m.text) > MAX_MESSAGE_CHARS:
            return rejected("message", f"must be at most {MAX_MESSAGE_CHARS} characters")
        try:
            msisdn = normalize_msisdn(m.msisdn)
        except NumberRejected as exc:
            return rejected("msisdn", exc.reason)
        sender = self._senders.sender(msisdn, arrival.operator, arrival.circle)
        return m.with_changes(id=mid, source_id=source_id, msisdn=msisdn, sender=sender, rejection=None)

    async def accept(self, arrivals: Sequence[Arrival]) -> list[Stored]:
        """Judge, store durably, queue. Returns one result per arrival, in order.

        Raises only when the journal could not store the batch: nothing was acknowledged then, and the
        source should deliver again. :class:`JournalUnavailable` when the free-space guard refuses or
        the journal failed in a way it expects (a full disk, PostgreSQL gone): logged already,
        rate-limited (``service.journal_health``).
        """
        health = self._health
        if health is not None:
            refusing = health.refusing()
            if refusing is not None:
                raise JournalUnavailable(refusing)
        now = self._clock()
        messages = [self.judge(a, now) for a in arrivals]
        owner_of = self._owner_of
        owners = None
        if owner_of is not None:
            owners = [owner_of(m) for m in messages]
            if self._me is not None:
                self._draw_own_ids(messages, owners, owner_of, int(now * 1000))
        repeat_since = None
        if any(a.repeat_window_s > 0 for a in arrivals):
            repeat_since = [now - a.repeat_window_s if a.repeat_window_s > 0 else None for a in arrivals]
        try:
            stored = await self._store.store(messages, owners, repeat_since)
        except Exception as exc:
            if health is None or health.failed(exc, _REFUSED) is None:
                raise
            raise JournalUnavailable(f"the journal could not store the MOs: {exc}") from None
        if health is not None:
            health.worked()
        to_queue: list[Message] = []
        metrics = self._metrics
        accepted: Counter[str] = Counter()
        duplicates: Counter[str] = Counter()
        for message, result in zip(messages, stored, strict=True):
            if result.duplicate:
                duplicates[message.channel] += 1
            elif result.state is State.REJECTED:
                field = message.rejection.field if message.rejection else "other"
                metrics.rejected.labels(field, message.channel).inc()
            else:
                to_queue.append(message)
                accepted[message.channel] += 1
        if to_queue:
            for channel, n in accepted.items():
                metrics.received.labels(channel).inc(n)
            await self._queue.put(to_queue)
        for channel, n in duplicates.items():
            metrics.duplicates.labels(channel).inc(n)
        return stored

    def _draw_own_ids(
        self, messages: list[Message], owners: list[int], owner_of: Callable[[Message], int], now_ms: int
    ) -> None:
        """Give the fresh-id MOs another worker would own a fresh id this worker owns, if one of
        :data:`OWN_ID_DRAWS` draws gives one (in place; see the module docstring)."""
        me = self._me
        for n, m in enumerate(messages):
            if owners[n] == me or m.source_id is not None or not m.accepted:
                continue
            for _ in range(OWN_ID_DRAWS):
                candidate = m.with_changes(id=message_id(now_ms, self._random(10)))
                owner = owner_of(candidate)
                if owner == me:
                    messages[n], owners[n] = candidate, owner
                    break
