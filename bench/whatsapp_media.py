"""WhatsApp media through the gateway: how fast ``GET /v1/whatsapp/media/{id}`` streams, and its CPU.

    python bench/whatsapp_media.py [--size-mib 20] [--fetches 20] [--concurrency 4] [--runs 3]
        [--workers N]

Everything on 127.0.0.1, each in its own process: ``mogateway serve`` (the gateway's default workers
unless ``--workers``; ``public_url`` set, so callbacks carry the signed ``url``), the fake Graph API
(``mogateway waba fake-graph``: it generates the media's bytes on the fly, 64 KiB at a time), the fast
callback application of the other benches, and this process as Meta (one signed webhook with a
document message whose media of ``--size-mib`` is registered at the fake) and as the client
application: ``GET /v1/whatsapp/media/{id}`` with the client's own token, ``--fetches`` times, at most
``--concurrency`` at once, each body read to the end and its length and sha256 checked. (The signed
``url`` of the callback goes the same way after its signature check, a microsecond.)

Prints, per run and the medians: MiB/s streamed (bytes of every fetch / wall time from the first request
to the last byte), the gateway's CPU per MiB (supervisor and workers: user + system from /proc), and the
gateway's peak RSS (the sum of its processes' peaks). The fake Graph API and this process share the same
cores: the figure is the whole loop's on this machine, the gateway's share is its CPU per MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    APP_SECRET,
    BUSINESS,
    TreeMeter,
    free_port,
    gateway_build,
    median,
    register_client,
    serve_command,
    start,
    start_fast_app,
    stop,
    wait_port,
    whatsapp_config,
)

from mogateway.core.whatsapp import SIGNATURE_HEADER, sign_body
from mogateway.testing.fake_graph import webhooks as wh

MiB = 1024 * 1024
#: ``public_url`` makes callbacks carry the signed media ``url``.
_SETTINGS = """public_url = "https://gw.bench.test"
whatsapp_media_client_concurrency = 64
"""


async def _fetch_all(url: str, token: str, fetches: int, concurrency: int, size: int, digest: str) -> float:
    """Fetch ``url`` ``fetches`` times, ``concurrency`` at once; the wall time in seconds."""
    gate = asyncio.Semaphore(concurrency)

    async def one(session: aiohttp.ClientSession) -> None:
        async with gate, session.get(url, headers={"authorization": f"Bearer {token}"}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"fetch answered {resp.status}: {await resp.text()}")
            hasher = hashlib.sha256()
            got = 0
            async for chunk in resp.content.iter_any():
                hasher.update(chunk)
                got += len(chunk)
            if got != size or hasher.hexdigest() != digest:
                raise RuntimeError(f"fetched {got} bytes of {size}, or another sha256")

    timeout = aiohttp.ClientTimeout(total=600, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.monotonic()
        await asyncio.gather(*(one(session) for _ in range(fetches)))
        return time.monotonic() - started


async def one_run(
    size_mib: int, fetches: int, concurrency: int, workdir: Path, workers: int | None
) -> dict[str, float]:
    app_port, gw_port, graph_port = free_port(), free_port(), free_port()
    app = start_fast_app(app_port)
    graph = start(
        [sys.executable, "-m", "mogateway", "waba", "fake-graph", "--port", str(graph_port)],
        log=workdir / f"graph-{graph_port}.log",
    )
    db = workdir / f"media-{gw_port}.db"
    graph_url = f"http://127.0.0.1:{graph_port}"
    config = whatsapp_config(workdir / f"media-{gw_port}.toml", db, graph_url, top=_SETTINGS)
    gateway = start(serve_command(gw_port, workers, config=config), {}, workdir / f"gw-{gw_port}.log")
    size = size_mib * MiB
    try:
        wait_port(graph_port)
        wait_port(gw_port)
        base = f"http://127.0.0.1:{gw_port}"
        client = {
            "name": "bench",
            "whatsapp_numbers": [BUSINESS],
            "callback_url": f"http://127.0.0.1:{app_port}/cb",
        }
        token = (await register_client(base, client))["token"]
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{graph_url}/__fake/media", json={"size": size, "seed": 1}) as r:
                media = await r.json()
            body = wh.encode(
                wh.webhook_body(
                    [wh.media("919700000001", "document", media_id=media["id"], sha256=media["sha256"])]
                )
            )
            headers = {"content-type": "application/json", SIGNATURE_HEADER: sign_body(body, APP_SECRET)}
            async with session.post(base + "/v1/whatsapp/webhook", data=body, headers=headers) as r:
                (message_id,) = orjson.loads(await r.read())["ids"]
        await asyncio.sleep(0.5)  # every worker is up (the port answers as soon as one is)
        url = f"{base}/v1/whatsapp/media/{message_id}"
        await _fetch_all(url, token, 2, 2, size, media["sha256_hex"])  # warm: every path run once
        meter = TreeMeter(gateway.pid)
        wall = await _fetch_all(url, token, fetches, concurrency, size, media["sha256_hex"])
        cpu = meter.cpu_seconds()
        rss = meter.peak_rss_mib()
    finally:
        stop(gateway)
        stop(app)
        stop(graph)
    total_mib = size * fetches / MiB
    return {"mib_per_s": total_mib / wall, "cpu_ms_per_mib": cpu / total_mib * 1000, "rss_mib": rss}


def _describe(r: dict[str, float]) -> str:
    return (
        f"{r['mib_per_s']:,.1f} MiB/s streamed, {r['cpu_ms_per_mib']:.2f} ms gateway CPU per MiB, "
        f"gateway peak RSS {r['rss_mib']:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=20, help="the media's size (at most 100)")
    parser.add_argument("--fetches", type=int, default=20, help="fetches per run (at most 1,000)")
    parser.add_argument("--concurrency", type=int, default=4, help="fetches in flight at most")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="serve --workers (default: serve's)")
    args = parser.parse_args()
    if not 1 <= args.size_mib <= 100 or not 1 <= args.fetches <= 1000 or not 1 <= args.runs <= 20:
        parser.error("--size-mib 1..100, --fetches 1..1000, --runs 1..20")
    print(f"# gateway ({sys.executable}): {gateway_build(sys.executable)}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="mogateway-bench-media-") as tmp:
        for n in range(1, args.runs + 1):
            result = asyncio.run(
                one_run(args.size_mib, args.fetches, args.concurrency, Path(tmp), args.workers)
            )
            results.append(result)
            print(f"run {n}: {_describe(result)}", flush=True)
    medians = {key: median([r[key] for r in results]) for key in results[0]}
    print(f"median of {len(results)}: {_describe(medians)}")


if __name__ == "__main__":
    main()
