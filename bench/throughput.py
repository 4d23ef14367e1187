"""End-to-end throughput of one gateway on its embedded default, against the bare-HTTP ceiling.

    python bench/throughput.py [--count 20000] [--runs 3] [--concurrency 64] [--batch 500] [--with-console]
        [--workers 1,2] [--rate 1000]

Starts a fast callback application (its own process) and ``mogateway serve`` (SQLite journal with
synchronous=FULL, in-process queue, log reply channel), pushes ``--count`` MOs through
``/v1/inbound/batch`` and waits until every one has its reply recorded. In the same run it measures the
ceiling: a bare aiohttp POST loop from this process to the same application with the same concurrency.
Prints MO/s, p50/p99 from intake to reply recorded (from the journal's own timestamps), the gateway's
peak RSS (all its processes, then the supervisor's and the largest worker's), and the ratio to the
ceiling; with ``--runs`` > 1 the medians.

It also prints intake → callback start (p50/p99), from the journal's own timestamps: the MO's
``received_at`` and the start of its first callback attempt.

``--workers 1,2`` runs ``mogateway serve --workers 1`` and ``--workers 2`` in every run (default: the
gateway's default, one worker per core); CPU and peak RSS are those of the supervisor and all its
workers together. ``--rate R`` paces the load instead: single ``POST /v1/inbound`` requests at R per
second (a steady load, not a burst), so the latencies are those a subscriber sees at that load.
``--reply-http`` sends every reply over the ``http`` reply channel to a local MT endpoint (the fast
application) instead of the ``log`` channel, as a deployment with an MT gateway does.
``--python PATH`` runs the gateway on another interpreter (with mogateway installed), the load generator
and the application staying on this one.

``--against PYTHON`` measures every run on this checkout's gateway and on another's (its
``.venv/bin/python``), the order swapped each run, and prints the medians of the per-run ratios: a
before/after in one invocation (docs/benchmarks.md §7.1).

``--with-console`` measures every run twice, once as above and once while someone watches: a console
session on the Overview (signed in, its live stream updating every second) and a tool polling
``GET /v1/stats?window=today`` every 2 s, as ``mogateway top`` or a dashboard would. The two alternate
(which goes first swaps every run) and the medians of both are printed side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import re
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
    INGEST,
    TreeMeter,
    free_port,
    gateway_build,
    gateway_env,
    median,
    peak_rss_mib,
    percentile,
    register_client,
    serve_command,
    start,
    start_fast_app,
    stop,
    wait_port,
)


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


async def push_paced(base: str, count: int, rate: float, connections: int = 256) -> None:
    """One ``POST /v1/inbound`` every ``1 / rate`` seconds (each sent on time, whatever the answers of
    the earlier ones), over a pool of ``connections`` keep-alive connections."""
    headers = {"authorization": f"Bearer {INGEST}", "content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send(i: int) -> None:
            item = {"shortcode": "56767", "msisdn": f"9198{i:08d}", "message": f"VOTE {i % 10}"}
            async with session.post(f"{base}/v1/inbound", data=orjson.dumps(item), headers=headers) as r:
                if r.status not in (200, 202):
                    raise RuntimeError(f"push refused: {r.status} {(await r.text())[:200]}")

        began = time.monotonic()
        pending = set()
        for i in range(count):
            ahead = began + i / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
            task = asyncio.create_task(send(i))
            pending.add(task)
            task.add_done_callback(pending.discard)
        for task in list(pending):
            await task


async def watch(base: str, stop: asyncio.Event) -> int:
    """Watch the gateway as an operator would until ``stop``: the console's Overview (sign in, then its
    live stream) and a /v1/stats poll every 2 s. Returns how many stats documents were read."""
    polls = 0
    # unsafe=True: aiohttp keeps no cookies for bare IP addresses otherwise.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        async with session.get(f"{base}/console/login") as r:
            csrf = re.search(r'name="csrf" value="([^"]+)"', await r.text())
        if csrf is None:
            raise RuntimeError("no sign-in form at /console/login")
        form = {"csrf": csrf[1], "token": ADMIN, "next": "/console/"}
        async with session.post(f"{base}/console/login", data=form, allow_redirects=False) as r:
            if r.status != 303:
                raise RuntimeError(f"console sign-in failed: {r.status}")

        async def stream() -> None:
            while not stop.is_set():  # the server ends a stream after a minute; reconnect like a browser
                async with session.get(f"{base}/console/live/overview") as r:
                    async for _ in r.content:
                        if stop.is_set():
                            return

        async def poll() -> None:
            nonlocal polls
            headers = {"authorization": f"Bearer {ADMIN}"}
            while not stop.is_set():
                async with session.get(f"{base}/v1/stats", params={"window": "today"}, headers=headers) as r:
                    await r.read()
                    polls += r.status == 200
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)

        streaming = asyncio.create_task(stream())
        await poll()
        streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await streaming
    return polls


def replied(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM message_states WHERE state='replied'").fetchone()[0])
    finally:
        conn.close()


def latencies(db: Path) -> tuple[list[float], list[float], float, float]:
    """From the journal: intake → reply recorded and intake → callback start (ms), and the first
    intake and last reply instants."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT m.received_at, e.at FROM messages m JOIN events e ON e.message_id = m.id "
            "WHERE e.kind = 'reply_submitted'"
        ).fetchall()
        outcomes = conn.execute(
            "SELECT m.received_at, e.data FROM messages m JOIN events e ON e.message_id = m.id "
            "WHERE e.kind = 'outcome'"
        ).fetchall()
    finally:
        conn.close()
    lat = [(at - received) * 1000 for received, at in rows]
    to_callback = []
    for received, data in outcomes:
        attempts = orjson.loads(data).get("attempts") or []
        if attempts:
            to_callback.append((attempts[0]["at"] - received) * 1000)
    first = min(r for r, _ in rows)
    last = max(a for _, a in rows)
    return lat, to_callback, first, last


