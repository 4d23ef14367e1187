"""Wall time of every CLI command, from exec to exit: the median of ``--runs`` fresh processes each.

    .venv/bin/python bench/cli_startup.py [--runs 15] [--url http://127.0.0.1:8080 --token T]
        [--only=--help --only="messages list --help"] [--src /path/to/other/checkout/src]

Every command path (``mogateway``, ``mogateway clients``, ``mogateway clients add``...) is run with
``--help``, found by walking the command tree, so a command added later is measured too; then a few
commands that do their work without a gateway (``secrets new-key``), ``doctor`` (every check on the
default settings, in an empty directory), and ``messages list``, ``top --once`` and ``clients list``
against ``--url`` (default: a closed port on loopback, so they measure the CLI's own
start and a refused connection; give a running gateway's URL and admin token to measure a real answer).
Each is run as ``python -m mogateway ...`` with ``MOGATEWAY_PURE`` as in the environment; ``--src`` runs
another checkout's source instead (``PYTHONPATH``), to compare two versions in one invocation. Besides
the wall time, the CPU time of the process (user + system): on a shared machine it moves less than the
wall time does. The budget is 0.3 s of wall time per command (docs/benchmarks.md §0.16, §0.17).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

BUDGET_S = 0.3


def command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as argument lists, from the command tree typer builds."""
    import typer

    from mogateway.cli import app

    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                sub = command.get_command(None, name)
                if not getattr(sub, "hidden", False):
                    walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens once the socket is closed


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(args: list[str], runs: int, env: dict[str, str], cwd: str | None = None) -> tuple[float, float, int]:
    """The median wall and CPU times of ``runs`` processes running ``mogateway *args`` (in ``cwd``), and
    the last exit code."""
    times, cpus = [], []
    code = 0
    for _ in range(runs):
        cpu = _children_cpu()
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "mogateway", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        times.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
        code = done.returncode
    return statistics.median(times), statistics.median(cpus), code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--url", default=None, help="A running gateway's API (default: a closed port).")
    parser.add_argument("--token", default="not-a-token", help="Its admin token (with --url).")
    parser.add_argument("--only", action="append", help="Measure only this command (repeatable).")
    parser.add_argument("--src", default=None, help="Run this checkout's src/ instead (PYTHONPATH).")
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="100")
    if args.src:
        env["PYTHONPATH"] = str(Path(args.src).resolve())
    url = args.url or closed_port_url()
    api = ["--url", url, "--token", args.token]
    cases = [[*path, "--help"] for path in command_paths()]
    cases += [
        ["secrets", "new-key"],
        ["messages", "list", *api],
        ["clients", "list", *api],
        ["top", "--once", *api],
        ["doctor", "--url", url],  # every check on the defaults, in an empty directory (no journal yet)
    ]
    if args.only:
        wanted = {" ".join(o.split()) for o in args.only}
        cases = [
            c
            for c in cases
            if " ".join(c).replace(" ".join(api), "").replace(f"--url {url}", "").strip() in wanted
        ]
    baseline, _ = wall_python(args.runs)
    print(
        f"# {len(cases)} commands, median of {args.runs} runs each, MOGATEWAY_PURE="
        f"{os.environ.get('MOGATEWAY_PURE', '')!r}, source {args.src or 'this checkout'}; "
        f"python -c pass: {baseline:.3f} s; load {os.getloadavg()[0]:.2f}"
    )
    print(f"{wall_trivial_typer(args.runs):6.3f} s wall  (a trivial two-command typer app: f --help)")
    worst = 0.0
    empty = tempfile.mkdtemp(prefix="mogw-cli-startup-")  # where each command runs: no mogateway.db
    for case in cases:
        seconds, cpu, code = wall(case, args.runs, env, empty)
        worst = max(worst, seconds)
        shown = " ".join(a if a != args.token else "T" for a in case)
        print(f"{seconds:6.3f} s wall {cpu:6.3f} s CPU  exit {code}  mogateway {shown}")
    shutil.rmtree(empty, ignore_errors=True)
    print(f"# slowest {worst:.3f} s (budget {BUDGET_S} s): {'within' if worst <= BUDGET_S else 'OVER'}")
    return 0 if worst <= BUDGET_S else 1


#: A two-command typer app: what typer itself takes to answer ``--help`` with its defaults (rich help; with
#: typer 0.29, pydantic for each option): the floor under every command before §0.17.
TRIVIAL_TYPER = """
import typer
app = typer.Typer()
@app.command()
def f(x: int = typer.Option(1, help="x")) -> None:
    \"\"\"A trivial command.\"\"\"
@app.command()
def g() -> None:
    \"\"\"Another.\"\"\"
app(["f", "--help"])
"""


def wall_trivial_typer(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", TRIVIAL_TYPER], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def wall_python(runs: int) -> tuple[float, int]:
    """The interpreter's own start, for scale."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), 0


if __name__ == "__main__":
    sys.exit(main())
