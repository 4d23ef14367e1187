"""The sweeper publishes an MO nobody will dispatch, but never adds a second copy of one still queued."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_harness import NATS_URL

from mogateway.core.timeline import EventKind, State
from mogateway.queue.jetstream import JetStreamQueue
from mogateway.service.app import queued_from_record
from mogateway.service.sweeper import Sweeper
from mogateway.storage.journal import NewMessage
from mogateway.storage.sqlite import SqliteJournal


@pytest.fixture
async def queue() -> AsyncIterator[JetStreamQueue]:
    run = secrets.token_hex(4)
    q = JetStreamQueue(
        NATS_URL,
        {
            "stream": f"MOGW_S_{run}",
            "subject": f"mogws.{run}",
            "consumer": f"s_{run}",
            "duplicate_window_s": 1,
        },
    )
    try:
        await q.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `bash scripts/ensure-services.sh`")
    yield q
    assert q.js is not None
    await q.js.delete_stream(f"MOGW_S_{run}")
    await q.close()


async def test_old_stranded_mo_is_published_once_and_again_only_when_gone(
    queue: JetStreamQueue, tmp_path: Path
) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        await journal.store(
            [
                NewMessage(
                    "m1",
                    "http",
                    "s1",
                    "56767",
                    "919812345678",
                    "VOTE",
                    time.time(),
                    State.QUEUED,
                    91,
                    98123,
                    45678,
                )
            ]
        )
        # Older than the (1 s) duplicate window: only the stream's contents can say whether it is there.
        sweeper = Sweeper(journal, queue, queued_from_record, after_s=0.0, interval_s=1, duplicate_window_s=1)
        assert await sweeper.sweep_once() == 1
        first = await asyncio.wait_for(queue.get(), 5)
        assert first.item.id == "m1" and first.redelivered  # the dispatcher checks the journal first
        # Still in the stream (held, not acknowledged): another sweep must not add a copy.
        assert await sweeper.sweep_once() == 0
        assert await sweeper.sweep_once() == 0
        await first.ack()  # acknowledged without an outcome: now nothing would ever dispatch it
        await asyncio.sleep(1.2)  # past the duplicate window of the first publish, which would drop the copy
        assert await sweeper.sweep_once() == 1
        again = await asyncio.wait_for(queue.get(), 5)
        assert again.item.id == "m1"
        await again.ack()
        kinds = [e.kind for e in await journal.timeline("m1")]
        assert kinds.count(EventKind.RECOVERED) == 2
    finally:
        await journal.close()
