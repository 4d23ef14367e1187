"""How far this machine itself lets work scale from one process to several, and how steady it is.

    python bench/machine_scaling.py [--processes 2] [--rounds 10]

Target 3 of docs/benchmarks.md asks two workers for at least 1.7 times the throughput of one. What a
machine can give is bounded before the gateway does anything: shared cores (hyperthreads, a VM's
vCPUs on a busy host), a shared cache, or neighbours taking the host's time. This measures that bound
with work that shares nothing: the same pure-Python loop (dicts, strings, ``json``, no I/O) run in
each round by one process alone and by ``--processes`` at once, which of the two goes first
alternating from round to round. It prints, per round and as medians:

* the **scaling**: ``processes × time alone / time of the slowest of them``, the throughput ratio a
  perfectly parallel program gets here (at most ``--processes``, on idle, independent cores);
* the CPU time each process took for the same work when alone and when together: more when together
  means the processes slow each other down (shared physical cores or caches);
* the spread of the time alone from round to round: how much the machine's speed moves by itself,
  which every other figure of ``bench/`` carries too.

Run it alone, with no gateway or benchmark beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

#: Units of work per process: 0.7 to 1.6 s of one core on the machine of docs/benchmarks.md §0.10.
UNITS = 200_000


def work(units: int) -> int:
    """Pure-Python work shaped like a gateway's: a dict built, serialised, summed and split."""
    total = 0
    for n in range(units):
        record = {"shortcode": "56767", "msisdn": 919812345678 + n, "message": "HELLO WORLD", "parts": 1}
        text = json.dumps(record)
        total += len(text) + sum(ord(c) for c in text[:16]) + len(text.split(","))
    return total


def child(units: int) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    work(units)
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))


def run_together(count: int, units: int) -> list[dict[str, float]]:
    """Start ``count`` processes of the same work at once; each one's wall and CPU seconds."""
    command = [sys.executable, __file__, "--child", str(units)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    return [json.loads(p.communicate()[0]) for p in procs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="processes run at once (default 2)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds, each alone and together")
    parser.add_argument("--units", type=int, default=UNITS, help="units of work per process")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.processes < 2 or args.rounds < 1 or args.units < 1:
        parser.exit(2, "error: --processes must be at least 2, --rounds and --units at least 1\n")
    scalings: list[float] = []
    alone_walls: list[float] = []
    cpu_alone: list[float] = []
    cpu_together: list[float] = []
    for n in range(1, args.rounds + 1):
        if n % 2:  # alternate which goes first: the machine's speed drifts within a round too
            (alone,) = run_together(1, args.units)
            together = run_together(args.processes, args.units)
        else:
            together = run_together(args.processes, args.units)
            (alone,) = run_together(1, args.units)
        slowest = max(r["wall"] for r in together)
        scaling = args.processes * alone["wall"] / slowest
        scalings.append(scaling)
        alone_walls.append(alone["wall"])
        cpu_alone.append(alone["cpu"])
        cpu_together.append(statistics.median(r["cpu"] for r in together))
        each = ", ".join(f"{r['wall']:.2f}" for r in together)
        print(
            f"round {n}: alone {alone['wall']:.2f} s (CPU {alone['cpu']:.2f}); {args.processes} at once "
            f"{each} s (CPU median {cpu_together[-1]:.2f}) -> scaling {scaling:.2f}x",
            flush=True,
        )
    spread = (max(alone_walls) - min(alone_walls)) / statistics.median(alone_walls)
    print()
    print(f"{args.rounds} rounds of {args.units} units, {args.processes} processes:")
    print(
        f"  scaling, median {statistics.median(scalings):.2f}x (rounds {min(scalings):.2f}-"
        f"{max(scalings):.2f}x; {args.processes:.2f}x is the most a machine can give)"
    )
    print(
        f"  CPU per process, medians: alone {statistics.median(cpu_alone):.2f} s, "
        f"together {statistics.median(cpu_together):.2f} s"
    )
    print(
        f"  the same work alone took {min(alone_walls):.2f}-{max(alone_walls):.2f} s from round to round "
        f"(spread {spread:.0%} of its median)"
    )


if __name__ == "__main__":
    main()
