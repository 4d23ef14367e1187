"""``mogateway backup --force`` never writes over the live journal or its companions: the same file
reached through a symlinked directory or a hard link, the journal's ``-wal``, ``-shm`` and lock file —
each refused by name, with nothing changed (a copy written there lost the MOs acknowledged since, at
the next start). Paths are compared once resolved (real paths), and by the file on disk."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import clean_env, mogateway_command

from mogateway.edges.journal_hold import JournalHold
from mogateway.edges.storage.sqlite import SqliteJournal


def backup(destination: Path, journal: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mogateway_command(), "backup", str(destination), "--database", str(journal), "--force", *more],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Path]:
    """A journal as a running gateway has it: its lock held, a connection open with a -wal and -shm."""
    journal = tmp_path / "data" / "mogateway.db"

    async def make() -> None:
        made = SqliteJournal(str(journal))
        await made.open()
        await made.close()

    asyncio.run(make())
    hold = JournalHold(str(journal))
    hold.take(exclusive=False)
    conn = sqlite3.connect(journal, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("INSERT INTO settings (key, value) VALUES ('acknowledged', 'after the last checkpoint')")
    try:
        yield journal
    finally:
        conn.close()
        hold.release()


def _files(journal: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in journal.parent.iterdir() if p.is_file()}


def test_backup_force_refuses_the_live_journal_however_it_is_named(tmp_path: Path, live: Path) -> None:
    (tmp_path / "link").symlink_to(live.parent, target_is_directory=True)
    os.link(live, tmp_path / "hard-link.db")
    before = _files(live)
    assert {"mogateway.db-wal", "mogateway.db-shm", "mogateway.db-serve.lock"} <= set(before)
    for destination, named in (
        (tmp_path / "link" / "mogateway.db", f"the journal {live}"),
        (tmp_path / "hard-link.db", f"the journal {live}"),
        (live.parent / "mogateway.db-wal", "the journal's write-ahead log"),
        (tmp_path / "link" / "mogateway.db-wal", "the journal's write-ahead log"),
        (live.parent / "mogateway.db-shm", "the journal's shared memory"),
        (live.parent / "mogateway.db-serve.lock", "the journal's lock file"),
    ):
        refused = backup(destination, live)
        assert refused.returncode == 1, (destination, refused.stdout)
        assert f"{destination} is {named}" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
        assert _files(live) == before, destination  # nothing written, nothing removed
    with sqlite3.connect(live) as conn:
        assert conn.execute("SELECT value FROM settings WHERE key = 'acknowledged'").fetchone() is not None

    elsewhere = tmp_path / "copy.db"
    elsewhere.write_text("yesterday's copy")
    replaced = backup(elsewhere, tmp_path / "link" / "mogateway.db")  # the journal named through the link
    assert replaced.returncode == 0, replaced.stderr
    with sqlite3.connect(elsewhere) as conn:
        assert conn.execute("SELECT value FROM settings WHERE key = 'acknowledged'").fetchone() is not None
