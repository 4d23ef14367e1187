"""The in-process work queue (the embedded default).

It holds nothing durable: the journal does. After a crash the gateway rebuilds it from the journal's
unfinished messages (see ``service.recovery``). It knows which messages it holds — put and not yet
acknowledged — and takes no second copy of one: a worker's sweep or a second hint from another worker
(``service.recovery``, ``edges.workers``) never has one MO dispatched twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from mogateway.core.message import Message

__all__ = ["LocalQueue"]


class _LocalEntry:
    __slots__ = ("_held", "item", "redelivered")

    def __init__(self, item: Message, redelivered: bool, held: set[str]) -> None:
        self.item = item
        self.redelivered = redelivered
        self._held = held

    async def ack(self) -> None:
        self._held.discard(self.item.id)

    async def in_progress(self) -> None:
        return None


class LocalQueue:
    """An asyncio queue of messages."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_LocalEntry] = asyncio.Queue()
        self._held: set[str] = set()

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        put = self._queue.put_nowait
        held = self._held
        for item in items:
            if item.id in held:
                continue  # already here (a second hint, a sweep): one copy is dispatched, not two
            held.add(item.id)
            put(_LocalEntry(item, redelivered, held))

    async def get(self) -> _LocalEntry:
        return await self._queue.get()

    def lag(self) -> int:
        return self._queue.qsize()

    def holds(self, message_id: str) -> bool:
        """Whether ``message_id`` is queued or being dispatched here (put and not acknowledged)."""
        return message_id in self._held
