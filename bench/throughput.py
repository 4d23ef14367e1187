"""End-to-end throughput of one gateway on its embedded default, against the bare-HTTP ceiling.

    python bench/throughput.py [--count 20000] [--runs 3] [--concurrency 64] [--batch 500]

Starts a fast callback application (its own process) and ``mogateway serve`` (SQLite journal with
synchronous=FULL, in-process queue, log reply channel), pushes ``--count`` MOs through
``/v1/inbound/batch`` and waits until every one has its reply recorded. In the same run it measures the
ceiling: a bare aiohttp POST loop from this process to the same application with the same concurrency.
Prints MO/s, p50/p99 from intake to reply recorded (from the journal's own timestamps), the gateway's
peak RSS, and the ratio to the ceiling; with ``--runs`` > 1 the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    cpu_seconds,
    free_port,
    median,
    peak_rss_mib,
    percentile,
    start,
    start_fast_app,
    stop,
    wait_port,
)

ADMIN = "bench-admin-token-0123456789"
INGEST = "bench-ingest-token-0123456789"


async def ceiling(url: str, count: int, concurrency: int) -> float:
    body = orjson.dumps(
        {
            "shortcode": 56767,
            "msisdn": 919812345678,
            "message": "VOTE 7",
            "sender": {"cc": 91, "ndc": 9812, "sn": 345678, "operator": "", "circle": ""},
            "tsiso": "2026-11-20T10:00:00.000Z",
            "tsunix": 1795168800000,
        }
    )
    headers = {"content-type": "application/json", "authorization": "Bearer x"}
    remaining = count
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - started)


async def push(base: str, count: int, batch: int) -> None:
    headers = {"authorization": f"Bearer {INGEST}", "content-type": "application/json"}
    async with aiohttp.ClientSession() as session:
        sem = asyncio.Semaphore(4)

        async def send(start_at: int) -> None:
            items = [
                {
                    "shortcode": "56767",
                    "msisdn": f"9198{start_at + i:08d}",
                    "message": f"VOTE {(start_at + i) % 10}",
                }
                for i in range(min(batch, count - start_at))
            ]
            async with (
                sem,
                session.post(f"{base}/v1/inbound/batch", data=orjson.dumps(items), headers=headers) as r,
            ):
                data = await r.json()
                if r.status != 200 or data["accepted"] != len(items):
                    raise RuntimeError(f"batch refused: {r.status} {str(data)[:200]}")

        await asyncio.gather(*(send(i) for i in range(0, count, batch)))


def replied(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM messages WHERE state='replied'").fetchone()[0])
    finally:
        conn.close()


def latencies(db: Path) -> tuple[list[float], float, float]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT m.received_at, e.at FROM messages m JOIN events e ON e.message_id = m.id "
            "WHERE e.kind = 'reply_submitted'"
        ).fetchall()
    finally:
        conn.close()
    lat = [(at - received) * 1000 for received, at in rows]
    first = min(r for r, _ in rows)
    last = max(a for _, a in rows)
    return lat, first, last


async def one_run(count: int, concurrency: int, batch: int, workdir: Path) -> dict[str, float]:
    app_port, gw_port = free_port(), free_port()
    app = start_fast_app(app_port)
    db = workdir / f"bench-{gw_port}.db"
    env = {
        "MOGATEWAY_DATABASE": str(db),
        "MOGATEWAY_ADMIN_TOKEN": ADMIN,
        "MOGATEWAY_INGEST_TOKEN": INGEST,
        "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true",
        "MOGATEWAY_LOG_LEVEL": "warning",
    }
    gateway = start(
        [sys.executable, "-m", "mogateway", "serve", "--port", str(gw_port)],
        env,
        workdir / f"gw-{gw_port}.log",
    )
    try:
        wait_port(gw_port)
        base = f"http://127.0.0.1:{gw_port}"
        cb = f"http://127.0.0.1:{app_port}/cb"
        ceiling_rate = await ceiling(cb, count, concurrency)
        async with aiohttp.ClientSession() as session, session.post(
            f"{base}/v1/clients",
            json={
                "name": "bench",
                "shortcodes": ["56767"],
                "callback_url": cb,
                "max_concurrency": concurrency,
            },
            headers={"authorization": f"Bearer {ADMIN}"},
        ) as r:
            if r.status != 201:
                raise RuntimeError(f"client registration failed: {r.status} {await r.text()}")
        cpu_before = cpu_seconds(gateway.pid)
        await push(base, count, batch)
        deadline = time.monotonic() + 300
        while replied(db) < count:
            if time.monotonic() > deadline or gateway.poll() is not None:
                raise RuntimeError(f"only {replied(db)} of {count} replied")
            await asyncio.sleep(0.2)
        lat, first, last = latencies(db)
        rss = peak_rss_mib(gateway.pid)
        cpu_per_mo_us = (cpu_seconds(gateway.pid) - cpu_before) / count * 1e6
    finally:
        stop(gateway)
        stop(app)
    rate = count / (last - first)
    return {
        "mo_per_s": rate,
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "rss_mib": rss,
        "ceiling_per_s": ceiling_rate,
        "ratio": rate / ceiling_rate,
        "cpu_us": cpu_per_mo_us,
    }


def _describe(r: dict[str, float]) -> str:
    return (
        f"{r['mo_per_s']:,.0f} MO/s end to end, p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, "
        f"peak RSS {r['rss_mib']:.0f} MiB; ceiling {r['ceiling_per_s']:,.0f} req/s; "
        f"ratio {r['ratio']:.0%}; gateway CPU {r['cpu_us']:.0f} µs/MO"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="mogw-bench-") as tmp:
        for n in range(1, args.runs + 1):
            r = asyncio.run(one_run(args.count, args.concurrency, args.batch, Path(tmp)))
            results.append(r)
            print(f"run {n}: {_describe(r)}", flush=True)
    keys = results[0].keys()
    med = {k: median([r[k] for r in results]) for k in keys}
    print(f"median of {len(results)}: {_describe(med)}")


if __name__ == "__main__":
    main()
