"""SMPP loop throughput: the simulator injects MOs over one bind, a fast callback answers, and we wait for
every reply's submit_sm at the simulator. Prints MO/s and p50/p99 from deliver_sm to submit_sm.

    python bench/smpp_throughput.py --count 20000 [--window 100] [--runs 3] [--with-kannel]
        [--workers 1,2] [--rate 1000]

Per run and per gateway: a fresh SMSC simulator (``mogateway.testing.smsc``, in this process) on a free
127.0.0.1 port, the gateway started as processes of its own and bound to it as a transceiver, then
``--count`` single-part MOs written as deliver_sm with up to ``--window`` unanswered (as an SMSC under
load does), and the clock stops when the last reply's submit_sm arrives. Every reply must arrive, to
the right msisdn, with the application's text.

- mogateway: ``mogateway serve`` (SQLite journal with synchronous=FULL: every MO is fsynced before its
  deliver_sm_resp), the bind configured for the test (no submit_sm throttle, window ``--window``), a
  registered client whose callback is the fast application. It asks for delivery receipts (its default,
  ``registered_delivery = 1``), so it also receives and records one receipt per reply.
  ``--workers 1,2`` runs ``mogateway serve --workers 1`` and ``--workers 2`` as two gateways of the
  same run (default: the gateway's own default, one worker per core); their CPU is that of the
  supervisor and every worker together.
- Kannel 1.4.5 (``--with-kannel``; Debian package ``kannel``: ``apt-get update && apt-get install -y
  kannel``; without it the bench stops with that advice rather than run without Kannel): bearerbox with an
  SMPP transceiver to the same kind of simulator and smsbox with an ``sms-service`` whose ``post-url`` is
  the same application (``bench/kannel/``). Its file store is written without fsync. It asks for no
  receipts unless ``--kannel-receipts``: then the application's answer to Kannel carries
  ``X-Kannel-DLR-Mask: 3`` and ``X-Kannel-DLR-Url``, so that, like mogateway, Kannel asks for a receipt
  of every reply, matches it when it comes (``dlr-storage = internal``) and hands it on, by a GET of
  that URL on the application: the way a Kannel deployment learns whether its replies arrived.

``--binds N`` gives each gateway N transceiver binds, each to a simulator of its own, and deals the MOs
out among them, each bind with its own window: with ``--workers`` N every worker of mogateway holds a
bind, the shape in which workers share out the SMPP traffic (``core/workers.py``).

``--python PATH`` runs mogateway on that interpreter instead of the one running the bench; repeated, it
runs a gateway per interpreter in the same run (named ``mogateway/1w@py3.11.2``), e.g. a pyenv build
beside the distribution's: how the interpreter was built changes the CPU per MO by up to a quarter
(docs/scaling.md).
Each must have mogateway and its dependencies installed (``PYTHON=... scripts/setup.sh`` in a clone).

``--senders shuffled`` sends the same MOs from the same numbers in an order of no pattern (seeded), as
a campaign's subscribers text, instead of in increasing order (``9198<i:08d>``, the default, which every
series in docs/benchmarks.md before §0.11 used). mogateway indexes its MOs by number (the repeat lookup,
the search by number), and numbers in increasing order land on the last page of that index, numbers
in no order on a page each (docs/benchmarks.md §0.11); Kannel keeps no such index.

``--journal-holds N`` starts every mogateway of the run on a copy of a journal that already holds N
finished MOs from numbers drawn at random, received over the last day (``bench/_journal_fill.py``, made
once per bench run), instead of an empty one: a gateway after weeks of traffic.

``--rate R`` paces the deliver_sm at R per second (a steady load, not a burst) instead of writing as
fast as the window allows: the latency figures then mean what a subscriber sees at that load.

The callback application is one small HTTP/1.1 server process (keep-alive, answers every request with
``text/plain`` "OK thanks"): mogateway's JSON POST with its Bearer header and Kannel's plain POST get the
same answer. The CPU each process used is printed per MO, so a bottleneck in the simulator or the
application would show.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    free_port,
    gateway_build,
    gateway_env,
    process_tree,
    register_client,
    serve_command,
    start,
    stop,
    tree_cpu_seconds,
    tree_peak_rss_mib,
    wait_port,
)

from mogateway.testing.smsc import SimulatedSmsc

REPLY = b"OK thanks"
SHORTCODE = "56767"

# A minimal HTTP/1.1 server (uvloop when available): keep-alive, Content-Length bodies, one fixed
# text/plain answer. Kept this small so that the application is never what the benchmark measures.
FAST_APP = r"""
import asyncio, sys
try:
    import uvloop
