"""Shared helpers for the benchmarks: free ports, processes we start and stop, a fast callback app, the
gateway's environment and client, what its processes use."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The tokens of a bench's gateway (local and thrown away with it).
ADMIN = "bench-admin-token-0123456789"
INGEST = "bench-ingest-token-0123456789"
#: The WhatsApp benches: the app secret their gateway checks webhooks with, and the fake Graph API's
#: default number (its phone number id, its digits) and token.
APP_SECRET = "bench-app-secret-0123456789"
PNID = "106540352242922"
BUSINESS = "919876543210"
GRAPH_TOKEN = "rehearsal-token"

#: A callback application answering every POST /cb with one text: ``OK thanks``, or argv[2].
FAST_APP = r"""
import sys
from aiohttp import web
TEXT = sys.argv[2] if len(sys.argv) > 2 else "OK thanks"
async def handle(request):
    await request.read()
    return web.Response(text=TEXT, content_type="text/plain")
app = web.Application()
app.router.add_post("/cb", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def start(
    args: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT)


def gateway_build(python: str, src: str = "") -> str:
    """Which build the gateway on ``python`` (or from ``src``) will run: ``compiled (...)`` or
    ``pure Python (why)``, as ``mogateway.compiled.STATUS`` says in a fresh process.

    Printed at the head of a bench's figures: a source file edited after the build (``ruff format``
    will do it) silently sends the whole package back to pure Python, about a fifth more CPU per MO,
    and an A/B between a compiled and a pure gateway measures that, not the change."""
    env = {**os.environ, **({"PYTHONPATH": src} if src else {})}
    done = subprocess.run(
        [python, "-c", "import mogateway.compiled as c; print(c.STATUS)"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or f"unknown ({done.stderr.strip().splitlines()[-1:]})"


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_fast_app(port: int) -> subprocess.Popen[bytes]:
    proc = start([sys.executable, "-c", FAST_APP, str(port)])
    wait_port(port)
    return proc


def serve_command(
    port: int, workers: int | None = None, *, python: str = sys.executable, config: Path | None = None
) -> list[str]:
    """``mogateway serve`` on ``port`` with ``python``: its own number of workers unless ``workers``,
    its settings from the environment and from ``config`` when given."""
    command = [python, "-m", "mogateway", "serve", "--port", str(port)]
    if config is not None:
        command += ["--config", str(config)]
    if workers is not None:
        command += ["--workers", str(workers)]
    return command


def gateway_env(database: Path | str, **more: str) -> dict[str, str]:
    """The environment of a bench's gateway: its journal, the bench's tokens, callbacks to 127.0.0.1
    allowed, warnings only; ``more`` added (or replacing)."""
    return {
        "MOGATEWAY_DATABASE": str(database),
        "MOGATEWAY_ADMIN_TOKEN": ADMIN,
        "MOGATEWAY_INGEST_TOKEN": INGEST,
        "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true",
        "MOGATEWAY_LOG_LEVEL": "warning",
        **more,
    }


def whatsapp_config(path: Path, database: Path, graph_url: str, *, top: str = "", whatsapp: str = "") -> Path:
    """Write the settings of a WhatsApp bench's gateway to ``path``: its journal, the bench's admin
    token and app secret, the fake Graph API at ``graph_url`` and its default number; ``top`` adds lines
    to the top-level settings, ``whatsapp`` to ``[whatsapp]``."""
    path.write_text(
        f"""database = "{database}"
admin_token = "{ADMIN}"
allow_private_callbacks = true
log_level = "warning"
{top}
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "bench-verify-token"
graph_url = "{graph_url}"
{whatsapp}
[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "{GRAPH_TOKEN}"
"""
    )
    return path


async def register_client(base: str, client: dict[str, Any]) -> dict[str, Any]:
    """Register ``client`` on the gateway at ``base`` (its admin API, the bench's token): its record,
    with its bearer token. Raises RuntimeError when the gateway refuses it."""
    import aiohttp  # the benches that register a client have it; the others need not

    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base}/v1/clients", json=client, headers={"authorization": f"Bearer {ADMIN}"}) as r,
    ):
        if r.status != 201:
            raise RuntimeError(f"client registration failed: {r.status} {await r.text()}")
        record: dict[str, Any] = await r.json()
        return record


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def peak_rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process (and its threads) used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process descended from it (a supervisor and its workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds used so far by the processes ``pids`` (those gone count as 0: take the list once
    before and read it again after, with the same pids)."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def tree_peak_rss_mib(pids: list[int]) -> float:
    """The sum of the processes' peak resident sizes: what the gateway as a whole held at most (an
    upper bound: the peaks need not be simultaneous)."""
    peaks = [peak_rss_mib(pid) for pid in pids]
    return sum(p for p in peaks if p == p)


class TreeMeter:
    """What a gateway's processes (``process_tree`` of the one started) use from now on: CPU seconds
    since it was made, and their peak resident sizes (``tree_peak_rss_mib``)."""

    def __init__(self, pid: int) -> None:
        self.pids = process_tree(pid)
        self._cpu_before = tree_cpu_seconds(self.pids)

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pids) - self._cpu_before

    def peak_rss_mib(self) -> float:
        return tree_peak_rss_mib(self.pids)


def journal_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a journal bench (``journal.py``, ``journal_postgres.py``): its docstring as the
    help, ``--count`` MOs per run, ``--runs``, ``--src`` (read before mogateway is imported); each
    adds its own."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", help="import mogateway from this src/ directory (A/B)")
    return parser


def print_journal_runs(runs: Iterable[tuple[float, float, float, float]], cpu: str) -> None:
    """Print each run of a journal bench as it ends, then the medians: MO/s and µs of ``cpu`` per MO
    for the store, then for the outcome and reply records."""

    def line(r: list[float] | tuple[float, ...]) -> str:
        return (
            f"store {r[0]:,.0f} MO/s ({r[1]:.0f} µs {cpu}/MO); "
            f"outcome + reply {r[2]:,.0f} MO/s ({r[3]:.0f} µs {cpu}/MO)"
        )

    results = []
    for n, r in enumerate(runs, 1):
        results.append(r)
        print(f"run {n}: {line(r)}", flush=True)
    print(f"median of {len(results)}: {line([statistics.median(col) for col in zip(*results, strict=True)])}")
