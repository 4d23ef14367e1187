"""A journal that already holds many finished MOs, as a gateway's does after weeks of traffic.

``fill(path, count)`` stores ``count`` SMPP MOs received over the last day, each from a number drawn
at random (as a campaign's subscribers text), and takes each through its callback's answer and its
reply's submission (with the reply's SMSC id), so that every one is finished (``replied``) and a
gateway opening the file finds nothing to recover. It writes through the journal's own API, so the
file has the gateway's schema and indexes.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

from mogateway.core.message import Message, Sender, message_id
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal

__all__ = ["fill"]

_BATCH = 500
_SENDER = Sender(91, 9812, 345678)


async def fill(path: Path, count: int, seed: int = 1) -> None:
    draw = random.Random(seed)
    journal = SqliteJournal(path, synchronous="normal")
    await journal.open()
    try:
        start = time.time() - 86_400.0
        step = 86_000.0 / max(1, count)
        for first in range(0, count, _BATCH):
            batch = []
            for n in range(first, min(count, first + _BATCH)):
                at = start + n * step
                ms = int(at * 1000)
                number = f"91{draw.randrange(6_000_000_000, 10_000_000_000)}"
                source_id = f"c:{os.urandom(16).hex()}:{ms}"
                batch.append(
                    Message(
                        message_id(ms, os.urandom(10)),
                        "56767",
                        number,
                        f"VOTE {n % 10}",
                        at,
                        "smpp:bench",
                        source_id,
                        sender=_SENDER,
                    )
                )
            await journal.store(batch)
            answers = []
            submissions = []
            for n, m in enumerate(batch, first):
                at = m.received_at + 0.05
                outcome = Event(
                    EventKind.OUTCOME,
                    at,
                    {"outcome": "reply", "status": 200, "reply": "OK thanks", "parts": 1, "encoding": "gsm7"},
                )
                answers.append(Change(m.id, outcome, client_id="cl_bench", reply_text="OK thanks"))
                submitted = Event(EventKind.REPLY_SUBMITTED, at + 0.02, {"channel": "smpp", "parts": 1})
                submissions.append(Change(m.id, submitted, reply_refs=(f"p{n:09x}",)))
            await journal.apply(answers)
            await journal.apply(submissions)
    finally:
        await journal.close()


if __name__ == "__main__":  # python bench/_journal_fill.py PATH COUNT
    import sys

    asyncio.run(fill(Path(sys.argv[1]), int(sys.argv[2])))
