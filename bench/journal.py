"""The SQLite journal alone: how fast it stores MOs and records their outcome and reply.

    python bench/journal.py [--count 20000] [--runs 3] [--sync full|normal] [--ids time|source]

Stores ``--count`` MOs in batches of 500 (as ``/v1/inbound/batch`` does), then records for each an
outcome and a reply the way the dispatcher does (two single-change calls per MO, 64 MOs at a time), and
prints MO/s and the process's CPU per MO for each phase. No network, no HTTP: the journal's share of
the gateway's cost. ``--ids source`` names the MOs the way hashed source ids did (in no order), to
show what the order of the ids costs the journal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from mogateway.core.message import Message, Sender, id_for_source, message_id
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal


def new_message_id(ids: str) -> str:
    if ids == "source":  # what SMPP MOs get: a hash of the SMSC's id (core.message.id_for_source)
        return id_for_source("smpp:" + os.urandom(8).hex())
    return message_id(int(time.time() * 1000), os.urandom(10))


async def one_run(count: int, sync: str, ids_kind: str, path: Path) -> tuple[float, float, float, float]:
    journal = SqliteJournal(path, synchronous=sync)
    await journal.open()
    ids = [new_message_id(ids_kind) for _ in range(count)]
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, count, 500):
        now = time.time()
        await journal.store(
            [
                Message(i, "56767", "919812345678", "VOTE 7", now, sender=Sender(91, 9812, 345678))
                for i in ids[start : start + 500]
            ]
        )
    t1, c1 = time.perf_counter(), time.process_time()
    gate = asyncio.Semaphore(64)

    async def outcome_and_reply(mid: str) -> None:
        async with gate:
            now = time.time()
            outcome = Event(
                EventKind.OUTCOME,
                now,
                {
                    "outcome": "reply",
                    "status": 200,
                    "reply": "OK thanks",
                    "parts": 1,
                    "encoding": "gsm7",
                    "elapsed_ms": 1.2,
                    "routed_at": now,
                    "client_id": "cl_bench",
                    "client": "bench",
                    "attempts": [{"n": 1, "at": now, "elapsed_ms": 1.1, "status": 200}],
                },
            )
            await journal.apply([Change(mid, outcome, client_id="cl_bench", reply_text="OK")])
            submitted = Event(
                EventKind.REPLY_SUBMITTED, time.time(), {"channel": "log", "parts": 1, "refs": []}
            )
            await journal.apply([Change(mid, submitted)])

    await asyncio.gather(*(outcome_and_reply(i) for i in ids))
    t2, c2 = time.perf_counter(), time.process_time()
    await journal.close()
    return count / (t1 - t0), (c1 - c0) / count * 1e6, count / (t2 - t1), (c2 - c1) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sync", choices=("full", "normal"), default="full")
    parser.add_argument(
        "--ids", choices=("time", "source"), default="time",
        help="message ids: time-ordered (HTTP intake) or hashed from a source id (SMPP)",
    )
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    results = []
    with tempfile.TemporaryDirectory(prefix="mogw-journal-") as tmp:
        for n in range(1, args.runs + 1):
            r = run(one_run(args.count, args.sync, args.ids, Path(tmp) / f"run{n}.db"))
            results.append(r)
            print(
                f"run {n}: store {r[0]:,.0f} MO/s ({r[1]:.0f} µs CPU/MO); "
                f"outcome + reply {r[2]:,.0f} MO/s ({r[3]:.0f} µs CPU/MO)",
                flush=True,
            )
    med = [statistics.median(col) for col in zip(*results, strict=True)]
    print(
        f"median of {len(results)}: store {med[0]:,.0f} MO/s ({med[1]:.0f} µs CPU/MO); "
        f"outcome + reply {med[2]:,.0f} MO/s ({med[3]:.0f} µs CPU/MO)"
    )


if __name__ == "__main__":
    main()
