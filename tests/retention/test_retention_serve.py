"""A real ``mogateway serve`` (default workers) with ``message_retention_days`` deletes the old finished
messages of its SQLite journal at start, and only those, exporting them first."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import httpx
import orjson
import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, clean_env, start_serve
from traffic import DAY, finish, message

from mogateway.edges.storage.sqlite import SqliteJournal

pytestmark = pytest.mark.slow


async def write_journal(path: Path, now: float) -> tuple[list[str], list[str]]:
    """40 finished messages received 10 days ago and 5 received an hour ago, written with the journal's
    own API before the gateway starts (the received time is the message's: an old clock)."""
    journal = SqliteJournal(path)
    await journal.open()
    try:
        old = [f"old-{n:02d}" for n in range(40)]
        new = [f"new-{n}" for n in range(5)]
        await journal.store([message(mid, now - 10 * DAY + n) for n, mid in enumerate(old)])
        await journal.store([message(mid, now - 3600) for mid in new])
        for mid in old + new:
            await finish(journal, mid, now - 10 * DAY)
    finally:
        await journal.close()
    return old, new


def ids_in(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM messages")}
    finally:
        conn.close()


def test_serve_deletes_old_finished_messages_at_start(tmp_path: Path) -> None:
    db = tmp_path / "mogateway.db"
    old, new = asyncio.run(write_journal(db, time.time()))
    env = clean_env(
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_LOG_LEVEL="info",
        MOGATEWAY_MESSAGE_RETENTION_DAYS="3",
        MOGATEWAY_RETENTION_EXPORT_DIR=str(tmp_path / "export"),
    )
    gateway = start_serve(tmp_path, env)  # default workers: one per core; the first one sweeps
    try:
        deadline = time.monotonic() + 30
        while ids_in(db) != set(new):
            assert time.monotonic() < deadline, f"still there: {sorted(ids_in(db) - set(new))[:5]}"
            time.sleep(0.1)
        exports = list((tmp_path / "export").glob("messages-*.jsonl"))
        assert len(exports) == 1
        exported = [orjson.loads(line)["id"] for line in exports[0].read_bytes().splitlines()]
        assert exported == old
        metrics = httpx.get(gateway.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        deleted = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.text.splitlines()
            if line.startswith("mogateway_retention_deleted_total")
        ]
        assert sum(deleted) == 40, metrics.text
        assert gateway.stderr().count("retention: deleted 40 finished messages") == 1
    finally:
        assert gateway.stop() == 0, gateway.stderr()
