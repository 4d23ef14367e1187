"""SQLite's journal_sync = stores: a commit that stores an MO is fsynced before its source is answered;
a commit of outcomes only is not waited for, but rides on the next fsync within MAX_SYNC_LAG_S. The
commits run on the event loop and the fsyncs (and the checkpoints) on the syncer thread."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_journal_behaviour import mo, outcome

from mogateway.core.timeline import Change
from mogateway.edges.storage import sqlite_writer
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.edges.storage.sqlite_writer import MAX_SYNC_LAG_S


@contextlib.asynccontextmanager
async def opened_journal(path: Path, synchronous: str) -> AsyncIterator[SqliteJournal]:
    """A SQLite journal with ``journal_sync = synchronous``, open for the block and closed after it."""
    journal = SqliteJournal(path, synchronous=synchronous)
    await journal.open()
    try:
        yield journal
    finally:
        await journal.close()


async def test_stores_are_fsynced_and_outcomes_ride_on_the_next_fsync(tmp_path: Path) -> None:
    async with opened_journal(tmp_path / "j.db", "stores") as journal:
        writer = journal._writer
        assert writer is not None
        before = writer.fsyncs
        await journal.store([mo("a"), mo("b")])
        assert writer.fsyncs == before + 1  # an MO stored: answered only once its commit is on disk
        await asyncio.sleep(0)
        await journal.apply([Change("a", outcome("blank"))])
        assert writer.fsyncs == before + 1  # outcomes only, right after an fsync: not waited for
        await asyncio.sleep(MAX_SYNC_LAG_S * 1.5)
        started = time.monotonic()
        await journal.apply([Change("b", outcome("blank"))])
        assert writer.fsyncs == before + 2  # the last fsync is older than the lag: this one syncs all
        assert time.monotonic() - started < 5


async def test_full_fsyncs_every_commit(tmp_path: Path) -> None:
    async with opened_journal(tmp_path / "j.db", "full") as journal:
        writer = journal._writer
        assert writer is not None
        before = writer.fsyncs
        await journal.store([mo("a")])
        await journal.apply([Change("a", outcome("blank"))])
        assert writer.fsyncs == before + 2


async def test_normal_leaves_the_fsyncs_to_sqlite(tmp_path: Path) -> None:
    async with opened_journal(tmp_path / "j.db", "normal") as journal:
        await journal.store([mo("a")])
        await journal.apply([Change("a", outcome("blank"))])
        assert journal._writer is not None and journal._writer.fsyncs == 0


async def test_calls_made_in_one_turn_of_the_loop_share_one_commit(tmp_path: Path) -> None:
    async with opened_journal(tmp_path / "j.db", "full") as journal:
        writer = journal._writer
        assert writer is not None
        before = writer.fsyncs
        stored = await asyncio.gather(*(journal.store([mo(f"m{n}")]) for n in range(50)))
        assert [s.id for (s,) in stored] == [f"m{n}" for n in range(50)]
        assert writer.fsyncs == before + 1


async def test_the_log_is_copied_into_the_database_as_it_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's connection never checkpoints (its commits run on the event loop); the syncer
    does, so the write-ahead log is reused instead of growing with everything ever written."""
    monkeypatch.setattr(sqlite_writer, "CHECKPOINT_BYTES", 256 * 1024)
    path = tmp_path / "j.db"
    async with opened_journal(path, "stores") as journal:
        text = "x" * 1000
        for batch in range(240):  # about 4 MB of rows, sixteen times the threshold
            await journal.store([dataclasses.replace(mo(f"b{batch}-{n}"), text=text) for n in range(16)])
        wal = os.path.getsize(f"{path}-wal")
        assert wal < 1024 * 1024, wal
        assert journal._writer is not None and journal._writer._syncer is not None
        checkpoints = journal._writer._syncer.checkpoints
        # a commit adds about 100 KB: one checkpoint every few commits, not one after every commit
        assert 8 <= checkpoints <= 80, checkpoints
        assert sum((await journal.counts_by_state()).values()) == 240 * 16


async def test_calls_made_while_a_group_is_synced_wait_and_share_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One group at a time is with the syncer: what arrives during its fsync, over many turns of the
    event loop, is committed as one group afterwards (not one small commit per turn)."""
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(0.2)
        real_fsync(fd)

    async with opened_journal(tmp_path / "j.db", "full") as journal:
        try:
            writer = journal._writer
            assert writer is not None
            groups: list[int] = []
            real_run_group = writer._run_group

            def counting_run_group(conn: Any, group: list[Any]) -> Any:
                groups.append(len(group))
                return real_run_group(conn, group)

            monkeypatch.setattr(writer, "_run_group", counting_run_group)
            monkeypatch.setattr(os, "fsync", slow_fsync)
            first = asyncio.ensure_future(journal.store([mo("first")]))
            later: list[asyncio.Future[Any]] = []
            for n in range(20):
                await asyncio.sleep(0.002)  # a turn of the loop (and more) between calls
                later.append(asyncio.ensure_future(journal.apply([Change("first", outcome("blank"))])))
                later.append(asyncio.ensure_future(journal.store([mo(f"later{n}")])))
            await asyncio.gather(first, *later)
            # The later calls waited for the first group's fsync, then went as one group of two jobs (the
            # merged applies and the merged stores), not as a small group per turn of the loop.
            assert groups == [1, 2]
        finally:
            monkeypatch.undo()
