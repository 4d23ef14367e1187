"""Retention: finished messages older than ``message_retention_days`` leave the journal.

* What goes: a finished message (never an unfinished one, whatever its age: the journal checks the
  state as it deletes) with everything kept under its id — its timeline events and reply references
  (``Journal.delete_finished``). Days are UTC days of the time a message was *received*; a day goes
  once all of it is older than the retention, so the journal keeps between N and N+1 days.
* How: :data:`BATCH` messages per transaction, oldest first, with a pause between batches so that the
  journal's writer serves the gateway's own writes in between (a sweep is off the hot path). On SQLite
  the pages freed are then given back to the file system (``Journal.reclaim_space``, incremental
  vacuum, :data:`RECLAIM_PAGES` at a time), so at a steady rate the file stops growing.
* When: a sweep at start, then every :data:`SWEEP_EVERY_S`. One process sweeps at a time: with worker
  processes on SQLite only the first worker runs this (``mogateway.node``); the nodes of a cluster on
  PostgreSQL take turns through ``Journal.sweeping`` (an advisory lock: a node that does not get it
  skips that sweep).
* Export (``retention_export_dir``): before any of a day's messages are deleted, that day's file is
  complete (``service.retention_export``: temporary file, fsync, rename); then exactly the messages it
  holds are deleted. A sweep that stops between the two (a crash) is finished by the next, which merges
  the file with what is left: re-running never duplicates nor loses a line.
* WhatsApp replays: a WhatsApp message's id is kept as it is deleted (``whatsapp_seen``) so that the
  webhook does not store a re-posted body of it again; each sweep forgets those received more than
  ``seen_window_s`` ago (``[whatsapp] max_message_age_s``: the webhook refuses older messages by their
  timestamp anyway).
* Said: one INFO line per sweep that deleted something, the counter
  ``mogateway_retention_deleted_total``; a journal error goes through ``service.journal_health`` (one
  line a minute, by kind), an export error is logged at most once a minute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator
from pathlib import Path
from typing import Final

from mogateway.core.immutable import immutable
from mogateway.core.ports import Clock, RetentionStore
from mogateway.service.journal_health import JournalHealth
from mogateway.service.metrics import Metrics
from mogateway.service.retention_export import DayFile, export_line, exported_ids, remove_leftovers
from mogateway.service.throttle import Throttle

__all__ = ["BATCH", "DAY_S", "RECLAIM_PAGES", "SWEEP_EVERY_S", "ExportFailed", "Retention", "Swept"]

log = logging.getLogger("mogateway.retention")

DAY_S: Final = 86400
#: Messages deleted (or read for the export) per transaction.
BATCH: Final = 500
#: Between two batches: the writer's other jobs go first.
PAUSE_S: Final = 0.01
#: Free pages given back to the file system per transaction (4 MiB with SQLite's pages).
RECLAIM_PAGES: Final = 1024
SWEEP_EVERY_S: Final = 300.0
#: At most this many batches per sweep (the next sweep goes on): a bound, not a target.
MAX_BATCHES: Final = 20_000
_LOG_EVERY_S: Final = 60.0


class ExportFailed(Exception):
    """The day's file could not be written: nothing of that day was deleted."""


@immutable
class Swept:
    """What one sweep did."""

    deleted: int
    files: int
    pages: int


