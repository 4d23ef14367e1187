"""SQLite's journal_sync = stores: a commit that stores an MO is fsynced before its source is answered;
a commit of outcomes only is not waited for, but rides on the next fsync within MAX_SYNC_LAG_S."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from test_journal_behaviour import mo, outcome

from mogateway.core.timeline import Change
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.edges.storage.sqlite_writer import MAX_SYNC_LAG_S


async def test_stores_are_fsynced_and_outcomes_ride_on_the_next_fsync(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db", synchronous="stores")
    await journal.open()
    try:
        writer = journal._writer
        assert writer is not None
        await journal.store([mo("a"), mo("b")])
        assert writer._mode == "FULL"  # an MO stored: its commit waits for the disk
        await asyncio.sleep(0)
        await journal.apply([Change("a", outcome("blank"))])
        assert writer._mode == "NORMAL"  # outcomes only, right after an fsync: not waited for
        await asyncio.sleep(MAX_SYNC_LAG_S * 1.5)
        started = time.monotonic()
        await journal.apply([Change("b", outcome("blank"))])
        assert writer._mode == "FULL"  # the last fsync is older than the lag: this one syncs everything
        assert time.monotonic() - started < 5
    finally:
        await journal.close()


async def test_full_fsyncs_every_commit(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db", synchronous="full")
    await journal.open()
    try:
        await journal.store([mo("a")])
        await journal.apply([Change("a", outcome("blank"))])
        assert journal._writer is not None and journal._writer._mode == "FULL"
    finally:
        await journal.close()
