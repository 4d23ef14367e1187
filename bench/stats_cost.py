"""What the traffic figures cost a gateway: one sampler tick, one flush, one ``/v1/stats`` reading.

    python bench/stats_cost.py [--clients 20] [--database postgresql://...]

Starts a real Gateway on a fresh journal (SQLite by default), registers ``--clients`` clients, moves
their prometheus counters (every outcome, latency in five buckets), and fills the stats table with a
whole day of per-minute rows for them (as a node running since midnight would have written). Then times,
on the gateway's own event loop: the sampler's tick (``sample``), a flush, ``snapshot("today")`` cold
(nothing cached) and warm (the closed quarter hours cached, as under a 2 s poll), and one update of the
console's Overview (the snapshot and its two HTML fragments).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from mogateway.config import Settings
from mogateway.core.clients import ClientRecord
from mogateway.core.ports import StatsRow
from mogateway.node import Gateway

OUTCOMES = ("reply", "blank", "timeout", "http_error")
BUCKETS = ("0.01", "0.025", "0.05", "0.1", "0.25")


def timed(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.2f} ms (max {max(samples) * 1000:.2f} ms)"


async def main(clients: int, database: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="mogw-stats-") as tmp:
        settings = Settings(
            database=database or str(Path(tmp) / "journal.db"),
            admin_token="bench-admin-token-0123456789",
            ingest_token="bench-ingest-token-0123456789",
            allow_private_callbacks=True,
            node_name="bench",
            stats_flush_s=60,  # flushes are timed by hand below
        )
        gateway = Gateway(settings)
        await gateway.start()
        stats = gateway.stats
        try:
            ids = []
            for n in range(clients):
                record = ClientRecord("", f"app-{n}", [str(50000 + n)], [], "http://127.0.0.1:9/", "")
                ids.append((await gateway.registry.add(record)).id)
            metrics = gateway.metrics
            for client in ids:
                for outcome in OUTCOMES:
                    metrics.callbacks.labels(client, outcome).inc(10)
                for bucket in BUCKETS:
                    metrics.callback_latency.labels(client).observe(float(bucket) * 0.9)
            now = int(time.time())
            midnight = now - now % 86400
            rows = [
                StatsRow(60, minute, "bench", "", kind, 100)
                for minute in range(midnight, now - 60, 60)
                for kind in ("accepted", "replies")
            ]
            rows += [
                StatsRow(60, minute, "bench", client, kind, 3)
                for minute in range(midnight, now - 60, 60)
                for client in ids
                for kind in (*OUTCOMES, *(f"lat:{b}" for b in BUCKETS))
            ]
            for start in range(0, len(rows), 20_000):
                await gateway.journal.write_stats(rows[start : start + 20_000])
            print(
                f"{clients} clients, {len(rows):,} per-minute rows since midnight ({settings.database[:40]})"
            )

            ticks = []
            for _ in range(50):
                for client in ids:
                    metrics.callbacks.labels(client, "reply").inc()
                    metrics.callback_latency.labels(client).observe(0.02)
                started = time.perf_counter()
                stats.sample(time.time())
                ticks.append(time.perf_counter() - started)
            print(f"sampler tick (every second):      {timed(ticks)}")
            flushes = []
            for _ in range(5):
                stats.sample(time.time())
                started = time.perf_counter()
                await stats.flush()
                flushes.append(time.perf_counter() - started)
            print(f"flush (every stats_flush_s):      {timed(flushes)}")
            started = time.perf_counter()
            await stats.snapshot("today")
            print(f"snapshot('today'), cold:          {(time.perf_counter() - started) * 1000:.1f} ms")
            warm = []
            for _ in range(20):
                stats._memo.clear()  # every call computes, as polls 2 s apart do
                started = time.perf_counter()
                await stats.snapshot("today")
                warm.append(time.perf_counter() - started)
            print(f"snapshot('today'), warm:          {timed(warm)}")
            hour = []
            for _ in range(20):
                stats._memo.clear()
                started = time.perf_counter()
                await stats.snapshot("1h")
                hour.append(time.perf_counter() - started)
            print(f"snapshot('1h'), warm:             {timed(hour)}")
            from mogateway.api.console.render import render

            live = []
            for _ in range(20):
                stats._memo.clear()
                started = time.perf_counter()
                doc = await stats.snapshot("today")
                render("_traffic.html", {"stats": doc})
                render("_figures.html", {"stats": doc})
                live.append(time.perf_counter() - started)
            print(f"Overview live update (1/s/viewer): {timed(live)}")
        finally:
            await gateway.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--database", default=None, help="a postgresql:// URL (migrated) instead of SQLite")
    args = parser.parse_args()
    asyncio.run(main(args.clients, args.database))
