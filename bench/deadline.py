"""What a deadline around one callback costs: ``asyncio.timeout`` against ``service.deadline``.

    python bench/deadline.py [--count 20000] [--runs 5]

Runs ``--count`` tasks at once, each entering a 30 s deadline and yielding once inside it (as a
callback does while it waits for its answer), under uvloop when installed (as the gateway runs), and
prints the process CPU per task for each guard and for the same tasks without a deadline; medians of
``--runs``, the guards alternated within each run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from mogateway.service.deadline import deadline

try:
    import uvloop
except ImportError:  # pragma: no cover - the bench runs without it too
    uvloop = None


async def _with(guard: Callable[[float], Any]) -> None:
    async with guard(30.0):
        await asyncio.sleep(0)


async def _bare() -> None:
    await asyncio.sleep(0)


async def _cpu_per_task(count: int, make: Callable[[], Any]) -> float:
    start = time.process_time()
    await asyncio.gather(*(make() for _ in range(count)))
    return (time.process_time() - start) / count * 1e6


async def main(count: int, runs: int) -> None:
    figures: dict[str, list[float]] = {"no deadline": [], "asyncio.timeout": [], "service.deadline": []}
    for _ in range(runs):
        figures["no deadline"].append(await _cpu_per_task(count, _bare))
        figures["asyncio.timeout"].append(await _cpu_per_task(count, lambda: _with(asyncio.timeout)))
        figures["service.deadline"].append(await _cpu_per_task(count, lambda: _with(deadline)))
    loop = "uvloop" if uvloop is not None else "asyncio"
    print(f"{count} tasks at once, {runs} runs, {loop}; CPU per task (median):")
    bare = statistics.median(figures["no deadline"])
    for name, values in figures.items():
        median = statistics.median(values)
        extra = "" if name == "no deadline" else f"   the deadline itself {median - bare:5.1f} µs"
        print(f"  {name:17s} {median:6.1f} µs{extra}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    coro = main(args.count, args.runs)
    if uvloop is not None:
        uvloop.run(coro)
    else:
        asyncio.run(coro)