except ImportError:
    uvloop = None
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
          % (len(sys.argv[2]), sys.argv[2].encode()))
CLOSE = ANSWER.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
# With a DLR URL (argv[3]), Kannel's requests (POST /kannel) are answered with the headers that make
# smsbox ask for a receipt of the reply (final states: mask 1 + 2) and GET that URL when it comes.
KANNEL = (ANSWER.replace(b"\r\n\r\n", b"\r\nX-Kannel-DLR-Mask: 3\r\nX-Kannel-DLR-Url: %s\r\n\r\n"
          % sys.argv[3].encode(), 1) if len(sys.argv) > 3 else ANSWER)

class Server(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""

    def data_received(self, data):
        buffer, out, close = self.buffer + data, [], False
        while not close:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            length = 0
            for line in buffer[:end].lower().split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding":
                    self.transport.write(b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n")
                    self.transport.close()
                    return
                elif name == b"connection" and value.strip() == b"close":
                    close = True
            if len(buffer) < end + 4 + length:
                break
            kannel = buffer.startswith(b"POST /kannel")
            buffer = buffer[end + 4 + length:]
            out.append(CLOSE if close else KANNEL if kannel else ANSWER)
        self.buffer = buffer
        if out:
            self.transport.write(b"".join(out))
        if close:
            self.transport.close()

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Server, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with server:
        await server.serve_forever()

(uvloop.run if uvloop else asyncio.run)(main())
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] if ordered else float("nan")


@dataclass
class Result:
    """One gateway's figures for one run."""

    name: str
    count: int
    mo_per_s: float
    p50_ms: float
    p99_ms: float
    ack_p50_ms: float
    cpu_ms_per_mo: dict[str, float] = field(default_factory=dict)
    rss_mib: float = float("nan")
    receipts: int = 0  # receipts the simulators sent and had answered by the time the last reply came

    def line(self) -> str:
        cpu = ", ".join(f"{k} {v:.3f}" for k, v in self.cpu_ms_per_mo.items())
        return (
            f"{self.name:<12} {self.mo_per_s:7.0f} MO/s   deliver_sm→submit_sm p50 {self.p50_ms:7.1f} ms  "
            f"p99 {self.p99_ms:7.1f} ms   deliver_sm_resp p50 {self.ack_p50_ms:6.1f} ms   CPU ms/MO: {cpu}"
            f"   peak RSS {self.rss_mib:.0f} MiB   receipts {self.receipts}"
        )


async def measure(
    name: str,
    smscs: list[SimulatedSmsc],
    count: int,
    window: int,
    pids: dict[str, list[int]],
    rate: float | None = None,
    senders: str = "ordered",
) -> Result:
    """Inject ``count`` MOs at ``smscs`` (each bound to one bind; the MOs dealt out among them, each
    with its own window) and wait for every reply's submit_sm.
    ``pids``: the processes of each party whose CPU is counted (a gateway's supervisor and workers)."""
    messages = [(f"9198{i:08d}", SHORTCODE, f"bench {i}") for i in range(count)]
    if senders == "shuffled":
        random.Random(count).shuffle(messages)  # the same order for every gateway of the run
    shares = [messages[j :: len(smscs)] for j in range(len(smscs))]
    cpu_before = {k: tree_cpu_seconds(group) for k, group in pids.items()}
    own_before = time.process_time()
    already = [len(smsc.submits) for smsc in smscs]
    receipts_before = sum(len(smsc.receipt_answers) for smsc in smscs)
    per_bind_rate = None if rate is None else rate / len(smscs)
    bursts = await asyncio.gather(
        *(
            smsc.inject_burst(share, window=window, timeout=120, rate=per_bind_rate)
            for smsc, share in zip(smscs, shares, strict=True)
        )
    )
    injected = [r for burst in bursts for r in burst]
    refused = sorted({r.status for r in injected if r.status != 0}, key=str)
    if refused:
        raise RuntimeError(f"{name}: deliver_sm answered with status {refused}")
    # A reply leaves on its MO's bind, or on another of the same operator when that one cannot take it.
    deadline = time.monotonic() + max(120.0, count / 50)
    while sum(len(smsc.submits) for smsc in smscs) - sum(already) < count:
        if time.monotonic() > deadline:
            got = sum(len(smsc.submits) for smsc in smscs) - sum(already)
            raise TimeoutError(f"{name}: {got} of {count} submit_sm arrived")
        await asyncio.sleep(0.005)
    submits = [s for smsc, before in zip(smscs, already, strict=True) for s in smsc.submits[before:]]
    cpu = {k: (tree_cpu_seconds(group) - cpu_before[k]) * 1000 / count for k, group in pids.items()}
    cpu["simulator+bench"] = (time.process_time() - own_before) * 1000 / count
    receipts = sum(len(smsc.receipt_answers) for smsc in smscs) - receipts_before
    sent_at = {r.source: r.sent_at for r in injected}
    latencies = []
    for s in submits:
        msisdn = s.pdu.destination_addr.lstrip("+")
        if msisdn not in sent_at or s.pdu.short_message != REPLY:
            raise RuntimeError(f"{name}: unexpected submit_sm to {msisdn!r}: {s.pdu.short_message!r}")
        latencies.append((s.at - sent_at.pop(msisdn)) * 1000)
    if sent_at:
        raise RuntimeError(f"{name}: {len(sent_at)} MOs got no reply")
    first = min(r.sent_at for r in injected)
    last = max(s.at for s in submits)
    rss = tree_peak_rss_mib(pids[name]) if name in pids else float("nan")
    return Result(
        name,
        count,
        count / (last - first),
        percentile(latencies, 50),
        percentile(latencies, 99),
        percentile([(r.answered_at - r.sent_at) * 1000 for r in injected], 50),
        cpu,
        rss,
        receipts,
    )


def _gateway_command(gw_port: int, profile: str, workers: int | None, python: str) -> list[str]:
    cmd = serve_command(gw_port, workers, python=python)
    if profile:
        py_spy = str(Path(sys.executable).parent / "py-spy")
        record = [py_spy, "record", "-r", "200", "--idle", "--threads", "--subprocesses", "-f", "raw"]
        cmd = [*record, "-o", profile, "--", *cmd]
    return cmd


@dataclass(frozen=True)
class Interpreter:
    """A Python the gateway runs on (``--python``); ``label`` tells them apart in the figures."""

    path: str
    label: str = ""


def interpreters(paths: list[str]) -> list[Interpreter]:
    """Label each interpreter by its version, and by its place in the list where versions repeat."""
    if not paths:
        return [Interpreter(sys.executable)]
    versions = [
        subprocess.run(
            [path, "-c", "import platform; print(platform.python_version())"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for path in paths
    ]
    return [
        Interpreter(path, f"py{version}" if versions.count(version) == 1 else f"py{version}#{i + 1}")
        for i, (path, version) in enumerate(zip(paths, versions, strict=True))
    ]


def gateway_name(workers: int | None, python: Interpreter | None = None) -> str:
    name = "mogateway" if workers is None else f"mogateway/{workers}w"
    return f"{name}@{python.label}" if python is not None and python.label else name


def held_journal_path(args: argparse.Namespace, workdir: Path) -> Path:
    """Where the journal of ``--journal-holds`` MOs is (every gateway of the run starts on a copy)."""
    return workdir / f"held-{args.journal_holds}.db"


def make_held_journal(args: argparse.Namespace, workdir: Path) -> None:
    """Make the journal of ``--journal-holds`` finished MOs, once per bench run."""
    from _journal_fill import fill

    path = held_journal_path(args, workdir)
    began = time.monotonic()
    asyncio.run(fill(path, args.journal_holds))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size / 2**20
    took = time.monotonic() - began
    print(f"a journal of {args.journal_holds} MOs made in {took:.0f} s ({size:.0f} MiB)", flush=True)


async def run_mogateway(
    args: argparse.Namespace,
    app: subprocess.Popen[bytes],
    app_port: int,
    workdir: Path,
    run: int,
    workers: int | None = None,
    python: Interpreter | None = None,
) -> Result:
    smscs = [await SimulatedSmsc(system_id="bench", password="bench").start() for _ in range(args.binds)]
    gw_port = free_port()
    binds = [
        {
            "name": f"bench-{j}" if args.binds > 1 else "bench",
            "host": "127.0.0.1",
            "port": smsc.port,
            "system_id": "bench",
            "password": "bench",
            "throughput": 1_000_000,  # no throttle: the SMSC is ours and takes anything
            "window": args.window,
            "operator": "airtel",
            "registered_delivery": args.registered_delivery,
        }
        for j, smsc in enumerate(smscs)
    ]
    database = workdir / f"{gateway_name(workers, python).replace('/', '-')}-{run}.db"
    if args.journal_holds:
        shutil.copyfile(held_journal_path(args, workdir), database)
        # on disk before the gateway starts: else its first checkpoint's fsync writes the whole copy
        with open(database, "rb+") as copy:
            os.fsync(copy.fileno())
    env = gateway_env(database, MOGATEWAY_SMPP=json.dumps({"binds": binds}))
    if args.gateway_src:  # A/B runs: the gateway from another source tree (e.g. before a change)
        env["PYTHONPATH"] = str(Path(args.gateway_src).resolve())
    name = gateway_name(workers, python)
    log = workdir / f"{name.replace('/', '-')}-{run}.log"
    command = _gateway_command(gw_port, args.profile, workers, python.path if python else sys.executable)
    gateway = start(command, env, log)
    pid = gateway.pid
    try:
        await asyncio.to_thread(wait_port, gw_port, 30)
        client = {
            "name": "bench",
            "shortcodes": [SHORTCODE],
            "callback_url": f"http://127.0.0.1:{app_port}/cb",
            "max_concurrency": args.max_pending,
        }
        await register_client(f"http://127.0.0.1:{gw_port}", client)
        for smsc in smscs:
            await smsc.wait_bound(30)
        await asyncio.sleep(0.5)
        if args.profile:  # py-spy's child is the gateway
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            pid = int(children[0]) if children else pid
        pids = {name: process_tree(pid), "app": [app.pid]}
        return await measure(name, smscs, args.count, args.window, pids, args.rate, args.senders)
    finally:
        await _stop_gateway(gateway, pid)
        for smsc in smscs:
            await smsc.stop()


async def _stop_gateway(gateway: subprocess.Popen[bytes], pid: int) -> None:
    """Stop the gateway; when profiled, py-spy first (SIGINT: it writes its file), then the gateway
    itself by its pid should py-spy have left it running."""
    if pid != gateway.pid and gateway.poll() is None:
        gateway.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(gateway.wait, 60)
        except subprocess.TimeoutExpired:
            pass
    await asyncio.to_thread(stop, gateway)
    if pid != gateway.pid:
        with contextlib.suppress(OSError):  # gone already (and the pid not reused by something else)
            if b"mogateway" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)


async def run_kannel(
    args: argparse.Namespace, app: subprocess.Popen[bytes], app_port: int, workdir: Path, run: int
) -> Result:
    from kannel.driver import Kannel

    smscs = [await SimulatedSmsc(system_id="bench", password="bench").start() for _ in range(args.binds)]
    kdir = workdir / f"kannel-{run}"
    kdir.mkdir()
    try:
        async with Kannel(
            smsc_ports=[smsc.port for smsc in smscs],
            url=f"http://127.0.0.1:{app_port}/kannel",
            workdir=kdir,
            window=args.window,
            max_pending_requests=args.max_pending,
        ) as kannel:
            for smsc in smscs:
                await smsc.wait_bound(30)
            await asyncio.sleep(0.5)
            assert kannel.bearerbox is not None and kannel.smsbox is not None
            pids = {
                "kannel": [kannel.bearerbox.pid, kannel.smsbox.pid],
                "app": [app.pid],
            }
            return await measure("kannel", smscs, args.count, args.window, pids, args.rate, args.senders)
    finally:
        for smsc in smscs:
            await smsc.stop()


async def run_all(args: argparse.Namespace, workdir: Path) -> dict[str, list[Result]]:
    app_port = free_port()
    dlr_url = [f"http://127.0.0.1:{app_port}/dlr"] if args.kannel_receipts else []
    app = start([sys.executable, "-c", FAST_APP, str(app_port), REPLY.decode(), *dlr_url])
    results: dict[str, list[Result]] = {}
    Runner = Callable[[argparse.Namespace, subprocess.Popen[bytes], int, Path, int], Awaitable[Result]]
    runners: list[tuple[str, Runner]] = [
        (gateway_name(n, python), functools.partial(run_mogateway, workers=n, python=python))
        for python in interpreters(args.python)
        for n in args.workers
    ]
    if args.with_kannel:
        runners.append(("kannel", run_kannel))
    try:
        await asyncio.to_thread(wait_port, app_port)
        for run in range(1, args.runs + 1):
            # Alternate the order so that neither always runs on a warmer (or busier) machine.
            for name, runner in runners if run % 2 else runners[::-1]:
                result = await runner(args, app, app_port, workdir, run)
                results.setdefault(name, []).append(result)
                print(f"run {run}: {result.line()}", flush=True)
    finally:
        stop(app)
    return results


def _worker_counts(text: str) -> list[int | None]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("worker counts are positive integers, e.g. 1,2")
    return list(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="MOs per gateway per run")
    parser.add_argument("--window", type=int, default=100, help="deliver_sm in flight and submit_sm window")
    parser.add_argument("--runs", type=int, default=1, help="runs per gateway; medians are printed")
    parser.add_argument("--with-kannel", action="store_true", help="also run Kannel 1.4.5 (apt: kannel)")
    parser.add_argument(
        "--kannel-receipts",
        action="store_true",
        help="Kannel asks for a receipt of every reply and GETs a DLR URL of the application for each",
    )
    parser.add_argument(
        "--max-pending",
        type=int,
        default=512,
        help="callbacks in flight: mogateway's client max_concurrency and Kannel's max-pending-requests",
    )
    parser.add_argument(
        "--registered-delivery", type=int, default=1, choices=(0, 1), help="mogateway asks for receipts"
    )
    parser.add_argument(
        "--workers",
        type=_worker_counts,
        default=[None],
        help="comma-separated worker counts, one gateway of the run each (default: serve's default)",
    )
    parser.add_argument(
        "--binds",
        type=int,
        default=1,
        help="binds (mogateway's and Kannel's), each to a simulator of its own, the MOs dealt out among them",
    )
    parser.add_argument("--rate", type=float, default=None, help="pace the deliver_sm at this many per s")
    parser.add_argument(
        "--journal-holds",
        type=int,
        default=0,
        help="start mogateway on a journal already holding this many finished MOs (default: empty)",
    )
    parser.add_argument(
        "--senders",
        choices=("ordered", "shuffled"),
        default="ordered",
        help="the MOs' numbers in increasing order, or in an order of no pattern as real senders come",
    )
    parser.add_argument("--profile", default="", help="py-spy raw profile of mogateway to this file")
    parser.add_argument("--gateway-src", default="", help="run mogateway from this src/ directory (A/B)")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        help="run mogateway on this interpreter (repeat to compare several in one run; default: this one)",
    )
    args = parser.parse_args()
    if args.count < 1 or args.window < 1 or args.runs < 1:
        parser.error("--count, --window and --runs must be at least 1")
    if args.with_kannel:
        from kannel.driver import KannelMissing, kannel_version

        try:
            print(kannel_version())
        except KannelMissing as exc:
            parser.exit(2, f"error: {exc}\n")
    for python in interpreters(args.python):
        build = gateway_build(python.path, str(Path(args.gateway_src).resolve()) if args.gateway_src else "")
        print(f"# {gateway_name(None, python)} ({python.path}): {build}", flush=True)
    with tempfile.TemporaryDirectory(prefix="smpp-bench-") as tmp:
        if args.journal_holds:
            make_held_journal(args, Path(tmp))
        results = asyncio.run(run_all(args, Path(tmp)))
    senders = ", senders in no order" if args.senders == "shuffled" else ""
    print(f"\n{args.count} MOs per run, window {args.window}{senders}, {args.runs} run(s); medians:")
    medians: dict[str, float] = {}
    width = max(12, *(len(name) for name in results))
    for name, rows in results.items():
        mo_s = statistics.median(r.mo_per_s for r in rows)
        medians[name] = mo_s
        p50 = statistics.median(r.p50_ms for r in rows)
        p99 = statistics.median(r.p99_ms for r in rows)
        print(f"  {name:<{width}} {mo_s:7.0f} MO/s   deliver_sm→submit_sm p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    for name, rows in results.items():
        cpu = statistics.median(r.cpu_ms_per_mo.get(name, float("nan")) for r in rows)
        rss = statistics.median(r.rss_mib for r in rows)
        print(f"  {name:<{width}} CPU {cpu:.3f} ms/MO, peak RSS {rss:.0f} MiB")
    if "kannel" in medians:
        for name, rows in results.items():
            if name != "kannel":
                ratios = [m.mo_per_s / k.mo_per_s for m, k in zip(rows, results["kannel"], strict=False)]
                print(
                    f"  {name} / kannel: {statistics.median(ratios):.2f}× (median of the per-run ratios; "
                    f"{medians[name] / medians['kannel']:.2f}× of the medians)"
                )
                # Gateway CPU per MO against Kannel's (bearerbox + smsbox), run by run (issue 30).
                cpu = [
                    m.cpu_ms_per_mo[name] / k.cpu_ms_per_mo["kannel"]
                    for m, k in zip(rows, results["kannel"], strict=False)
                ]
                print(
                    f"  {name} / kannel CPU per MO: {statistics.median(cpu):.2f}× (median of the per-run "
                    f"ratios: {', '.join(f'{r:.2f}' for r in cpu)})"
                )


if __name__ == "__main__":
    main()
