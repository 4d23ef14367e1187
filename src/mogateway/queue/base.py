"""The work queue between intake and the dispatcher: what must be dispatched, shared by all workers.

``WorkQueue`` is a small protocol with an in-process implementation (the embedded default) and a NATS
JetStream one (many nodes). An item carries everything the dispatcher needs, so the common path never
reads the journal; ``redelivered`` tells the dispatcher to check the journal first, because an earlier
attempt may already have recorded an outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

__all__ = ["Delivery", "QueuedMO", "WorkQueue"]


@dataclass(frozen=True, slots=True)
class QueuedMO:
    """An accepted MO on its way to dispatch."""

    id: str
    origin: str
    shortcode: str
    msisdn: str
    message: str
    cc: int
    ndc: int
    sn: int
    operator: str
    circle: str
    received_at: float

    def to_json(self) -> bytes:
        return orjson.dumps(
            [
                self.id,
                self.origin,
                self.shortcode,
                self.msisdn,
                self.message,
                self.cc,
                self.ndc,
                self.sn,
                self.operator,
                self.circle,
                self.received_at,
            ]
        )

    @classmethod
    def from_json(cls, data: bytes) -> QueuedMO:
        fields: list[Any] = orjson.loads(data)
        return cls(*fields)


class Delivery(Protocol):
    """One item handed to a worker; ``ack`` when its outcome is durably recorded."""

    item: QueuedMO
    redelivered: bool

    async def ack(self) -> None: ...

    async def nak(self, delay_s: float = 0.0) -> None: ...

    async def in_progress(self) -> None: ...


class WorkQueue(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def put(self, items: Sequence[QueuedMO], redelivered: bool = False) -> None: ...

    async def get(self) -> Delivery: ...

    def lag(self) -> int: ...
