"""The in-process queue keeps one copy of an MO until it is acknowledged (a sweep or a second hint
from another worker adds none)."""

from __future__ import annotations

from mogateway.core.message import Message
from mogateway.edges.queue.local import LocalQueue


def mo(message_id: str) -> Message:
    return Message(
        id=message_id,
        shortcode="56767",
        msisdn="919812345678",
        text="HI",
        received_at=1.0,
        origin="http",
        source_id=None,
        sender=None,
    )


async def test_an_mo_is_held_once_until_acknowledged() -> None:
    queue = LocalQueue()
    await queue.put([mo("a"), mo("b"), mo("a")])
    assert queue.lag() == 2 and queue.holds("a") and queue.holds("b")
    first = await queue.get()
    await queue.put([mo(first.item.id)], redelivered=True)  # being dispatched: not taken again
    assert queue.lag() == 1
    await first.ack()
    assert not queue.holds(first.item.id)
    await queue.put([mo(first.item.id)], redelivered=True)  # acknowledged: may come again
    assert queue.lag() == 2
    second = await queue.get()
    await second.ack()
    assert not queue.holds(second.item.id)
