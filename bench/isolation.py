"""Isolation at scale: one client's callbacks hang for 20 s while another client's are served.

    python bench/isolation.py [--held 10000] [--hold-s 20] [--fast-rate 100] [--fast-s 10] [--workers N]

Starts ``mogateway serve`` (SQLite journal, log reply channel; ``--workers`` as given, default the
gateway's own) and two callback applications, each its own process:

* the **slow** one (shortcode 11111, ``max_concurrency`` = ``--held``) answers every call after
  ``--hold-s`` seconds and counts the calls it holds at once;
* the **fast** one (shortcode 22222) answers at once.

``--held`` MOs for the slow client are pushed in batches; once the slow application holds them all (or
as many as arrive within 60 s), MOs for the fast client are pushed one by one at ``--fast-rate`` per
second for ``--fast-s`` seconds. Printed, from the journal's own timestamps: the fast client's intake →
callback start and callback round trip (p50/p99), the most callbacks the slow application held at once,
the gateway's peak RSS (supervisor and workers, summed; sampled during the hold, and the kernel's
high-water marks), and whether every MO of both clients ended replied.

The gateway runs with ``max_inflight`` = ``--held`` + 2,000 in each worker (a setting: each callback in
flight holds a connection and an open file), and this process raises its open-files limit so the
gateway and the slow application can hold the connections.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    ADMIN,
    FAST_APP,
    INGEST,
    free_port,
    gateway_env,
    percentile,
    process_tree,
    serve_command,
    start,
    stop,
    tree_peak_rss_mib,
    wait_port,
)

SLOW, FAST = "11111", "22222"

SLOW_APP = r"""
import asyncio, json, sys
from aiohttp import web
hold = float(sys.argv[2])
now = peak = total = 0
async def handle(request):
    global now, peak, total
    await request.read()
    now += 1; total += 1; peak = max(peak, now)
    try:
        await asyncio.sleep(hold)
    finally:
        now -= 1
    return web.Response(text="slow ok", content_type="text/plain")
async def stats(request):
    return web.json_response({"now": now, "peak": peak, "total": total})
app = web.Application()
app.router.add_post("/cb", handle)
app.router.add_get("/stats", stats)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None, backlog=4096)
"""


def rss_now_mib(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


async def register(
    session: aiohttp.ClientSession, base: str, name: str, code: str, url: str, cap: int
) -> None:
    body = {"name": name, "shortcodes": [code], "callback_url": url, "max_concurrency": cap, "timeout_s": 30}
    async with session.post(
        f"{base}/v1/clients", json=body, headers={"authorization": f"Bearer {ADMIN}"}
    ) as r:
        if r.status != 201:
            raise RuntimeError(f"registering {name}: {r.status} {await r.text()}")


async def push_batches(session: aiohttp.ClientSession, base: str, code: str, count: int) -> None:
    headers = {"authorization": f"Bearer {INGEST}", "content-type": "application/json"}
    for start_at in range(0, count, 500):
        items = [
            {"shortcode": code, "msisdn": f"9197{n:08d}", "message": f"HOLD {n}"}
            for n in range(start_at, min(count, start_at + 500))
        ]
        async with session.post(f"{base}/v1/inbound/batch", data=orjson.dumps(items), headers=headers) as r:
            data = await r.json()
            if r.status != 200 or data["accepted"] != len(items):
                raise RuntimeError(f"batch refused: {r.status} {str(data)[:200]}")


async def push_paced(
    session: aiohttp.ClientSession, base: str, code: str, rate: float, seconds: float
) -> int:
    headers = {"authorization": f"Bearer {INGEST}", "content-type": "application/json"}
    count = int(rate * seconds)

    async def send(n: int) -> None:
        item = {"shortcode": code, "msisdn": f"9198{n:08d}", "message": f"QUICK {n}"}
        async with session.post(f"{base}/v1/inbound", data=orjson.dumps(item), headers=headers) as r:
            if r.status not in (200, 202):
                raise RuntimeError(f"push refused: {r.status} {(await r.text())[:200]}")

    began = time.monotonic()
    tasks = []
    for n in range(count):
        ahead = began + n / rate - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)
        tasks.append(asyncio.create_task(send(n)))
    await asyncio.gather(*tasks)
    return count


def fast_latencies(db: Path) -> tuple[list[float], list[float]]:
    """The fast client's intake → callback start and callback round trip, in ms."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT m.received_at, e.data FROM messages m JOIN events e ON e.message_id = m.id "
            "WHERE e.kind = 'outcome' AND m.shortcode = ?",
            (FAST,),
        ).fetchall()
    finally:
        conn.close()
    to_start, round_trip = [], []
    for received, data in rows:
        outcome = orjson.loads(data)
        attempts = outcome.get("attempts") or []
        if attempts:
            to_start.append((attempts[0]["at"] - received) * 1000)
        round_trip.append(float(outcome.get("elapsed_ms", "nan")))
    return to_start, round_trip


def states(db: Path) -> dict[tuple[str, str], int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT shortcode, state, count(*) FROM messages JOIN message_states USING (id) "
            "GROUP BY shortcode, state"
        )
        return {(code, state): n for code, state, n in rows}
    finally:
        conn.close()


