"""service.journal_health with real failures: SQLite's own "disk is full" on a file system that is full,
a refused connection, PostgreSQL's errors; the retry that keeps a write until the journal takes it; the
free-space guard on a real (tmpfs) file system."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from mogateway.service.journal_health import JournalHealth, journal_error_kind
from mogateway.service.metrics import Metrics
from mogateway.service.readiness import readiness


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=False)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> None:
    with path.open("wb", buffering=0) as out:
        for _ in range(10_000):
            try:
                out.write(b"\0" * 65536)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return
    raise AssertionError("never full")


def test_errors_are_told_apart_by_kind_and_bugs_are_not_the_journals(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        db = sqlite3.connect(disk / "j.db")
        db.execute("CREATE TABLE t (v BLOB)")
        db.commit()
        fill(disk / "ballast")
        with pytest.raises(sqlite3.OperationalError) as full:
            for _ in range(100):
                db.execute("INSERT INTO t VALUES (randomblob(65536))")
                db.commit()
        db.close()
    assert journal_error_kind(full.value) == "disk_full"
    assert journal_error_kind(OSError(errno.ENOSPC, "No space left on device")) == "disk_full"
    assert journal_error_kind(OSError(errno.EIO, "Input/output error")) == "io_error"
    assert journal_error_kind(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == "unavailable"
    assert journal_error_kind(sqlite3.OperationalError("database is locked")) == "unavailable"
    assert journal_error_kind(asyncpg.CannotConnectNowError("starting up")) == "unavailable"
    assert journal_error_kind(asyncpg.InterfaceError("pool is closing")) == "unavailable"
    assert journal_error_kind(asyncpg.UniqueViolationError("dup")) == "other"
    assert journal_error_kind(KeyError("a bug")) is None


async def test_a_refused_postgresql_connection_is_unavailable() -> None:
    with pytest.raises(OSError) as refused:
        await asyncpg.connect("postgresql://postgres@127.0.0.1:1/postgres", timeout=2)
    assert journal_error_kind(refused.value) == "unavailable"


async def test_retry_keeps_the_write_until_the_journal_takes_it_and_logs_one_line_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = JournalHealth(Metrics(), path=None)
    attempts = 0

    async def write() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise sqlite3.OperationalError("database or disk is full")
        return "recorded"

    caplog.set_level(logging.INFO, "mogateway.journal")
    task = asyncio.create_task(health.retry(write, "the answer to m1"))
    while attempts < 2:
        await asyncio.sleep(0.01)
    assert not health.writable and health.waiting == 1
    assert readiness(health, None)[0].kind == "journal_not_writable"
    assert await asyncio.wait_for(task, 10) == "recorded"
    assert health.writable and health.waiting == 0 and not readiness(health, None)
    failed = [r for r in caplog.records if "journal write failed (disk_full)" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is None
    assert "the answer to m1 is kept" in failed[0].getMessage()
    assert any("work again" in r.getMessage() for r in caplog.records)

    async def bug() -> None:
        raise KeyError("not the journal's")

    with pytest.raises(KeyError):
        await health.retry(bug, "x")


async def test_a_write_that_works_wakes_every_waiting_one_at_once() -> None:
    health = JournalHealth(Metrics(), path=None)
    broken = True

    async def write() -> bool:
        if broken:
            raise OSError(errno.ENOSPC, "No space left on device")
        return True

    waiting = [asyncio.create_task(health.retry(write, f"m{n}")) for n in range(20)]
    await asyncio.sleep(3.5)  # long enough for their backoff to have grown past a second
    broken = False
    health.worked()
    done, _ = await asyncio.wait(waiting, timeout=0.5)
    assert len(done) == 20


def test_the_guard_keeps_the_smaller_reserve_and_does_not_flap(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "8m") as disk:
        health = JournalHealth(
            Metrics(),
            path=str(disk / "j.db"),
            min_free_bytes=1 << 30,
            min_free_percent=50,
            clock=iter(float(n) for n in range(1000)).__next__,
        )
        assert health.threshold(8 << 20) == 4 << 20  # 50 % of 8 MiB < 1 GiB
        assert health.refusing() is None
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * (5 << 20))
        why = health.refusing()
        assert why is not None and "bytes free" in why
        assert readiness(health, None)[0].kind == "free_space_low"
        ballast.write_bytes(b"\0" * (3 << 20))  # just above the reserve: not enough to accept again
        assert health.refusing() is not None
        ballast.unlink()
        assert health.refusing() is None
    assert JournalHealth(Metrics(), path=None).refusing() is None  # PostgreSQL: no guard


def test_the_guard_counts_the_write_ahead_log_as_spent(tmp_path: Path) -> None:
    """Until a checkpoint copies the log's pages into the database file that copy may need as many bytes
    again: a large log makes the guard refuse while the file system still shows the reserve free (found
    on a loaded machine, where checkpoints fall behind and the disk filled before the guard refused)."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        health = JournalHealth(
            Metrics(),
            path=str(disk / "j.db"),
            min_free_bytes=1 << 30,
            min_free_percent=25,  # 2 MiB kept
            clock=iter(float(n) for n in range(1000)).__next__,
        )
        assert health.refusing() is None
        (disk / "j.db-wal").write_bytes(b"\0" * (4 << 20))  # 4 MiB free on disk, none once checkpointed
        why = health.refusing()
        assert why is not None and "once the write-ahead log is checkpointed" in why
        (disk / "j.db-wal").write_bytes(b"")  # checkpointed and truncated
        assert health.refusing() is None


def test_readiness_counts_binds_only_where_this_process_holds_some() -> None:
    health = JournalHealth(Metrics(), path=None)
    assert readiness(health, []) == []
    assert readiness(health, [{"name": "a", "state": "bound"}, {"name": "b", "state": "backoff"}]) == []
    (reason,) = readiness(health, [{"name": "a", "state": "backoff"}])
    assert reason.kind == "no_bind_up" and "(a)" in reason.detail
