"""Throughput of a gateway cluster (PostgreSQL journal, JetStream queue) with 1, 2 and 3 nodes, and where
the time goes.

    python bench/cluster.py [--count 3000] [--nodes 1,2,3] [--batch 100] [--concurrency 8]

Needs PostgreSQL and NATS on 127.0.0.1 (``bash scripts/ensure-services.sh``). Everything is created
for the run and removed afterwards: a throwaway database, a stream/consumer/KV bucket with unique names.
Per node count it starts that many ``mogateway serve`` processes and a fast callback application,
pushes ``--count`` MOs through ``/v1/inbound/batch`` spread over the nodes, and waits until every MO has
its reply recorded. It prints ingest MO/s (accepted and durable), end-to-end MO/s (until the last reply
is recorded), p50/p99 from intake to reply, and the CPU seconds per 1,000 MOs spent by the gateway
nodes, PostgreSQL and NATS.

"Where the time goes" is measured first, each part alone, in this process: journal ``store`` (group
commit, batches of ``--batch``), journal ``apply`` (the outcome and reply compare-and-set writes, two per
MO), and a JetStream publish → fetch → ack round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    free_port,
    percentile,
    process_tree,
    start,
    start_fast_app,
    stop,
    tree_cpu_seconds,
    wait_port,
)

from mogateway.core.message import Message, Sender, message_id
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.queue.jetstream import JetStreamQueue
from mogateway.edges.storage import migrations
from mogateway.edges.storage.postgres import PostgresJournal

PG_ADMIN = os.environ.get("MOGATEWAY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
NATS = os.environ.get("MOGATEWAY_TEST_NATS", "nats://127.0.0.1:4222")
ADMIN = "bench-admin-token-" + secrets.token_hex(8)
INGEST = "bench-ingest-token-" + secrets.token_hex(8)


def new_message_id() -> str:
    return message_id(int(time.time() * 1000), os.urandom(10))


# ------------------------------------------------------------------------------------------ plumbing


async def admin_sql(sql: str, url: str = PG_ADMIN) -> None:
    """Run ``sql`` on the database at ``url`` (default: the server's admin database)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def clear_journal(url: str) -> None:
    """Empty every table of the journal but its migration record, so a run starts as the first did.

    Every table, read from the catalogue: a list written here once missed ``message_states`` (it came
    with migration 0007), so from the second run on the replied count included the runs before and
    the wait ended at once, with every figure after the first run wrong."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        tables = await conn.fetch(
            "SELECT quote_ident(tablename) AS name FROM pg_tables "
            "WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'"
        )
        await conn.execute(f"TRUNCATE {', '.join(t['name'] for t in tables)}")
    finally:
        await conn.close()


async def create_database() -> tuple[str, str]:
    name = f"mogw_bench_{secrets.token_hex(5)}"
    await admin_sql(f'CREATE DATABASE "{name}"')
    url = f"{PG_ADMIN.rpartition('/')[0]}/{name}"
    conn = await asyncpg.connect(url)
    try:
        await migrations.migrate(conn)
    finally:
        await conn.close()
    return name, url


def server_pids(name: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", name], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def new_mo(n: int) -> Message:
    return Message(
        id=new_message_id(),
        shortcode="56767",
        msisdn=f"9198{n:08d}",
        text=f"VOTE {n}",
        received_at=time.time(),
        sender=Sender(91, 9800, n % 1_000_000, "airtel", "DL"),
    )


# ------------------------------------------------------------------------------------------ parts alone


async def journal_alone(url: str, count: int, batch: int, concurrency: int) -> dict[str, float]:
    journal = PostgresJournal(url)
    await journal.open()
    try:
        messages = [new_mo(n) for n in range(count)]
        batches = [messages[i : i + batch] for i in range(0, count, batch)]
        gate = asyncio.Semaphore(concurrency)

        async def store(b: list[Message]) -> None:
            async with gate:
                await journal.store(b)

        t0 = time.perf_counter()
        await asyncio.gather(*(store(b) for b in batches))
        stored = count / (time.perf_counter() - t0)

        # The dispatcher's writes: one outcome and one reply record per MO, each its own apply call.
        gate = asyncio.Semaphore(concurrency * 16)

        async def outcome(m: Message) -> None:
            async with gate:
                ev = Event(EventKind.OUTCOME, time.time(), {"outcome": "reply"})
                await journal.apply([Change(m.id, ev, client_id="cl", reply_text="thanks")])
                ev = Event(EventKind.REPLY_SUBMITTED, time.time(), {"channel": "log"})
                await journal.apply([Change(m.id, ev)])

        t0 = time.perf_counter()
        await asyncio.gather(*(outcome(m) for m in messages))
        applied = count / (time.perf_counter() - t0)
        return {"store_mo_s": stored, "outcome_and_reply_mo_s": applied}
    finally:
        await journal.close()


async def queue_alone(count: int, batch: int) -> dict[str, float]:
    run = secrets.token_hex(4)
    queue = JetStreamQueue(
        NATS,
        {"stream": f"MOGW_B_{run}", "subject": f"mogwb.{run}", "consumer": f"b_{run}", "storage": "file"},
    )
    await queue.start()
    try:
        items = [new_mo(n) for n in range(count)]
        t0 = time.perf_counter()
        for i in range(0, count, batch):
            await queue.put(items[i : i + batch])
        published = count / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(count):
            delivery = await asyncio.wait_for(queue.get(), 30)
            await delivery.ack()
        consumed = count / (time.perf_counter() - t0)
        return {"publish_mo_s": published, "fetch_ack_mo_s": consumed}
    finally:
        assert queue.js is not None
        await queue.js.delete_stream(f"MOGW_B_{run}")
        await queue.close()


# ------------------------------------------------------------------------------------------ the cluster


async def push(urls: list[str], count: int, batch: int, concurrency: int) -> float:
    """Push ``count`` MOs over the nodes; returns the seconds it took until all were accepted."""
    gate = asyncio.Semaphore(concurrency)
    headers = {"authorization": f"Bearer {INGEST}"}
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(start_at: int, url: str) -> None:
            body = [
                {"shortcode": "56767", "msisdn": f"98{n:08d}", "message": f"VOTE {n}"}
                for n in range(start_at, min(count, start_at + batch))
            ]
            async with gate:
                resp = await client.post(url + "/v1/inbound/batch", json=body, headers=headers)
            resp.raise_for_status()

        t0 = time.perf_counter()
        await asyncio.gather(*(one(s, urls[(s // batch) % len(urls)]) for s in range(0, count, batch)))
        return time.perf_counter() - t0


async def wait_replied(url: str, count: int, timeout: float) -> tuple[float, list[float]]:
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = await conn.fetchval("SELECT count(*) FROM message_states WHERE state='replied'")
            if done >= count:
                break
            await asyncio.sleep(0.2)
        else:
            raise RuntimeError(f"only {done} of {count} replied within {timeout} s")
        rows = await conn.fetch(
            "SELECT s.updated_at - m.stored_at FROM messages m JOIN message_states s ON s.id = m.id"
        )
        last = await conn.fetchval("SELECT max(updated_at) FROM message_states")
        return float(last), [float(r[0]) for r in rows]
    finally:
        await conn.close()


async def cluster_run(nodes: int, url: str, count: int, batch: int, concurrency: int, logdir: Path) -> Any:
    await clear_journal(url)
    run = secrets.token_hex(4)
    nats = {
        "STREAM": f"MOGW_C_{run}",
        "SUBJECT": f"mogwc.{run}",
        "CONSUMER": f"c_{run}",
        "NODES_BUCKET": f"mogwc_nodes_{run}",
        "REPLY_SUBJECT": f"mogwc.{run}.reply",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    env.update(
        MOGATEWAY_DATABASE=url,
        MOGATEWAY_QUEUE=NATS,
        MOGATEWAY_ADMIN_TOKEN=ADMIN,
        MOGATEWAY_INGEST_TOKEN=INGEST,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        MOGATEWAY_LOG_LEVEL="warning",
        **{f"MOGATEWAY_NATS__{k}": v for k, v in nats.items()},
    )
    app_port = free_port()
    app = start_fast_app(app_port)
    procs: list[subprocess.Popen[bytes]] = []
    ports = [free_port() for _ in range(nodes)]
    try:
        for n, port in enumerate(ports, 1):
            node_env = dict(env, MOGATEWAY_NODE_NAME=f"bench{n}")
            procs.append(
                start(
                    [sys.executable, "-m", "mogateway.cli", "serve", "--port", str(port)],
                    env=node_env,
                    log=logdir / f"node{n}-of-{nodes}.log",
                )
            )
        for port in ports:
            wait_port(port, 30)
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        resp = httpx.post(
            urls[0] + "/v1/clients",
            json={
                "name": "bench",
                "shortcodes": ["56767"],
                "callback_url": f"http://127.0.0.1:{app_port}/cb",
            },
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=10,
        )
        resp.raise_for_status()
        await asyncio.sleep(2.5)  # every node's registry sees the client
        others = server_pids("postgres:") + server_pids("nats-server")
        # Each node is a supervisor and its workers: the workers do the work, so count the whole tree.
        gateway = [pid for p in procs for pid in process_tree(p.pid)]
        cpu0 = tree_cpu_seconds(gateway), tree_cpu_seconds(others)
        started = time.time()
        ingest_s = await push(urls, count, batch, concurrency)
        last, latencies = await wait_replied(url, count, timeout=max(60.0, count / 50))
        cpu1 = tree_cpu_seconds(gateway), tree_cpu_seconds(others)
        return {
            "nodes": nodes,
            "ingest_mo_s": count / ingest_s,
            "end_to_end_mo_s": count / max(1e-6, last - started),
            "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000,
            "gateway_cpu_s_per_1k": (cpu1[0] - cpu0[0]) / count * 1000,
            "pg_nats_cpu_s_per_1k": (cpu1[1] - cpu0[1]) / count * 1000,
        }
    finally:
        for proc in procs:
            stop(proc)
        stop(app)
        await drop_nats(nats["STREAM"], nats["NODES_BUCKET"])


async def drop_nats(stream: str, bucket: str) -> None:
    import nats

    nc = await nats.connect(NATS)
    try:
        js = nc.jetstream()
        for name in (stream, f"KV_{bucket}"):
            try:
                await js.delete_stream(name)
            except Exception:
                pass
    finally:
        await nc.close()


async def main_async(args: argparse.Namespace) -> None:
    name, url = await create_database()
    logdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"mogw-bench-{name}"
    logdir.mkdir(parents=True, exist_ok=True)
    try:
        print(
            f"# cluster benchmark: {args.count} MOs per run, batches of {args.batch}, {os.cpu_count()} CPUs"
        )
        print("## each part alone (this process)")
        parts = await journal_alone(url, args.count, args.batch, args.concurrency)
        print(f"journal store (group commit)        {parts['store_mo_s']:9.0f} MO/s")
        print(f"journal outcome + reply records     {parts['outcome_and_reply_mo_s']:9.0f} MO/s")
        q = await queue_alone(args.count, args.batch)
        print(f"JetStream publish (R1, file)        {q['publish_mo_s']:9.0f} MO/s")
        print(f"JetStream fetch + ack               {q['fetch_ack_mo_s']:9.0f} MO/s")
        print("## whole gateway nodes (separate processes), log reply channel, fast callback app")
        print("nodes  ingest MO/s  end-to-end MO/s  p50 ms  p99 ms  gw CPU s/1k  pg+nats CPU s/1k")
        for nodes in args.nodes:
            r = await cluster_run(nodes, url, args.count, args.batch, args.concurrency, logdir)
            print(
                f"{r['nodes']:5d}  {r['ingest_mo_s']:11.0f}  {r['end_to_end_mo_s']:15.0f}  "
                f"{r['p50_ms']:6.0f}  {r['p99_ms']:6.0f}  {r['gateway_cpu_s_per_1k']:11.2f}  "
                f"{r['pg_nats_cpu_s_per_1k']:16.2f}"
            )
    finally:
        await admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000, help="MOs per run (bounded: at most 50,000)")
    parser.add_argument("--nodes", default="1,2,3", help="node counts to run, e.g. 1,2,3")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8, help="batches in flight while pushing")
    args = parser.parse_args()
    args.count = max(100, min(args.count, 50_000))
    args.nodes = [int(n) for n in args.nodes.split(",") if n.strip()]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
