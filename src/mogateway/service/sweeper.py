"""The sweeper: MOs the journal holds as unfinished but that no node will ever dispatch get published again.

With a shared work queue, a node can die after the journal committed an MO (and its source was
acknowledged) but before the MO was published. Nobody would dispatch it. Every node therefore sweeps,
every ``sweep_interval_s``, one page of the unfinished MOs unchanged for ``sweep_after_s``, and
publishes them again, marked as recovered (the dispatcher checks the journal first). Pages follow the
primary key from where the previous round stopped and start again at the beginning after the last one,
so every unfinished MO is looked at within a few rounds however large the backlog is (a page read
oldest-first would look at the same legitimately waiting MOs forever). Publishing again must not make a
second live copy of an MO, so:

1. An MO stored less than the duplicate window ago is simply published: if it was published before,
   JetStream still remembers its ``Nats-Msg-Id`` and drops the copy.
2. An older MO is published again only when no copy can be in the stream: the oldest message in the
   (work-queue) stream is younger than the MO's last change and than the end of its first duplicate
   window. Its ``updated_at`` is moved first, with a compare-and-set that it is still unfinished, so a
   later sweep judges against this publish; two nodes doing this at once publish the same
   ``Nats-Msg-Id`` moments apart, and JetStream keeps one.
3. An MO with its answer recorded (``answered``, ``replying``) left the stream when its outcome was
   recorded; the node sending its reply touches its row while it holds it (``service.replier``), so
   one unchanged for ``sweep_after_s`` has no live holder. It is published again at once, under a new
   ``Nats-Msg-Id`` (its id and its last change: two nodes sweeping it together publish the same one),
   after the same compare-and-set. Whoever takes it finishes the reply (``Replier.resume``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from mogateway.core.message import Message
from mogateway.core.ports import MessageRecord, MessageStore
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.service.throttle import Throttle

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)

#: Clock skew and publish latency allowed for between nodes, NATS and the database.
_MARGIN_S = 5.0
_ANSWERED = frozenset({State.ANSWERED, State.REPLYING})


class SweptQueue(Protocol):
    """What the sweeper needs from the queue (``JetStreamQueue`` has it)."""

    async def put(self, items: list[Message], redelivered: bool = False, *, generation: str = "") -> None: ...

    async def oldest_pending(self) -> Any: ...


class Sweeper:
    """Re-publishes stranded MOs (see the module docstring)."""

    def __init__(
        self,
        journal: MessageStore,
        queue: SweptQueue,
        *,
        after_s: float,
        interval_s: float,
        duplicate_window_s: float,
        page: int = 1000,
        margin_s: float = _MARGIN_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal = journal
        self._queue = queue
        self.after_s = after_s
        self.interval_s = interval_s
        self.window_s = duplicate_window_s
        self.page = page
        #: Clock skew and publish latency allowed for (tests on one host make it small).
        self.margin_s = margin_s
        self._clock = clock
        self._fail_throttle = Throttle(60.0)
        self.published = 0
        self._after = ""  # the last id of the previous page: the next round goes on from there

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next round tries again
                self._fail_throttle.round_failed(log, "sweep", exc)

    async def sweep_once(self) -> int:
        """One round; returns how many MOs were published again."""
        now = self._clock()
        records = await self._journal.unfinished(self.page, after=self._after, older_than=now - self.after_s)
        self._after = records[-1].id if len(records) == self.page else ""
        if not records:
            return 0
        replies = [r for r in records if r.state in _ANSWERED]
        queued = [r for r in records if r.state not in _ANSWERED]
        recent = [r for r in queued if now - r.stored_at < self.window_s - self.margin_s]
        old = [r for r in queued if now - r.stored_at >= self.window_s - self.margin_s]
        stranded = await self._moved(await self._not_in_stream(old) if old else [], now)
        if recent or stranded:
            await self._queue.put([r.message for r in recent + stranded], redelivered=True)
        orphaned = await self._moved(replies, now)
        for r in orphaned:  # a generation per MO: each has its own last change
            await self._queue.put([r.message], redelivered=True, generation=f"r{int(r.updated_at * 1000)}")
        published = len(recent) + len(stranded) + len(orphaned)
        self.published += published
        if stranded or orphaned:
            log.info(
                "sweeper: published %d stranded messages and %d unsent replies again",
                len(stranded),
                len(orphaned),
            )
        return published

    async def _moved(self, records: list[MessageRecord], now: float) -> list[MessageRecord]:
        """Those of ``records`` still unfinished, their updated_at moved (a compare-and-set in
        core.timeline's terms: recovered), so the next sweep judges against this publish."""
        if not records:
            return []
        event = Event(EventKind.RECOVERED, now, {"resume": "republish"})
        applied = await self._journal.apply([Change(r.id, event) for r in records])
        return [r for r, ok in zip(records, applied, strict=True) if ok]

    async def _not_in_stream(self, records: list[MessageRecord]) -> list[MessageRecord]:
        try:
            oldest = await self._queue.oldest_pending()
        except LookupError:
            return []
        if oldest is None:
            return records
        oldest_ts = oldest.timestamp()
        return [
            r for r in records if oldest_ts > max(r.updated_at, r.stored_at + self.window_s) + self.margin_s
        ]
