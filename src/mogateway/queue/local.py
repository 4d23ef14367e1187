"""The in-process work queue (the embedded default).

It holds nothing durable: the journal does. After a crash the gateway rebuilds it from the journal's
unfinished messages (see ``service.recovery``), so acknowledging is a no-op here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from mogateway.queue.base import QueuedMO

__all__ = ["LocalQueue"]


@dataclass(slots=True)
class _LocalDelivery:
    item: QueuedMO
    redelivered: bool = False

    async def ack(self) -> None:
        return None

    async def nak(self, delay_s: float = 0.0) -> None:
        return None

    async def in_progress(self) -> None:
        return None


class LocalQueue:
    """An asyncio queue of QueuedMO."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_LocalDelivery] = asyncio.Queue()

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def put(self, items: Sequence[QueuedMO], redelivered: bool = False) -> None:
        put = self._queue.put_nowait
        for item in items:
            put(_LocalDelivery(item, redelivered))

    async def get(self) -> _LocalDelivery:
        return await self._queue.get()

    def lag(self) -> int:
        return self._queue.qsize()
