"""The portal's CSV export of a month, streamed: peak memory and time for a client with many messages.

    .venv/bin/python bench/portal_export.py --rows 1000000

Fills a SQLite journal (raw inserts of rows the journal's own ``schema.message_row``/``state_row``
make, so the file has the gateway's schema and indexes) with ``--rows`` messages of one client spread
over the current month, plus as many of another client; then, in a fresh process each, exports the
month through ``ClientScope.export`` and ``api.portal.reports.csv_rows`` (what the HTTP response
streams) to /dev/null, and for comparison reads the same rows into one list. Prints rows, bytes,
seconds and the process's peak RSS (``ru_maxrss``) before and after. Every run is bounded by its rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from mogateway.core.message import Message, Sender
from mogateway.edges.storage.schema import COLUMNS, message_row
from mogateway.edges.storage.sqlite import SqliteJournal

_SENDER = Sender(91, 9812, 345678, "airtel", "DL")


def month_start() -> float:
    return datetime.now().astimezone().replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def fill(path: Path, rows: int) -> None:
    asyncio.run(_create(path))
    start = month_start()
    step = 20 * 86_400.0 / max(1, rows)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    marks = ", ".join("?" * len(COLUMNS))
    for client, shortcode in (("cl_a", "56767"), ("cl_b", "56999")):
        for first in range(0, rows, 10_000):
            msgs, states = [], []
            for n in range(first, min(rows, first + 10_000)):
                at = start + n * step
                mid = f"{client}-{n:08d}"
                m = Message(mid, shortcode, "919812345678", f"VOTE {n}", at, "http", f"s{mid}", _SENDER)
                msgs.append(message_row(m, at))
                states.append((mid, "replied", at + 0.01, client, "Thanks for your vote", 0))
            conn.executemany(f"INSERT INTO messages ({', '.join(COLUMNS)}) VALUES ({marks})", msgs)
            conn.executemany("INSERT INTO message_states VALUES (?, ?, ?, ?, ?, ?)", states)
            conn.commit()
    conn.close()


async def _create(path: Path) -> None:
    journal = SqliteJournal(path)
    await journal.open()
    await journal.close()


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def export(path: Path, mode: str) -> dict[str, float]:
    from mogateway.api.portal.reports import csv_rows
    from mogateway.service.client_scope import ClientScope
    from mogateway.service.registry import Registry

    journal = SqliteJournal(path)
    await journal.open()

    async def check(url: str) -> None:
        return None

    scope = ClientScope(journal.portal(), Registry(journal), "cl_a", check_url=check)
    since, until = month_start(), time.time() + 86_400 * 31
    before = peak_mib()
    began = time.perf_counter()
    rows = size = 0
    if mode == "stream":
        with open("/dev/null", "wb") as sink:
            async for chunk in csv_rows(scope, since, until):
                sink.write(chunk)
                size += len(chunk)
                rows += chunk.count(b"\n")
        rows -= 1
    else:  # everything in one list first: what the streaming export avoids
        everything = [r async for page in scope.export(since, until) for r in page]
        rows = len(everything)
    seconds = time.perf_counter() - began
    await journal.close()
    return {
        "rows": rows,
        "bytes": size,
        "seconds": round(seconds, 2),
        "rss_before_mib": round(before, 1),
        "rss_peak_mib": round(peak_mib(), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", default="")
    parser.add_argument("--path", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(export(Path(args.path), args.child))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.db"
        began = time.perf_counter()
        fill(path, args.rows)
        print(f"filled {args.rows:,} rows per client (2 clients) in {time.perf_counter() - began:.1f} s")
        for mode in ("stream", "list"):
            for run in range(args.runs):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", mode, "--path", str(path)],
                    capture_output=True,
                    text=True,
                    timeout=1800,
                    check=True,
                )
                print(mode, run + 1, out.stdout.strip())


if __name__ == "__main__":
    main()
