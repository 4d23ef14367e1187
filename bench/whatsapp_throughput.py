"""WhatsApp end to end: signed webhooks → callbacks → replies at the (fake) Graph API, on one gateway.

    python bench/whatsapp_throughput.py [--count 5000] [--rate 500] [--per-body 1] [--concurrency 64]
        [--runs 3] [--workers N] [--with-sms] [--plain-graph]

Everything on 127.0.0.1, each in its own process: ``mogateway serve`` (the gateway's default workers
unless ``--workers``; SQLite journal, fsynced before every 200) configured with ``[whatsapp]`` whose
``graph_url`` is the fake Graph API (``mogateway waba fake-graph``; over TLS with a certificate the
bench makes, trusted through ``graph_ca_file``, unless ``--plain-graph``; the fake checks the token on
every request; the gateway keeps its connections alive), the fast callback application of
the other benches (answers "OK thanks" at once), and this process as Meta: ``--count`` messages in
webhooks of ``--per-body`` messages each, signed with the app secret as Meta signs them
(``X-Hub-Signature-256`` over the exact bytes, the fake's ``webhooks`` builders), offered at ``--rate``
messages per second (a steady load, at most ``--concurrency`` webhooks in flight). Each run waits until
every message's reply has ended (``replied``: the Graph API answered with a wamid; ``reply_unknown``: it
gave no answer within the gateway's 10 s deadline; ``reply_failed``), bounded by 300 s; each run checks
that the fake received no reply twice.

A webhook answered other than 200 (``503``: the gateway's admission control) is delivered again as Meta
does, backing off from 0.2 to 2 s, for up to 240 s; the refusals are counted.

``--with-sms`` alternates every run with the SMS HTTP path at the same count, rate and concurrency
(single ``POST /v1/inbound`` over at most ``--concurrency`` connections, each from its own sender, the
reply over the ``http`` reply channel to a local MT endpoint; ``bench/throughput.py``), which goes first
swapping every run, and prints the ratio of the CPU per message of each pair and their median: the cost
ratio of issue 35, measured at saturation when the rate is above what the gateway takes (idle work
then weighs nothing).

Prints, per run and the medians: messages per second end to end (first webhook sent → last reply
recorded), p50/p99 webhook → reply (from the instant its webhook was sent to its ``reply_submitted`` in
the journal, i.e. the Graph API answered the send with a wamid), p50/p99 of the webhook's own answer
(the 200, after the durable store), the gateway's CPU per message (supervisor and workers) and its peak
RSS (the sum of the processes' peaks).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import ssl
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
    percentile,
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
from mogateway.testing.tls import make_certificates

WEBHOOK = "/v1/whatsapp/webhook"


def _bodies(count: int, per_body: int) -> list[tuple[bytes, list[str]]]:
    """The webhooks: (signed bytes' body, wamids), each sender its own wa_id."""
    out = []
    for start_at in range(0, count, per_body):
        messages = []
        for n in range(start_at, min(count, start_at + per_body)):
            messages.append(wh.text(f"9197{n:08d}", f"BAL {n}", wamid=f"wamid.BENCH{n:09d}"))
        body = wh.encode(wh.webhook_body(messages))
        out.append((body, [m["id"] for m in messages]))
    return out


async def _offer(
    url: str, bodies: list[tuple[bytes, list[str]]], rate: float, per_body: int, concurrency: int
) -> tuple[dict[str, float], list[float], dict[int, int]]:
    """Post every webhook at ``rate`` messages/s; the instant each wamid's webhook was sent, and the
    webhooks' answer times (ms)."""
    sent_at: dict[str, float] = {}
    answers: list[float] = []
    refused: dict[int, int] = {}  # webhooks answered other than 200 (503: admission control), by status
    gate = asyncio.Semaphore(concurrency)
    interval = per_body / rate
    started = time.monotonic()

    async def post(session: aiohttp.ClientSession, body: bytes, wamids: list[str]) -> None:
        headers = {"content-type": "application/json", SIGNATURE_HEADER: sign_body(body, APP_SECRET)}
        give_up = time.monotonic() + 240
        pause = 0.2
        while time.monotonic() < give_up:
            t0 = time.time()
            try:
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    status = resp.status
            except aiohttp.ClientError:
                status = 0
            if status == 200:
                answers.append((time.time() - t0) * 1000)
                for w in wamids:
                    sent_at[w] = t0
                return
            refused[status] = refused.get(status, 0) + 1
            await asyncio.sleep(pause)  # as Meta: delivered again later, backing off
            pause = min(2.0, pause * 1.5)
        raise RuntimeError(f"webhook {wamids[0]} never answered 200 in 240 s")

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        tasks = []
        for i, (body, wamids) in enumerate(bodies):
            due = started + i * interval
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await gate.acquire()
            task = asyncio.create_task(post(session, body, wamids))
            task.add_done_callback(lambda _t: gate.release())
            tasks.append(task)
        await asyncio.gather(*tasks)
    return sent_at, answers, refused


#: Where a message's reply ends: handed over, possibly sent (the Graph API gave no answer within the
#: gateway's deadline), or refused.
_FINAL = ("replied", "reply_unknown", "reply_failed")


def _states(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return dict(conn.execute("SELECT state, count(*) FROM message_states GROUP BY state").fetchall())
    finally:
        conn.close()


def _finished(db: Path) -> int:
    states = _states(db)
    return sum(states.get(s, 0) for s in _FINAL)


def _reply_instants(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT m.source_id, e.at FROM messages m JOIN events e ON e.message_id = m.id "
            "WHERE e.kind = 'reply_submitted'"
        ).fetchall()
    finally:
        conn.close()
    return {str(source): float(at) for source, at in rows}


async def one_run(
    count: int,
    rate: float,
    per_body: int,
    concurrency: int,
    workdir: Path,
    workers: int | None,
    tls: bool = True,
    extra: str = "",
) -> dict[str, float]:
    app_port, gw_port, graph_port = free_port(), free_port(), free_port()
    app = start_fast_app(app_port)
    graph_command = [sys.executable, "-m", "mogateway", "waba", "fake-graph", "--port", str(graph_port)]
    certs = make_certificates(workdir / "tls") if tls else None
    if certs is not None:  # TLS as the real Graph API; the gateway trusts the bench's CA (graph_ca_file)
        graph_command += ["--tls-cert", str(certs.cert_file), "--tls-key", str(certs.key_file)]
    graph = start(graph_command, log=workdir / f"graph-{graph_port}.log")
    scheme = "https" if certs is not None else "http"
    graph_url = f"{scheme}://127.0.0.1:{graph_port}"
    db = workdir / f"wa-{gw_port}.db"
    ca = f'graph_ca_file = "{certs.ca_file}"\n' if certs is not None else ""
    config = whatsapp_config(workdir / f"wa-{gw_port}.toml", db, graph_url, whatsapp=ca + extra)
    gateway = start(serve_command(gw_port, workers, config=config), {}, workdir / f"gw-{gw_port}.log")
    try:
        wait_port(graph_port)
        wait_port(gw_port)
        base = f"http://127.0.0.1:{gw_port}"
        client = {
            "name": "bench",
            "whatsapp_numbers": [BUSINESS],
            "callback_url": f"http://127.0.0.1:{app_port}/cb",
            "max_concurrency": 64,
        }
        await register_client(base, client)
        await asyncio.sleep(0.5)  # every worker is up (the port answers as soon as one is)
        bodies = _bodies(count, per_body)
        meter = TreeMeter(gateway.pid)
        sent_at, answers, refused = await _offer(base + WEBHOOK, bodies, rate, per_body, concurrency)
        deadline = time.monotonic() + 300
        while _finished(db) < count:
            if time.monotonic() > deadline or gateway.poll() is not None:
                why = f"the gateway exited ({gateway.returncode})" if gateway.poll() is not None else "300 s"
                raise RuntimeError(f"only {_finished(db)} of {count} finished after {why}; logs in {workdir}")
            await asyncio.sleep(0.2)
        states = _states(db)
        cpu_us = meter.cpu_seconds() / count * 1e6
        rss = meter.peak_rss_mib()
        replies = _reply_instants(db)
        client_tls = ssl.create_default_context(cafile=str(certs.ca_file)) if certs else None
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{graph_url}/__fake/messages", ssl=client_tls or True) as resp,
        ):
            sends = orjson.loads(await resp.read())["data"]
    finally:
        stop(gateway)
        stop(app)
        stop(graph)
    contexts = [s["context_message_id"] for s in sends]
    if len(set(contexts)) != len(contexts) or len(sends) < states.get("replied", 0):
        raise RuntimeError(f"{len(sends)} sends at the Graph API for {states.get('replied', 0)} replies")
    latency = [(replies[w] - t) * 1000 for w, t in sent_at.items() if w in replies]
    first, last = min(sent_at.values()), max(replies.values())
    return {
        "mo_per_s": count / (last - first),
        "p50_ms": percentile(latency, 50),
        "p99_ms": percentile(latency, 99),
        "webhook_p50_ms": percentile(answers, 50),
        "webhook_p99_ms": percentile(answers, 99),
        "cpu_us": cpu_us,
        "rss_mib": rss,
        "unknown": float(states.get("reply_unknown", 0)),
        "failed": float(states.get("reply_failed", 0)),
        "refused": float(sum(refused.values())),
        "refused_other": float(sum(n for status, n in refused.items() if status != 503)),
    }


def _describe(r: dict[str, float]) -> str:
    return (
        f"{r['mo_per_s']:,.0f} msg/s end to end, webhook → reply p50 {r['p50_ms']:.0f} ms, "
        f"p99 {r['p99_ms']:.0f} ms; webhook answered p50 {r['webhook_p50_ms']:.1f} ms, "
        f"p99 {r['webhook_p99_ms']:.1f} ms; {r['cpu_us']:,.0f} µs CPU per message; "
        f"peak RSS {r['rss_mib']:.0f} MiB; replies unknown {r['unknown']:.0f}, failed {r['failed']:.0f}; "
        f"webhooks refused {r['refused']:.0f} (other than 503: {r['refused_other']:.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="messages per run (at most 100,000)")
    parser.add_argument("--rate", type=float, default=500.0, help="messages offered per second")
    parser.add_argument("--per-body", type=int, default=1, help="messages per webhook body")
    parser.add_argument("--concurrency", type=int, default=64, help="webhooks in flight at most")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="default: the gateway's (one per core)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep journals and logs here")
    parser.add_argument(
        "--max-pending",
        type=int,
        default=None,
        help="[whatsapp] max_pending_webhook_messages for the gateway (0: admission control off; "
        "default: the gateway's)",
    )
    parser.add_argument(
        "--plain-graph",
        action="store_true",
        help="the fake Graph API over plain HTTP (default: TLS with a certificate the bench makes, "
        "trusted through [whatsapp] graph_ca_file, as production has it)",
    )
    parser.add_argument(
        "--with-sms",
        action="store_true",
        help="alternate every run with the SMS HTTP path (single POST /v1/inbound at the same rate and "
        "count, each from its own sender, the reply over the http channel to a local MT endpoint) and "
        "print the CPU-per-message ratio of each pair",
    )
    args = parser.parse_args()
    if not 1 <= args.count <= 100_000 or args.rate <= 0 or args.per_body < 1 or args.concurrency < 1:
        parser.error("--count 1-100000, --rate above 0, --per-body and --concurrency at least 1")
    if not 1 <= args.runs <= 20:
        parser.error("--runs 1-20")
    print(f"# gateway ({sys.executable}): {gateway_build(sys.executable)}", flush=True)
    results = []
    sms_results: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="wa-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for n in range(args.runs):
            sms_first = args.with_sms and n % 2 == 1  # alternate which goes first
            if sms_first:
                sms_results.append(_sms_run(args, workdir, n))
            r = asyncio.run(
                one_run(
                    args.count,
                    args.rate,
                    args.per_body,
                    args.concurrency,
                    workdir,
                    args.workers,
                    tls=not args.plain_graph,
                    extra=""
                    if args.max_pending is None
                    else f"max_pending_webhook_messages = {args.max_pending}\n",
                )
            )
            print(f"run {n + 1}: {_describe(r)}", flush=True)
            results.append(r)
            if args.with_sms and not sms_first:
                sms_results.append(_sms_run(args, workdir, n))
            if args.with_sms:
                ratio = r["cpu_us"] / sms_results[-1]["cpu_us"]
                print(f"run {n + 1}: CPU per message WhatsApp / SMS = {ratio:.2f}x", flush=True)
    medians = {k: median([r[k] for r in results]) for k in results[0]}
    print(f"median of {args.runs}: {_describe(medians)}")
    if sms_results:
        sms_cpu = median([r["cpu_us"] for r in sms_results])
        sms_rate = median([r["mo_per_s"] for r in sms_results])
        ratios = [w["cpu_us"] / s["cpu_us"] for w, s in zip(results, sms_results, strict=True)]
        print(
            f"median of {args.runs} SMS (http reply channel): {sms_rate:,.0f} MO/s end to end, "
            f"{sms_cpu:,.0f} µs CPU per MO; CPU per message WhatsApp / SMS {median(ratios):.2f}x "
            f"(median of the pairs' ratios: {', '.join(f'{x:.2f}' for x in ratios)})"
        )


def _sms_run(args: argparse.Namespace, workdir: Path, n: int) -> dict[str, float]:
    """The SMS HTTP path at the same count and rate: single ``POST /v1/inbound`` each from its own
    sender, its reply over the ``http`` reply channel to the fast application (bench/throughput.py)."""
    from throughput import one_run as sms_one_run

    r = asyncio.run(
        sms_one_run(
            args.count,
            64,
            500,
            workdir,
            False,
            args.workers,
            args.rate,
            reply_http=True,
            skip_ceiling=True,
            connections=args.concurrency,
        )
    )
    print(
        f"run {n + 1} SMS: {r['mo_per_s']:,.0f} MO/s end to end, intake → reply p50 {r['p50_ms']:.0f} ms, "
        f"p99 {r['p99_ms']:.0f} ms; {r['cpu_us']:,.0f} µs CPU per MO",
        flush=True,
    )
    return r


if __name__ == "__main__":
    main()
