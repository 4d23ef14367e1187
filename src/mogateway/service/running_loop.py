"""The running event loop, without a system call each time the hot paths ask for it.

On Python 3.11 ``asyncio.get_running_loop()`` — and so ``asyncio.create_task``, ``asyncio.current_task``
and every future made without a loop — asks the operating system for the process id on every call, to
notice a fork (CPython gh-66285; 3.12 stopped doing so). On the SMPP loop that was ten ``getpid`` per MO
(docs/benchmarks.md §0.11). The call sites on an MO's way ask a :class:`RunningLoop` instead: the loop
found last time, taken again from asyncio whenever it is not running any more (a test's next loop).
"""

from __future__ import annotations

import asyncio

__all__ = ["RunningLoop"]


class RunningLoop:
    """``asyncio.get_running_loop()`` remembered: call it from a coroutine or a callback of the loop."""

    __slots__ = ("_loop",)

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return loop
