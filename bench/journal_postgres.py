"""The PostgreSQL journal alone: how fast it stores MOs and records their outcome and reply, and what
that costs the PostgreSQL server.

    python bench/journal_postgres.py [--count 20000] [--runs 3] [--url postgresql://postgres@127.0.0.1/test]
                                     [--src DIR]

Each run creates a throwaway database next to ``--url``'s (dropped afterwards), migrates it, stores
``--count`` MOs through ``PostgresJournal.store`` in batches of 500, then applies an outcome and a
"submitted" change to each, 64 MOs at a time, as the dispatcher and the replier do. It prints MO/s and
the CPU the ``postgres`` processes of this machine used per MO in each phase (read from ``/proc``, so
run it with nothing else using that server). ``--src`` runs the journal of another checkout's ``src/``
(A/B).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

if "--src" in sys.argv[:-1]:  # before mogateway is imported: the journal of another checkout
    sys.path.insert(0, sys.argv[sys.argv.index("--src") + 1])
sys.path.insert(0, str(Path(__file__).resolve().parent))
import asyncpg
from _common import journal_parser, print_journal_runs

from mogateway.core.message import Message, Sender, message_id
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.migrations import migrate
from mogateway.edges.storage.postgres import PostgresJournal

SENDER = Sender(91, 9812, 345678, "airtel", "DL")
DATABASE = "mogw_bench_journal"


def postgres_cpu_s() -> float:
    """CPU seconds used so far by every process named ``postgres…`` on this machine."""
    ticks = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if not comm.read().startswith("postgres"):
                    continue
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except OSError:  # the process ended meanwhile
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def one_run(url: str, count: int) -> tuple[float, float, float, float]:
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        await admin.close()
    bench_url = with_database(url, DATABASE)
    try:
        conn = await asyncpg.connect(bench_url)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        journal = PostgresJournal(bench_url)
        await journal.open()
        try:
            return await _measure(journal, count)
        finally:
            await journal.close()
    finally:
        admin = await asyncpg.connect(url)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        finally:
            await admin.close()


async def _measure(journal: PostgresJournal, count: int) -> tuple[float, float, float, float]:
    now = time.time()
    messages = [
        Message(
            message_id(int(now * 1000), os.urandom(10)),
            "56767",
            f"91{9_800_000_000 + n}",
            "VOTE 7",
            now,
            sender=SENDER,
        )
        for n in range(count)
    ]
    c0, t0 = postgres_cpu_s(), time.perf_counter()
    for start in range(0, count, 500):
        await journal.store(messages[start : start + 500])
    c1, t1 = postgres_cpu_s(), time.perf_counter()
    gate = asyncio.Semaphore(64)

    async def outcome_and_reply(mid: str) -> None:
        async with gate:
            at = time.time()
            data = {"outcome": "reply", "reply": "OK thanks", "status": 200}
            outcome = Event(EventKind.OUTCOME, at, data)
            await journal.apply([Change(mid, outcome, client_id="cl_bench", reply_text="OK thanks")])
            sent = {"channel": "log", "parts": 1, "refs": []}
            submitted = Event(EventKind.REPLY_SUBMITTED, time.time(), sent)
            await journal.apply([Change(mid, submitted)])

    await asyncio.gather(*(outcome_and_reply(m.id) for m in messages))
    c2, t2 = postgres_cpu_s(), time.perf_counter()
    return count / (t1 - t0), (c1 - c0) / count * 1e6, count / (t2 - t1), (c2 - c1) / count * 1e6


def main() -> None:
    parser = journal_parser(__doc__)
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="a database of the server to measure (the bench makes its own beside it)",
    )
    args = parser.parse_args()
    runs = (asyncio.run(one_run(args.url, args.count)) for _ in range(args.runs))
    print_journal_runs(runs, "PostgreSQL CPU")


if __name__ == "__main__":
    main()