def day_start(at: float) -> float:
    """The start of the UTC day of ``at``."""
    return float(int(at // DAY_S) * DAY_S)


class Retention:
    """Sweeps of the journal (module docstring). ``days`` must be at least 1."""

    def __init__(
        self,
        journal: RetentionStore,
        metrics: Metrics,
        *,
        days: int,
        export_dir: Path | None = None,
        health: JournalHealth | None = None,
        clock: Clock = time.time,
        batch: int = BATCH,
        pause_s: float = PAUSE_S,
        every_s: float = SWEEP_EVERY_S,
        seen_window_s: float = 8 * DAY_S,
    ) -> None:
        if days < 1:
            raise ValueError("retention needs at least one day (0 keeps everything: no Retention)")
        self.journal = journal
        self.days = days
        self.export_dir = export_dir
        self._metrics = metrics
        self._health = health
        self._clock = clock
        self.batch = batch
        self.pause_s = pause_s
        self.every_s = every_s
        self.seen_window_s = seen_window_s
        self._log = Throttle(_LOG_EVERY_S)
        self._batches = 0

    def cutoff(self) -> float:
        """Messages received before this go: the start of the day that began ``days`` days ago."""
        return day_start(self._clock() - self.days * DAY_S)

    async def run_forever(self) -> None:
        """A sweep now, then one every :attr:`every_s`; a failed sweep is said and tried at the next."""
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc)
            await asyncio.sleep(self.every_s)

    def _failed(self, exc: Exception) -> None:
        then = "retention tries again at its next sweep"
        if self._health is not None and self._health.failed(exc, then) is not None:
            return  # a journal error: said there, by kind, once a minute
        held = self._log.ready(type(exc))
        if held is None:
            return
        if isinstance(exc, ExportFailed):
            log.error("retention sweep failed: %s; %s%s", exc, then, self._log.more(held))
        else:
            log.error("retention sweep failed; %s%s", then, self._log.more(held), exc_info=exc)

    async def sweep(self) -> Swept:
        """Delete what is older than the retention (exporting it first when set); what it did."""
        async with self.journal.sweeping() as mine:
            if not mine:
                return Swept(0, 0, 0)  # another node sweeps now
            self._batches = 0
            cutoff = self.cutoff()
            files = 0
            if self.export_dir is None:
                deleted = await self._delete_range(0.0, cutoff)
            else:
                deleted, files = await self._export_and_delete(self.export_dir, cutoff)
            pages = await self._reclaim() if deleted else 0
            await self.journal.forget_seen_whatsapp(self._clock() - self.seen_window_s)
        if deleted:
            self._metrics.retention_deleted.inc(deleted)
            log.info(
                "retention: deleted %d finished messages received before %s UTC (%d days kept)%s%s",
                deleted,
                time.strftime("%Y-%m-%d", time.gmtime(cutoff)),
                self.days,
                f", {files} day files written to {self.export_dir}" if files else "",
                f", {pages} free pages given back to the file system" if pages else "",
            )
        return Swept(deleted, files, pages)

    def _more(self) -> bool:
        self._batches += 1
        return self._batches <= MAX_BATCHES

    async def _delete_range(self, since: float, before: float) -> int:
        deleted = 0
        while self._more():
            n = await self.journal.delete_finished(before, received_since=since, limit=self.batch)
            deleted += n
            if n < self.batch:
                break
            await asyncio.sleep(self.pause_s)
        return deleted

    async def _export_and_delete(self, directory: Path, cutoff: float) -> tuple[int, int]:
        """Each day before ``cutoff`` that has finished messages: its file, then its deletes."""
        try:
            await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
            await asyncio.to_thread(remove_leftovers, directory)
        except OSError as exc:
            raise ExportFailed(f"retention_export_dir {directory}: {exc}") from None
        deleted = files = 0
        since = 0.0
        while self._more():
            first = await self.journal.finished_page(since, cutoff, limit=1)
            if not first:
                break
            day = day_start(first[0].record.message.received_at)
            path = await self._export_day(directory, day)
            files += 1
            deleted += await self._delete_exported(path)
            since = day + DAY_S
        return deleted, files

    async def _export_day(self, directory: Path, day: float) -> Path:
        """Write the day's file (merged with the one there, if any); its path once it is durable."""
        try:
            out = await asyncio.to_thread(DayFile, directory, day)
        except OSError as exc:
            raise ExportFailed(f"cannot write in {directory}: {exc}") from None
        try:
            after: tuple[float, str] | None = None
            while self._more():
                page = await self.journal.finished_page(day, day + DAY_S, after=after, limit=self.batch)
                if page:
                    lines = [export_line(item) for item in page]
                    await asyncio.to_thread(out.add, lines)
                    after = lines[-1][0]
                if len(page) < self.batch:
                    break
                await asyncio.sleep(self.pause_s)
            else:
                raise ExportFailed("too many messages in one day for one sweep; the next goes on")
            await asyncio.to_thread(out.commit)
        except OSError as exc:
            await asyncio.to_thread(out.abort)
            raise ExportFailed(f"cannot write {out.path}: {exc}") from None
        except BaseException:
            await asyncio.to_thread(out.abort)
            raise
        return out.path

    async def _delete_exported(self, path: Path) -> int:
        """Delete the messages the day's file holds (those still finished)."""
        deleted = 0
        ids: Generator[list[str], None, None] = exported_ids(path, self.batch)
        try:
            while self._more():
                chunk = await asyncio.to_thread(next, ids, None)
                if chunk is None:
                    break
                deleted += await self.journal.delete_finished_ids(chunk)
                await asyncio.sleep(self.pause_s)
        finally:
            ids.close()
        return deleted

    async def _reclaim(self) -> int:
        pages = 0
        while self._more():
            n = await self.journal.reclaim_space(RECLAIM_PAGES)
            pages += n
            if n < RECLAIM_PAGES:
                break
            await asyncio.sleep(self.pause_s)
        return pages