async def one_run(
    count: int,
    concurrency: int,
    batch: int,
    workdir: Path,
    watched: bool = False,
    workers: int | None = None,
    rate: float | None = None,
    python: str = sys.executable,
    reply_http: bool = False,
    skip_ceiling: bool = False,
    connections: int = 256,
) -> dict[str, float]:
    app_port, gw_port = free_port(), free_port()
    app = start_fast_app(app_port)
    db = workdir / f"bench-{gw_port}.db"
    env = gateway_env(db)
    if reply_http:  # each reply POSTed to a local MT endpoint (the fast application), not logged
        env["MOGATEWAY_REPLY_CHANNEL"] = "http"
        env["MOGATEWAY_REPLY_HTTP_URL"] = f"http://127.0.0.1:{app_port}/cb?to={{to}}"
    gateway = start(serve_command(gw_port, workers, python=python), env, workdir / f"gw-{gw_port}.log")
    try:
        wait_port(gw_port)
        base = f"http://127.0.0.1:{gw_port}"
        cb = f"http://127.0.0.1:{app_port}/cb"
        ceiling_rate = float("nan") if skip_ceiling else await ceiling(cb, count, concurrency)
        client = {
            "name": "bench",
            "shortcodes": ["56767"],
            "callback_url": cb,
            "max_concurrency": concurrency,
        }
        await register_client(base, client)
        stop_watching = asyncio.Event()
        watcher = asyncio.create_task(watch(base, stop_watching)) if watched else None
        if watcher is not None:
            await asyncio.sleep(2.5)  # signed in, streaming, polled once: the operator is looking
        await asyncio.sleep(0.5)  # every worker is up (the port answers as soon as one is)
        meter = TreeMeter(gateway.pid)
        if rate is None:
            await push(base, count, batch)
        else:
            await push_paced(base, count, rate, connections)
        deadline = time.monotonic() + 300
        while replied(db) < count:
            if time.monotonic() > deadline or gateway.poll() is not None:
                raise RuntimeError(f"only {replied(db)} of {count} replied")
            await asyncio.sleep(0.2)
        if watcher is not None:
            stop_watching.set()
            if await watcher == 0:
                raise RuntimeError("the stats poller read nothing")
        cpu_per_mo_us = meter.cpu_seconds() / count * 1e6
        lat, to_callback, first, last = latencies(db)
        rss = meter.peak_rss_mib()
        # the supervisor is the process started; its children are the workers (none with one worker)
        supervisor_rss = peak_rss_mib(gateway.pid)
        workers_rss = [peak_rss_mib(pid) for pid in meter.pids if pid != gateway.pid]
    finally:
        stop(gateway)
        stop(app)
    rate = count / (last - first)
    return {
        "mo_per_s": rate,
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "callback_p50_ms": percentile(to_callback, 50),
        "callback_p99_ms": percentile(to_callback, 99),
        "rss_mib": rss,
        "supervisor_rss_mib": supervisor_rss,
        "worker_rss_mib": max(workers_rss) if workers_rss else float("nan"),
        "ceiling_per_s": ceiling_rate,
        "ratio": rate / ceiling_rate,
        "cpu_us": cpu_per_mo_us,
    }


