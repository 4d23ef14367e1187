"""The sweeper: MOs the journal holds as unfinished but that no node will ever dispatch get published again.

With a shared work queue, a node can die after the journal committed an MO (and its source was
acknowledged) but before the MO was published. Nobody would dispatch it. Every node therefore sweeps,
every ``sweep_interval_s``, the oldest unfinished MOs unchanged for ``sweep_after_s``, and publishes
them again, marked as recovered (the dispatcher checks the journal first). Publishing again must not
make a second live copy of an MO, so:

1. An MO stored less than the duplicate window ago is simply published: if it was published before,
   JetStream still remembers its ``Nats-Msg-Id`` and drops the copy.
2. An older MO is published again only when no copy can be in the stream: the oldest message in the
   (work-queue) stream is younger than the MO's last change and than the end of its first duplicate
   window. Its ``updated_at`` is moved first, with a compare-and-set that it is still unfinished, so a
   later sweep judges against this publish; two nodes doing this at once publish the same
   ``Nats-Msg-Id`` moments apart, and JetStream keeps one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from mogateway.core.timeline import EventKind, State
from mogateway.queue.base import QueuedMO
from mogateway.storage.journal import Change, Event, Journal, MessageRecord

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)

_UNFINISHED = frozenset({State.QUEUED, State.DISPATCHING, State.ANSWERED})
#: Clock skew and publish latency allowed for between nodes, NATS and the database.
_MARGIN_S = 5.0


class SweptQueue(Protocol):
    """What the sweeper needs from the queue (``JetStreamQueue`` has it)."""

    async def put(self, items: list[QueuedMO], redelivered: bool = False) -> None: ...

    async def oldest_pending(self) -> Any: ...


class Sweeper:
    """Re-publishes stranded MOs (see the module docstring)."""

    def __init__(
        self,
        journal: Journal,
        queue: SweptQueue,
        to_queued: Any,
        *,
        after_s: float,
        interval_s: float,
        duplicate_window_s: float,
        page: int = 1000,
    ) -> None:
        self._journal = journal
        self._queue = queue
        self._to_queued = to_queued
        self.after_s = after_s
        self.interval_s = interval_s
        self.window_s = duplicate_window_s
        self.page = page
        self.published = 0

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next round tries again
                log.warning("sweep failed: %s", exc)

    async def sweep_once(self) -> int:
        """One round; returns how many MOs were published again."""
        now = time.time()
        records = await self._journal.unfinished(self.page, older_than=now - self.after_s)
        if not records:
            return 0
        recent = [r for r in records if now - r.stored_at < self.window_s - _MARGIN_S]
        old = [r for r in records if now - r.stored_at >= self.window_s - _MARGIN_S]
        stranded = await self._not_in_stream(old) if old else []
        if stranded:
            event = Event(EventKind.RECOVERED, now, {"resume": "republish"})
            applied = await self._journal.apply([Change(r.id, [event], expect=_UNFINISHED) for r in stranded])
            stranded = [r for r, ok in zip(stranded, applied, strict=True) if ok]
        chosen = recent + stranded
        if chosen:
            await self._queue.put([self._to_queued(r) for r in chosen], redelivered=True)
            self.published += len(chosen)
            if stranded:
                log.info("sweeper: published %d stranded messages again", len(stranded))
        return len(chosen)

    async def _not_in_stream(self, records: list[MessageRecord]) -> list[MessageRecord]:
        try:
            oldest = await self._queue.oldest_pending()
        except LookupError:
            return []
        if oldest is None:
            return records
        oldest_ts = oldest.timestamp()
        return [r for r in records if oldest_ts > max(r.updated_at, r.stored_at + self.window_s) + _MARGIN_S]
