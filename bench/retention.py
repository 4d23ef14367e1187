"""Retention on SQLite at a steady rate: does the journal file stop growing?

Days of traffic at a compressed clock: each simulated day, ``--per-day`` MOs received over that day
are stored through the journal's own API (``store``) and finished as the gateway finishes them (an
outcome with a reply, then the reply submitted with its reference: three event rows and one reply
reference each), then a retention sweep runs (``service.retention.Retention``, ``--keep`` days, its
clock the simulated one). Printed per day: the file's size (database and write-ahead log), its pages
and free pages, the messages kept, and what the sweep deleted and gave back. With retention the size
levels off once the first days are deleted; the last line says what one million messages kept take.

    .venv/bin/python bench/retention.py                      # 7 days of 50,000 MOs, 2 days kept
    .venv/bin/python bench/retention.py --days 10 --per-day 200000
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mogateway.core.message import Message, Sender
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.metrics import Metrics
from mogateway.service.retention import DAY_S, Retention

EPOCH = 1_700_438_400.0  # midnight UTC
BATCH = 500


@dataclass
class Day:
    day: int
    file_bytes: int
    wal_bytes: int
    pages: int
    free_pages: int
    kept: int
    deleted: int
    reclaimed: int
    sweep_s: float


def _message(n: int, at: float) -> Message:
    return Message(
        id=f"m{n:09d}",
        shortcode="56767",
        msisdn=f"9198{n % 100_000_000:08d}",
        text=f"VOTE {n % 7} for the final round",
        received_at=at,
        origin="smpp:airtel",
        sender=Sender(91, 9800, n % 1_000_000, "airtel", "DL"),
    )


async def _one_day(journal: SqliteJournal, day: int, per_day: int) -> None:
    start = EPOCH + day * DAY_S
    step = DAY_S / per_day
    for first in range(0, per_day, BATCH):
        batch = [
            _message(day * per_day + n, start + n * step) for n in range(first, min(first + BATCH, per_day))
        ]
        await journal.store(batch)
        at = batch[-1].received_at
        outcome = Event(EventKind.OUTCOME, at, {"outcome": "reply", "reply": "Thanks, your vote counts"})
        await journal.apply(
            [Change(m.id, outcome, client_id="votes", reply_text="Thanks, your vote counts") for m in batch]
        )
        await journal.apply(
            [
                Change(
                    m.id,
                    Event(EventKind.REPLY_SUBMITTED, at, {"channel": "smpp:airtel", "refs": [f"r{m.id}"]}),
                    reply_refs=(f"r{m.id}",),
                )
                for m in batch
            ]
        )


def _file_state(path: Path) -> tuple[int, int, int, int, int]:
    """(bytes of the database, of its write-ahead log, pages, free pages, messages)."""
    wal = Path(f"{path}-wal")
    size, log = path.stat().st_size, wal.stat().st_size if wal.exists() else 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        kept = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        conn.close()
    return size, log, pages, free, kept


async def run(path: Path, days: int, per_day: int, keep: int) -> list[Day]:
    """Simulate ``days`` days; one :class:`Day` each (after that day's sweep)."""
    journal = SqliteJournal(path)
    await journal.open()
    now = [EPOCH]
    retention = Retention(journal, Metrics(), days=keep, clock=lambda: now[0], pause_s=0)
    out: list[Day] = []
    try:
        for day in range(days):
            await _one_day(journal, day, per_day)
            now[0] = EPOCH + (day + 1) * DAY_S  # the end of the day: its sweep
            began = time.perf_counter()
            swept = await retention.sweep()
            took = time.perf_counter() - began
            size, log, pages, free, kept = _file_state(path)
            out.append(Day(day + 1, size, log, pages, free, kept, swept.deleted, swept.pages, took))
    finally:
        await journal.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--per-day", type=int, default=50_000)
    parser.add_argument("--keep", type=int, default=2, help="message_retention_days")
    parser.add_argument("--dir", type=Path, default=None, help="where the journal goes (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        days = asyncio.run(run(Path(tmp) / "journal.db", args.days, args.per_day, args.keep))
    print(f"{args.per_day} MOs a day, {args.keep} days kept (SQLite, incremental vacuum)")
    print("day  file MiB  log MiB    pages   free  messages kept  deleted  pages back  sweep s")
    for d in days:
        print(
            f"{d.day:>3}  {d.file_bytes / 2**20:8.1f} {d.wal_bytes / 2**20:8.1f} {d.pages:>8} "
            f"{d.free_pages:>6} {d.kept:>14} {d.deleted:>8} {d.reclaimed:>11} {d.sweep_s:>8.2f}"
        )
    last = days[-1]
    per_million = last.pages * 4096 / max(last.kept, 1) * 1_000_000 / 2**30  # SQLite pages of 4 KiB
    rate = last.deleted / last.sweep_s if last.sweep_s and last.deleted else 0.0
    print(f"steady state: {per_million:.2f} GiB of journal per million messages kept; sweep {rate:,.0f} MO/s")


if __name__ == "__main__":
    main()
