"""Replay: an operator asks for a finished message's callback to be made again.

Only a finished message that was accepted can be replayed (``core.timeline``: replay moves any final
state but ``rejected`` back to ``queued``); the change is a compare-and-set, so a message that moved on
meanwhile is refused rather than dispatched twice.
"""

from __future__ import annotations

from mogateway.core.ports import Clock, MessageRecord, MessageStore, WorkQueue
from mogateway.core.timeline import REPLAYABLE_STATES, Change, Event, EventKind, State

__all__ = ["NotReplayable", "replay"]


class NotReplayable(ValueError):
    """A replay of a message that is not finished (or was rejected, so never accepted)."""


async def replay(
    store: MessageStore, queue: WorkQueue, message_id: str, clock: Clock
) -> MessageRecord | None:
    """Queue ``message_id`` for its callback again. Returns its record, or None for an unknown message.

    Raises NotReplayable when the message is not finished, or was rejected at intake.
    """
    record = await store.get(message_id)
    if record is None:
        return None
    if record.state is State.REJECTED:
        raise NotReplayable("a rejected message was never accepted and cannot be replayed")
    event = Event(EventKind.REPLAY, clock(), {"from_state": record.state.value})
    (applied,) = await store.apply([Change(message_id, event)])
    if not applied:
        finished = ", ".join(sorted(s.value for s in REPLAYABLE_STATES))
        raise NotReplayable(
            f"message is {record.state.value}; only finished messages ({finished}) can be replayed"
        )
    # Read before queueing: once queued, the callback (and its reply) may be done before a read after
    # it, and the answer would not be the state the replay set.
    queued = await store.get(message_id)
    await queue.put([record.message])
    return queued
