"""A deadline around a block of a task, cheaper than ``asyncio.timeout`` when thousands run at once.

``asyncio.timeout`` arms one timer per block (with uvloop, a libuv timer started and stopped each time):
about 6 % of the event loop's time on the SMPP loop, where every callback has its own deadline. The
callbacks' deadlines are seconds long and need no sub-millisecond precision, so here every deadline of
one event loop goes into a bucket of :data:`RESOLUTION_S` and one timer per non-empty bucket cancels
the tasks still in it when it fires. Entering and leaving a block is two dict operations.

A deadline fires at most :data:`RESOLUTION_S` late, never early. Its semantics are those of
``asyncio.timeout``: the task is cancelled, and the block raises :class:`TimeoutError` — unless the task
was also cancelled by someone else, which then wins (the :class:`asyncio.CancelledError` goes on).
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType
from weakref import WeakKeyDictionary

from mogateway.service.running_loop import RunningLoop

__all__ = ["RESOLUTION_S", "deadline"]

#: How late a deadline may fire: the width of a bucket.
RESOLUTION_S = 0.01


class _Entry:
    __slots__ = ("expired", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.expired = False


class _Buckets:
    """The deadlines of one event loop, by bucket (the tick at or after which they expire)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buckets: dict[int, dict[int, _Entry]] = {}

    def add(self, entry: _Entry, when: float) -> int:
        tick = math.ceil(when / RESOLUTION_S)
        bucket = self._buckets.get(tick)
        if bucket is None:
            bucket = self._buckets[tick] = {}
            self._loop.call_at(tick * RESOLUTION_S, self._fire, tick)
        bucket[id(entry)] = entry
        return tick

    def remove(self, entry: _Entry, tick: int) -> None:
        bucket = self._buckets.get(tick)
        if bucket is not None:
            bucket.pop(id(entry), None)

    def _fire(self, tick: int) -> None:
        bucket = self._buckets.pop(tick, None)
        if not bucket:
            return
        for entry in bucket.values():
            entry.expired = True
            entry.task.cancel("deadline")


_per_loop: WeakKeyDictionary[asyncio.AbstractEventLoop, _Buckets] = WeakKeyDictionary()
_running = RunningLoop()


class deadline:
    """``async with deadline(seconds):`` — raise :class:`TimeoutError` if the block runs longer."""

    __slots__ = ("_buckets", "_delay", "_entry", "_tick")

    def __init__(self, delay_s: float) -> None:
        self._delay = delay_s

    async def __aenter__(self) -> deadline:
        loop = _running()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("deadline() must be used inside a task")
        buckets = _per_loop.get(loop)
        if buckets is None:
            buckets = _per_loop[loop] = _Buckets(loop)
        self._buckets = buckets
        self._entry = _Entry(task)
        self._tick = buckets.add(self._entry, loop.time() + self._delay)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        entry = self._entry
        self._buckets.remove(entry, self._tick)
        if entry.expired and exc_type is asyncio.CancelledError and entry.task.uncancel() == 0:
            raise TimeoutError from exc
        return None
