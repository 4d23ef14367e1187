"""Messages for the retention tests: stored through the journal's own API at a given received time,
and taken to a finished state the way the gateway does (outcome, reply submitted with its refs)."""

from __future__ import annotations

from mogateway.core.message import Message, Sender
from mogateway.core.ports import Journal
from mogateway.core.timeline import Change, Event, EventKind

DAY = 86400.0
#: Midnight UTC, a Monday: days in the tests start here.
EPOCH = 1_700_438_400.0


def message(mid: str, received_at: float, origin: str = "smpp:airtel") -> Message:
    return Message(
        id=mid,
        shortcode="56767",
        msisdn="919812345678",
        text=f"VOTE {mid}",
        received_at=received_at,
        origin=origin,
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )


async def finish(journal: Journal, mid: str, at: float) -> None:
    """Answered with a reply, the reply submitted as ``<mid>-r1``."""
    outcome = Event(EventKind.OUTCOME, at, {"outcome": "reply", "reply": "THANKS", "status": 200})
    submitted = Event(EventKind.REPLY_SUBMITTED, at, {"channel": "smpp:airtel", "refs": [f"{mid}-r1"]})
    assert await journal.apply([Change(mid, outcome, client_id="votes", reply_text="THANKS")]) == [True]
    assert await journal.apply([Change(mid, submitted, reply_refs=(f"{mid}-r1",))]) == [True]


async def day_of_traffic(journal: Journal, day: int, count: int, *, unfinished: int = 0) -> list[str]:
    """``count`` finished messages received over day ``day`` (0 = :data:`EPOCH`), and ``unfinished``
    more left queued; the ids of all of them."""
    start = EPOCH + day * DAY
    ids = [f"d{day}-{n:05d}" for n in range(count + unfinished)]
    step = DAY / (len(ids) + 1)
    await journal.store([message(mid, start + (n + 1) * step) for n, mid in enumerate(ids)])
    for mid in ids[:count]:
        await finish(journal, mid, start)
    return ids
