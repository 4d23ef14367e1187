"""Shared helpers for the benchmarks: free ports, processes we start and stop, a fast callback app."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
