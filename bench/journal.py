"""The SQLite journal alone: how fast it stores MOs and records their outcome and reply.

    python bench/journal.py [--count 20000] [--runs 3] [--sync full|normal] [--ids time|source|content]
                            [--batch 500] [--prefill 0] [--repeat-window 600] [--src DIR]

Stores ``--count`` MOs in batches of ``--batch`` (500, as ``/v1/inbound/batch`` does), then records for
each an outcome and a reply the way the dispatcher does (two single-change calls per MO, 64 MOs at a
time), and prints MO/s and the process's CPU per MO for each phase. No network, no HTTP: the journal's
share of the gateway's cost. ``--ids source`` names the MOs the way hashed source ids did (in no order),
to show what the order of the ids costs the journal. ``--ids content`` stores what an SMPP bind stores
without an SMSC message id: each MO from a number of its own, named by its content, and looked up among
the earlier MOs of its number and content within ``--repeat-window`` seconds (0: no lookup; the store
call of a mogateway before content repeats). ``--prefill`` stores that many MOs first, untimed (the
indexes' size matters to inserts at random places); ``--src`` runs the journal of another checkout's
``src/`` (A/B).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

if "--src" in sys.argv[:-1]:  # before mogateway is imported: the journal of another checkout
    sys.path.insert(0, sys.argv[sys.argv.index("--src") + 1])
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import journal_parser, print_journal_runs

from mogateway.core.message import Message, Sender, id_for_source, message_id
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal

SENDER = Sender(91, 9812, 345678)


def new_message_id(ids: str) -> str:
    if ids == "source":  # what SMPP MOs got: a hash of the SMSC's id (core.message.id_for_source)
        return id_for_source("smpp:" + os.urandom(8).hex())
    return message_id(int(time.time() * 1000), os.urandom(10))


def new_message(ids: str, now: float) -> Message:
    mid = new_message_id(ids)
    if ids != "content":
        return Message(mid, "56767", "919812345678", "VOTE 7", now, sender=SENDER)
    number = f"91{random.randrange(6_000_000_000, 10_000_000_000)}"
    source_id = f"c:{os.urandom(16).hex()}:{int(now * 1000)}"  # core.message.content_source_id
    return Message(mid, "56767", number, "VOTE 7", now, "smpp:bench", source_id, sender=SENDER)


async def store_all(journal: SqliteJournal, args: argparse.Namespace, count: int) -> list[str]:
    """Store ``count`` new MOs in batches; their ids."""
    window = args.repeat_window if args.ids == "content" else 0
    ids = []
    for start in range(0, count, args.batch):
        now = time.time()
        batch = [new_message(args.ids, now) for _ in range(min(args.batch, count - start))]
        if window > 0:
            await journal.store(batch, None, [now - window] * len(batch))
        else:
            await journal.store(batch)
        ids += [m.id for m in batch]
    return ids


async def one_run(args: argparse.Namespace, path: Path) -> tuple[float, float, float, float]:
    journal = SqliteJournal(path, synchronous=args.sync)
    await journal.open()
    await store_all(journal, args, args.prefill)
    count = args.count
    t0, c0 = time.perf_counter(), time.process_time()
    ids = await store_all(journal, args, count)
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
    parser = journal_parser(__doc__)
    parser.add_argument("--sync", choices=("full", "normal"), default="full")
    parser.add_argument(
        "--ids",
        choices=("time", "source", "content"),
        default="time",
        help="message ids: time-ordered (HTTP intake), hashed from a source id, or SMPP content-named",
    )
    parser.add_argument("--batch", type=int, default=500, help="MOs per store call")
    parser.add_argument("--prefill", type=int, default=0, help="MOs stored first, untimed")
    parser.add_argument(
        "--repeat-window",
        type=float,
        default=600.0,
        help="--ids content: the window looked up for repeats (0: none)",
    )
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    with tempfile.TemporaryDirectory(prefix="mogw-journal-") as tmp:
        runs = (run(one_run(args, Path(tmp) / f"run{n}.db")) for n in range(1, args.runs + 1))
        print_journal_runs(runs, "CPU")


if __name__ == "__main__":
    main()