async def run(args: argparse.Namespace, workdir: Path) -> None:
    slow_port, fast_port, gw_port = free_port(), free_port(), free_port()
    slow_app = start([sys.executable, "-c", SLOW_APP, str(slow_port), str(args.hold_s)])
    fast_app = start([sys.executable, "-c", FAST_APP, str(fast_port), "fast ok"])
    db = workdir / "isolation.db"
    env = gateway_env(db, MOGATEWAY_MAX_INFLIGHT=str(args.held + 2000))
    gateway = start(serve_command(gw_port, args.workers or None), env, workdir / "gateway.log")
    try:
        for port in (slow_port, fast_port, gw_port):
            await asyncio.to_thread(wait_port, port, 30)
        await asyncio.sleep(1.0)  # every worker serves
        tree = process_tree(gateway.pid)
        base = f"http://127.0.0.1:{gw_port}"
        connector = aiohttp.TCPConnector(limit=200)
        async with aiohttp.ClientSession(connector=connector) as session:
            await register(session, base, "hanging", SLOW, f"http://127.0.0.1:{slow_port}/cb", args.held)
            await register(session, base, "fast", FAST, f"http://127.0.0.1:{fast_port}/cb", 64)
            began = time.monotonic()
            await push_batches(session, base, SLOW, args.held)
            pushed_s = time.monotonic() - began
            stats: dict[str, int] = {}
            deadline = time.monotonic() + 60
            last_rise, last_now = time.monotonic(), -1
            while time.monotonic() < deadline:
                async with session.get(f"http://127.0.0.1:{slow_port}/stats") as r:
                    stats = await r.json()
                if stats["now"] >= args.held:
                    break
                if stats["now"] != last_now:
                    last_rise, last_now = time.monotonic(), stats["now"]
                elif stats["now"] and time.monotonic() - last_rise > 2.0:
                    break  # no more arrive (with several workers, the cap's shares can leave some waiting)
                if args.verbose:
                    print(f"  {time.monotonic() - began:5.1f} s: held {stats['now']:,}", flush=True)
                await asyncio.sleep(0.5 if args.verbose else 0.1)
            holding_s = time.monotonic() - began
            print(
                f"{args.held:,} MOs for the hanging client pushed in {pushed_s:.1f} s; its application "
                f"holds {stats['now']:,} callbacks {holding_s:.1f} s after the first push",
                flush=True,
            )
            rss_samples = [rss_now_mib(tree)]
            sampling = True

            async def sample() -> None:
                while sampling:
                    rss_samples.append(rss_now_mib(tree))
                    await asyncio.sleep(0.25)

            sampler = asyncio.create_task(sample())
            fast_count = await push_paced(session, base, FAST, args.fast_rate, args.fast_s)
            sampling = False
            await sampler
            async with session.get(f"http://127.0.0.1:{slow_port}/stats") as r:
                during = await r.json()
            print(
                f"{fast_count:,} MOs for the fast client at {args.fast_rate:g}/s; the hanging client's "
                f"application still held {during['now']:,} (peak {during['peak']:,})",
                flush=True,
            )
            total = args.held + fast_count
            deadline = time.monotonic() + args.hold_s + 120
            while time.monotonic() < deadline:
                counts = states(db)
                if sum(n for (_, state), n in counts.items() if state == "replied") >= total:
                    break
                await asyncio.sleep(0.5)
        counts = states(db)
        to_start, round_trip = fast_latencies(db)
        peak = tree_peak_rss_mib(tree)
    finally:
        stop(gateway)
        stop(slow_app)
        stop(fast_app)
    replied = {code: counts.get((code, "replied"), 0) for code in (SLOW, FAST)}
    print(
        f"fast client: intake → callback start p50 {percentile(to_start, 50):.1f} ms, "
        f"p99 {percentile(to_start, 99):.1f} ms; "
        f"callback round trip p50 {percentile(round_trip, 50):.1f} ms, "
        f"p99 {percentile(round_trip, 99):.1f} ms ({len(to_start):,} calls)"
    )
    print(f"hanging client: most callbacks held at once {during['peak']:,} (target {args.held:,})")
    print(
        f"gateway RSS: {max(rss_samples):.0f} MiB at most while holding (sampled), "
        f"{peak:.0f} MiB sum of the processes' peaks"
    )
    print(
        f"replied: hanging {replied[SLOW]:,} of {args.held:,}, fast {replied[FAST]:,} of {fast_count:,}"
        f"; other states: { {k: v for k, v in counts.items() if k[1] != 'replied'} }"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=10_000, help="callbacks the hanging client holds")
    parser.add_argument("--hold-s", type=float, default=20.0, help="how long each of its callbacks hangs")
    parser.add_argument("--fast-rate", type=float, default=100.0, help="MO/s for the fast client")
    parser.add_argument("--fast-s", type=float, default=10.0, help="seconds of fast traffic during the hold")
    parser.add_argument("--workers", type=int, default=0, help="serve --workers (0: its default)")
    parser.add_argument("--verbose", action="store_true", help="print the held callbacks while they rise")
    args = parser.parse_args()
    if args.held < 1 or args.held > 10_000 or args.hold_s < 1 or args.hold_s > 29:
        parser.error(
            "--held is 1 to 10000 (a client's largest cap), --hold-s 1 to 29 (below the 30 s budget)"
        )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 3 * args.held + 4096))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    with tempfile.TemporaryDirectory(prefix="mogw-isolation-") as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
