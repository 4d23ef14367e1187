"""Several processes write one SQLite journal (``mogateway serve --workers N``): with ``lock_path`` their
group commits take turns, every MO lands once with its owner, and nobody fails on a busy database."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mogateway.core.message import Message, Sender
from mogateway.edges.storage import sqlite_writer
from mogateway.edges.storage.sqlite import SqliteJournal

_WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from mogateway.core.message import Message, Sender
    from mogateway.edges.storage.sqlite import SqliteJournal

    async def main(path, lock, worker, count):
        journal = SqliteJournal(path, lock_path=lock)
        await journal.open()
        sender = Sender(91, 9812, 345678, "airtel", "DL")
        def mo(n):
            return Message(id=f"w{worker}-{n:05d}", shortcode="56767", msisdn="919812345678", text="HI",
                           received_at=time.time(), origin="http", source_id=None, sender=sender)
        # Many small concurrent stores (merged by the coalescer) plus the same ids from both workers.
        batches = [[mo(n) for n in range(i, min(i + 7, count))] for i in range(0, count, 7)]
        shared = [Message(id=f"shared-{n:04d}", shortcode="56767", msisdn="919812345678", text="HI",
                          received_at=1.0, origin="http", source_id=None, sender=sender) for n in range(300)]
        results = await asyncio.gather(
            *(journal.store(b, owners=[worker] * len(b)) for b in batches),
            *(journal.store(shared[i:i + 10], owners=[worker] * 10) for i in range(0, 300, 10)),
        )
        firsts = sum(1 for batch in results for s in batch if s.id.startswith("shared") and not s.duplicate)
        await journal.close()
        print(firsts)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    """
)


async def test_two_processes_store_into_one_file_and_each_mo_lands_once(tmp_path: Path) -> None:
    path, lock = str(tmp_path / "journal.db"), str(tmp_path / "journal.lock")
    count = 3000
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, path, lock, str(w), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in (0, 1)
    ]
    outs = [await asyncio.to_thread(p.communicate, timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    # Each shared id was stored by exactly one of the two (the other saw a duplicate).
    assert sum(int(out.strip()) for out, _ in outs) == 300
    journal = SqliteJournal(path)
    await journal.open()
    try:
        for worker in (0, 1):
            mine = await journal.unfinished(10 * count, owner=worker)
            own = [r.id for r in mine if not r.id.startswith("shared")]
            assert own == [f"w{worker}-{n:05d}" for n in range(count)]
        shared = [r for r in await journal.unfinished(10 * count) if r.id.startswith("shared")]
        assert len(shared) == 300
    finally:
        await journal.close()


def _mo(n: int) -> Message:
    return Message(
        id=f"fs-{n:05d}",
        shortcode="56767",
        msisdn="919812345678",
        text="HI",
        received_at=time.time(),
        origin="http",
        source_id=None,
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )


async def test_with_several_writers_a_store_returns_only_after_the_log_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit leaves the fsync to the writer, after the workers' lock: it still comes first."""
    synced: list[tuple[float, str]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append((time.monotonic(), os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr(os, "fsync", recording_fsync)
    path = tmp_path / "journal.db"
    journal = SqliteJournal(str(path), lock_path=str(tmp_path / "journal.lock"))
    await journal.open()
    try:
        for n in range(20):
            before = time.monotonic()
            (stored,) = await journal.store([_mo(n)], owners=[0])
            returned = time.monotonic()
            assert not stored.duplicate
            assert any(before <= at <= returned and name == f"{path}-wal" for at, name in synced), (
                f"store {n} returned without an fsync of the log"
            )
    finally:
        await journal.close()


async def test_with_several_writers_a_failed_fsync_fails_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = SqliteJournal(str(tmp_path / "journal.db"), lock_path=str(tmp_path / "journal.lock"))
    await journal.open()
    try:
        await journal.store([_mo(0)], owners=[0])

        def failing_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output error"):
            await journal.store([_mo(1)], owners=[0])  # not durable: its source must not be acknowledged
    finally:
        monkeypatch.undo()
        await journal.close()


async def test_while_another_worker_holds_the_lock_the_event_loop_goes_on(tmp_path: Path) -> None:
    """The commits run on the event loop, but the wait for the workers' lock does not: a thread waits
    for it, the loop serves everything else meanwhile, and the store lands once the lock is free."""
    lock = str(tmp_path / "journal.lock")
    journal = SqliteJournal(str(tmp_path / "journal.db"), lock_path=lock)
    await journal.open()
    other = os.open(lock, os.O_RDWR)  # another worker's open file: its flock excludes this journal's
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        store = asyncio.ensure_future(journal.store([_mo(1)], owners=[0]))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 20 and not store.done()  # the loop ran on; the store waits for the lock
        fcntl.flock(other, fcntl.LOCK_UN)
        (stored,) = await asyncio.wait_for(store, 10)
        assert stored.id == "fs-00001" and not stored.duplicate
        assert (await journal.get("fs-00001")) is not None
    finally:
        os.close(other)
        await journal.close()


async def test_two_journals_on_one_file_take_turns_and_checkpoint_between_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (two open files of the lock, as two workers have) storing at once, in many small
    commits, with the log copied into the database every few of them: each MO lands once."""
    monkeypatch.setattr(sqlite_writer, "CHECKPOINT_BYTES", 64 * 1024)
    path, lock = str(tmp_path / "journal.db"), str(tmp_path / "journal.lock")
    journals = [SqliteJournal(path, lock_path=lock) for _ in range(2)]
    for journal in journals:
        await journal.open()
    try:

        async def write(worker: int) -> int:
            new = 0
            for n in range(400):
                shared = _mo(n)  # both writers store the same 400 MOs, one commit each
                own = dataclasses.replace(shared, id=f"w{worker}-{n:05d}", text="x" * 500)
                stored = await journals[worker].store([shared, own], owners=[worker, worker])
                new += sum(1 for s in stored if not s.duplicate)
            return new

        new = await asyncio.gather(write(0), write(1))
        assert sum(new) == 400 + 2 * 400
        assert sum((await journals[0].counts_by_state()).values()) == 1200
        syncers = [j._writer._syncer for j in journals if j._writer is not None]
        assert sum(s.checkpoints for s in syncers if s is not None) >= 3
        assert os.path.getsize(f"{path}-wal") < 1024 * 1024
    finally:
        for journal in journals:
            await journal.close()
