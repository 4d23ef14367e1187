"""SMPP loop throughput: the simulator injects MOs over one bind, a fast callback answers, and we wait for
every reply's submit_sm at the simulator. Prints MO/s and p50/p99 from deliver_sm to submit_sm.

    python bench/smpp_throughput.py --count 20000 --concurrency 50

Starts the fast callback application and ``mogateway serve`` (SQLite journal in a temporary directory)
as processes of their own; the simulator runs in this process. Everything listens on 127.0.0.1 and is
stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import free_port, start, stop, wait_port

from mogateway.testing.smsc import SimulatedSmsc

ADMIN = "bench-admin-token-0123456789"
INGEST = "bench-ingest-token-0123456789"
FAST_APP = r"""
import sys
from aiohttp import web
async def handle(request):
    await request.read()
    return web.Response(text="OK thanks", content_type="text/plain")
app = web.Application()
app.router.add_post("/cb", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


async def run(count: int, concurrency: int, workdir: Path) -> dict[str, float]:
    smsc = await SimulatedSmsc(system_id="bench", password="bench").start()
    app_port, gw_port = free_port(), free_port()
    app = start([sys.executable, "-c", FAST_APP, str(app_port)])
    bind = {
        "name": "bench",
        "host": "127.0.0.1",
        "port": smsc.port,
        "system_id": "bench",
        "password": "bench",
        "throughput": 1_000_000,
        "window": 100,
        "operator": "airtel",
    }
    env = {
        "MOGATEWAY_DATABASE": str(workdir / "bench.db"),
        "MOGATEWAY_ADMIN_TOKEN": ADMIN,
        "MOGATEWAY_INGEST_TOKEN": INGEST,
        "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true",
        "MOGATEWAY_LOG_LEVEL": "warning",
        "MOGATEWAY_SMPP": json.dumps({"binds": [bind]}),
    }
    gateway = start(
        [sys.executable, "-m", "mogateway", "serve", "--port", str(gw_port)], env, workdir / "gw.log"
    )
    try:
        wait_port(app_port)
        wait_port(gw_port)
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"http://127.0.0.1:{gw_port}/v1/clients",
                json={
                    "name": "bench",
                    "shortcodes": ["56767"],
                    "callback_url": f"http://127.0.0.1:{app_port}/cb",
                },
                headers={"authorization": f"Bearer {ADMIN}"},
            ) as r,
        ):
            if r.status != 201:
                raise RuntimeError(f"client registration failed: {r.status} {await r.text()}")
        await smsc.wait_bound(20)
        await asyncio.sleep(0.5)
        sent_at: dict[str, float] = {}
        numbers = iter(range(count))

        async def injector() -> None:
            for i in numbers:
                msisdn = f"9198{i:08d}"
                sent_at[msisdn] = time.monotonic()
                statuses = await smsc.inject_mo(msisdn, "56767", f"bench {i}")
                if statuses != [0]:
                    raise RuntimeError(f"deliver_sm answered {statuses}")

        first = time.monotonic()
        await asyncio.gather(*(injector() for _ in range(concurrency)))
        submits = await smsc.wait_submits(count, timeout=600)
        last = max(s.at for s in submits)
        latencies = [(s.at - sent_at[s.pdu.destination_addr]) * 1000 for s in submits[:count]]
    finally:
        stop(gateway)
        stop(app)
        await smsc.stop()
    return {
        "mo_per_s": count / (last - first),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=50, help="deliver_sm in flight (SMSC window)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.count, args.concurrency, Path(tmp)))
    print(
        f"mogateway SMPP: {args.count} MOs, window {args.concurrency}: {result['mo_per_s']:.0f} MO/s, "
        f"deliver_sm→submit_sm p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
