"""Orphans: MOs a worker process owns that the journal holds as unfinished but nothing in it holds.

With several worker processes on one journal (``core.workers``), the worker that stores an MO tells
its owner with a dispatch hint after the commit. A hint is lost only when the storing worker dies
between the two (the owner's own death is covered by its recovery at start). So the owner looks at its
unfinished MOs:

* when it learns that a sibling died (a connection to it ended): every page of them last changed
  before that moment, at once;
* one page every ``interval_s`` (the next page each time, from the start again after the last) among
  those unchanged for ``after_s``, as a safety net.

It queues — as redelivered — those that neither its queue nor its replier holds. Queuing an MO that
is in fact being finished here is harmless: the queue takes no second copy of what it holds, and for a
redelivered MO the dispatcher reads the journal first and does only what is left (a finished MO is
dropped, a reply this worker is sending is left to it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from mogateway.core.message import Message
from mogateway.core.ports import MessageStore, WorkQueue
from mogateway.service.throttle import Throttle

__all__ = ["Holder", "OrphanSweep"]

log = logging.getLogger("mogateway")


class Holder(Protocol):
    """A part of the worker that holds MOs for a while (the queue, the replier)."""

    def holds(self, message_id: str) -> bool: ...


class OrphanSweep:
    """Queues again the MOs of ``owner`` that nothing here holds (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        queue: WorkQueue,
        holders: Sequence[Holder],
        *,
        owner: int,
        after_s: float = 30.0,
        interval_s: float = 5.0,
        page: int = 1000,
    ) -> None:
        self._store = store
        self._queue = queue
        self._holders = holders
        self.owner = owner
        self.after_s = after_s
        self.interval_s = interval_s
        self.page = page
        self._fail_throttle = Throttle(60.0)
        self.queued = 0
        self._after = ""
        self._lost_at = 0.0
        self._wake = asyncio.Event()

    def sibling_lost(self) -> None:
        """A sibling died: look at everything it may have stored for this worker."""
        self._lost_at = time.time()
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            try:
                if self._wake.is_set():
                    self._wake.clear()
                    await self.sweep_all(self._lost_at)
                else:
                    await self.sweep_page(time.time() - self.after_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next round tries again
                self._fail_throttle.round_failed(log, "orphan sweep", exc)

    async def sweep_all(self, before: float) -> int:
        """Every unfinished MO of this worker last changed before ``before``; how many were queued."""
        queued = 0
        after = ""
        while True:
            records = await self._store.unfinished(
                self.page, after=after, older_than=before, owner=self.owner
            )
            if not records:
                break
            queued += await self._queue_orphans([r.message for r in records])
            after = records[-1].id
        if queued:
            log.warning("a sibling worker stopped: %d MOs it stored for this worker queued here", queued)
        return queued

    async def sweep_page(self, before: float) -> int:
        """The next page (see the module docstring); how many were queued."""
        records = await self._store.unfinished(
            self.page, after=self._after, older_than=before, owner=self.owner
        )
        self._after = records[-1].id if len(records) == self.page else ""
        queued = await self._queue_orphans([r.message for r in records])
        if queued:
            log.warning("%d unfinished MOs held nowhere were queued again", queued)
        return queued

    async def _queue_orphans(self, messages: list[Message]) -> int:
        holders = self._holders
        orphans = [m for m in messages if not any(h.holds(m.id) for h in holders)]
        if orphans:
            await self._queue.put(orphans, redelivered=True)
        self.queued += len(orphans)
        return len(orphans)
