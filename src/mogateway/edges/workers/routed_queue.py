"""The work queue of one worker process on the embedded default: MOs it owns go to its own in-process
queue; the others are sent to their owner as dispatch hints (``core.workers`` names the owner).

Hints made in one turn of the event loop go to each owner as one frame. A hint is only a shortcut: the
MO is already in the journal with its owner, so a hint lost with a worker that died is made good by the
owner's recovery (if the owner died) or its orphan sweep (if the sender did, ``service.orphans``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from mogateway.core.message import Message
from mogateway.edges.queue.local import LocalQueue
from mogateway.edges.workers.siblings import Siblings

__all__ = ["DISPATCH", "RoutedQueue"]

#: The notification that carries dispatch hints: ``{"redelivered": bool, "messages": [array, ...]}``.
DISPATCH = "dispatch"


class RoutedQueue:
    """A :class:`~mogateway.core.ports.WorkQueue` over this worker's local queue and its siblings."""

    def __init__(self, local: LocalQueue, siblings: Siblings, owner_of: Callable[[Message], int]) -> None:
        self.local = local
        self._siblings = siblings
        self._me = siblings.me
        self._owner_of = owner_of
        self._outbox: dict[tuple[int, bool], list[list[Any]]] = {}
        self._flush_scheduled = False

    async def start(self) -> None:
        await self.local.start()

    async def close(self) -> None:
        self._flush()
        await self.local.close()

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        me = self._me
        owner_of = self._owner_of
        mine: list[Message] = []
        outbox = self._outbox
        for item in items:
            owner = owner_of(item)
            if owner == me:
                mine.append(item)
            else:
                outbox.setdefault((owner, redelivered), []).append(item.to_array())
        if outbox and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        if mine:
            await self.local.put(mine, redelivered)

    def _flush(self) -> None:
        self._flush_scheduled = False
        outbox, self._outbox = self._outbox, {}
        for (owner, redelivered), messages in outbox.items():
            self._siblings.tell(owner, DISPATCH, {"redelivered": redelivered, "messages": messages})

    async def accept(self, args: dict[str, Any]) -> None:
        """Take the hints a sibling sent (the ``dispatch`` notification)."""
        messages = [Message.from_array(values) for values in args["messages"]]
        await self.local.put(messages, bool(args.get("redelivered")))

    async def get(self) -> Any:
        return await self.local.get()

    def lag(self) -> int:
        return self.local.lag()

    def holds(self, message_id: str) -> bool:
        return self.local.holds(message_id)