def _describe(r: dict[str, float]) -> str:
    # One worker is one process (serve --workers 1 runs no supervisor): its RSS is the whole figure.
    parts = (
        f" (supervisor {r['supervisor_rss_mib']:.0f}, largest worker {r['worker_rss_mib']:.0f})"
        if not math.isnan(r["worker_rss_mib"])
        else " (one process)"
    )
    return (
        f"{r['mo_per_s']:,.0f} MO/s end to end, p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, "
        f"intake→callback p50 {r['callback_p50_ms']:.1f} ms p99 {r['callback_p99_ms']:.1f} ms, "
        f"peak RSS {r['rss_mib']:.0f} MiB{parts}; ceiling {r['ceiling_per_s']:,.0f} req/s; "
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
    parser.add_argument(
        "--with-console",
        action="store_true",
        help="measure each run also while a console Overview and a 2 s /v1/stats poller watch",
    )
    parser.add_argument(
        "--workers",
        type=_worker_counts,
        default=[None],
        help="comma-separated worker counts, each measured in every run (default: serve's default)",
    )
    parser.add_argument("--rate", type=float, default=None, help="paced single pushes at this many per s")
    parser.add_argument(
        "--reply-http",
        action="store_true",
        help="replies go out over the http reply channel to a local MT endpoint (default: the log channel)",
    )
    parser.add_argument(
        "--python", default=sys.executable, help="run mogateway on this interpreter (default: this one)"
    )
    parser.add_argument(
        "--against",
        default=None,
        metavar="PYTHON",
        help="also run every run on this interpreter (another checkout's .venv/bin/python), alternating "
        "which goes first, and print the per-run ratios: a before/after in one invocation",
    )
    args = parser.parse_args()
    print(f"# this ({args.python}): {gateway_build(args.python)}", flush=True)
    if args.against is not None:
        print(f"# against ({args.against}): {gateway_build(args.against)}", flush=True)
        _before_after(args)
        return
    results: dict[tuple[int | None, bool], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="mogw-bench-") as tmp:
        for n in range(1, args.runs + 1):
            order = [False, True] if n % 2 else [True, False]
            counts = args.workers if n % 2 else args.workers[::-1]
            for workers in counts:
                for watched in order if args.with_console else [False]:
                    r = _run_once(args, Path(tmp), watched, workers, args.python)
                    results.setdefault((workers, watched), []).append(r)
                    print(f"run {n}{_label(workers, watched, args.with_console)}: {_describe(r)}", flush=True)
    for (workers, watched), runs in results.items():
        med = {k: median([r[k] for r in runs]) for k in runs[0]}
        print(f"median of {len(runs)}{_label(workers, watched, args.with_console)}: {_describe(med)}")
    if len(args.workers) > 1:
        base = args.workers[0]
        for workers in args.workers[1:]:
            ratios = [
                b["mo_per_s"] / a["mo_per_s"]
                for a, b in zip(results[(base, False)], results[(workers, False)], strict=False)
            ]
            print(f"{workers} workers / {base}: {median(ratios):.2f}× (median of the per-run ratios)")


def _run_once(
    args: argparse.Namespace, workdir: Path, watched: bool, workers: int | None, python: str
) -> dict[str, float]:
    """One run of ``one_run`` with the command line's count, concurrency, batch, rate and reply channel."""
    return asyncio.run(
        one_run(
            args.count,
            args.concurrency,
            args.batch,
            workdir,
            watched,
            workers,
            args.rate,
            python,
            args.reply_http,
        )
    )


def _before_after(args: argparse.Namespace) -> None:
    """``--against``: each run measures both gateways, the order swapped every run; the medians of both
    and of the per-run ratios (this checkout / the other)."""
    mine: list[dict[str, float]] = []
    other: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="mogw-bench-") as tmp:
        for n in range(1, args.runs + 1):
            pairs = [(args.python, mine, "this"), (args.against, other, "against")]
            for python, into, name in pairs if n % 2 else pairs[::-1]:
                r = _run_once(args, Path(tmp), False, args.workers[0], python)
                into.append(r)
                print(f"run {n} ({name}, {python}): {_describe(r)}", flush=True)
    for name, runs in (("this", mine), ("against", other)):
        med = {k: median([r[k] for r in runs]) for k in runs[0]}
        print(f"median of {len(runs)} ({name}): {_describe(med)}")
    for key, what in (("mo_per_s", "MO/s"), ("cpu_us", "CPU per MO")):
        ratios = [a[key] / b[key] for a, b in zip(mine, other, strict=True)]
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{what}, this / against: {median(ratios):.2f}x (median of the per-run ratios {shown})")


def _label(workers: int | None, watched: bool, with_console: bool) -> str:
    label = "" if workers is None else f" {workers} worker(s)"
    if with_console:
        label += " (console + stats poller)" if watched else " (nobody watching)"
    return label


def _worker_counts(text: str) -> list[int | None]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("worker counts are positive integers, e.g. 1,2")
    return list(counts)


if __name__ == "__main__":
    main()
