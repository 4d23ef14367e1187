"""The sweeper publishes an MO nobody will dispatch, but never adds a second copy of one still queued."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats.js.errors
import pytest
from cluster_harness import NATS_URL

from mogateway.core.message import Message, Sender
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.queue.jetstream import JetStreamQueue
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.sweeper import Sweeper

SENDER = Sender(91, 9812, 345678)
#: The stream's duplicate window (the shortest NATS accepts) and the sweeper's idea of it.
WINDOW_S = 0.1
#: The sweeper's allowance for clock skew between nodes (5 s in production; one host here). Equal to
#: the window, so that the sweeper never takes an MO for one published a moment ago (window - margin).
MARGIN_S = 0.1


@pytest.fixture
async def queue() -> AsyncIterator[JetStreamQueue]:
    run = secrets.token_hex(4)
    q = JetStreamQueue(
        NATS_URL,
        {
            "stream": f"MOGW_S_{run}",
            "subject": f"mogws.{run}",
            "consumer": f"s_{run}",
            "duplicate_window_s": WINDOW_S,
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


async def _wait_until_forgotten(queue: JetStreamQueue, message_id: str, timeout: float = 10.0) -> None:
    """Until JetStream no longer remembers ``message_id``'s last publish (its duplicate window is over).

    The probe publishes that id again, expecting a last sequence the stream never has: while the id is
    remembered the server answers "duplicate" and stores nothing; once it is forgotten it refuses the
    publish for the wrong sequence, and still stores nothing."""
    assert queue.js is not None
    deadline = time.monotonic() + timeout
    while True:
        try:
            ack = await queue.js.publish(
                queue.settings.subject,
                b"probe",
                headers={"Nats-Msg-Id": message_id, "Nats-Expected-Last-Sequence": str(2**62)},
            )
        except nats.js.errors.BadRequestError as exc:
            assert "wrong last sequence" in str(exc), exc
            return
        assert ack.duplicate, f"the probe for {message_id} was stored: {ack}"
        assert time.monotonic() < deadline, f"JetStream still remembers {message_id} after {timeout} s"
        await asyncio.sleep(0.02)


async def test_old_stranded_mo_is_published_once_and_again_only_when_gone(
    queue: JetStreamQueue, tmp_path: Path
) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        await journal.store(
            [
                Message(
                    "m1",
                    "56767",
                    "919812345678",
                    "VOTE",
                    time.time(),
                    source_id="s1",
                    sender=Sender(91, 9812, 345678),
                )
            ]
        )
        # Older than the duplicate window less the margin: only the stream's contents can say whether it
        # is there.
        sweeper = Sweeper(
            journal, queue, after_s=0.0, interval_s=1, duplicate_window_s=WINDOW_S, margin_s=MARGIN_S
        )
        assert await sweeper.sweep_once() == 1
        first = await asyncio.wait_for(queue.get(), 5)
        assert first.item.id == "m1" and first.redelivered  # the dispatcher checks the journal first
        # Still in the stream (held, not acknowledged): another sweep must not add a copy.
        assert await sweeper.sweep_once() == 0
        assert await sweeper.sweep_once() == 0
        await first.ack()  # acknowledged without an outcome: now nothing would ever dispatch it
        await _wait_until_forgotten(queue, "m1")  # until then JetStream would drop the copy
        assert await sweeper.sweep_once() == 1
        again = await asyncio.wait_for(queue.get(), 5)
        assert again.item.id == "m1"
        await again.ack()
        kinds = [e.kind for e in await journal.timeline("m1")]
        assert kinds.count(EventKind.RECOVERED) == 2
    finally:
        await journal.close()


async def test_a_stranded_backlog_larger_than_a_page_is_all_published_once(
    queue: JetStreamQueue, tmp_path: Path
) -> None:
    """2,500 stranded MOs, pages of 1,000: the sweeper walks on from where it stopped, so three rounds
    publish every one of them once (a page read from the start every round would only ever see the
    first 1,000 when those cannot be published)."""
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        now = time.time()
        ids = [f"m{i:05d}" for i in range(2_500)]
        await journal.store(
            [
                Message(i, "56767", "919812345678", "VOTE", now, source_id=i, sender=Sender(91, 9812, 345678))
                for i in ids
            ]
        )
        # Older than the duplicate window plus the sweeper's clock margin, so that the stream's oldest
        # message (published by the first round, stamped by the NATS server's clock) proves the others
        # are not in it. Both clocks are this host's: the wait is for the wall clock to pass that age.
        old_enough_at = time.time() + WINDOW_S + MARGIN_S
        while time.time() <= old_enough_at:
            await asyncio.sleep(old_enough_at - time.time() + 0.01)
        sweeper = Sweeper(
            journal,
            queue,
            after_s=0.0,
            interval_s=1,
            duplicate_window_s=WINDOW_S,
            margin_s=MARGIN_S,
            page=1000,
        )
        rounds = [await sweeper.sweep_once() for _ in range(3)]
        assert rounds == [1000, 1000, 500]
        published: list[str] = []
        while len(published) < len(ids):
            delivery = await asyncio.wait_for(queue.get(), 10)
            published.append(delivery.item.id)
            await delivery.ack()
        assert sorted(published) == ids  # each once
    finally:
        await journal.close()


async def test_an_answered_mo_whose_node_died_is_published_again_under_a_new_id(
    queue: JetStreamQueue, tmp_path: Path
) -> None:
    """Its queue entry was acknowledged when its answer was recorded, and JetStream still remembers that
    entry's id (the duplicate window): a republish under the same id would be dropped and its reply
    never sent. A touched one (its node is alive and holds it) is left alone."""
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        now = time.time()
        await journal.store(
            [Message(m, "56767", "919812345678", "BAL", now, sender=SENDER) for m in ("dead", "alive")]
        )
        answer = Event(EventKind.OUTCOME, now, {"outcome": "reply"})
        await journal.apply([Change(m, answer, reply_text="hi") for m in ("dead", "alive")])
        await queue.put([Message("dead", "56767", "919812345678", "BAL", now, sender=SENDER)])
        first = await asyncio.wait_for(queue.get(), 5)
        await first.ack()  # as the dispatcher does once the outcome is recorded
        await journal.touch(["alive"])
        alive = await journal.get("alive")
        assert alive is not None
        # The sweep happens, by the sweeper's clock, after_s after the touch: "alive" has been unchanged
        # for just under after_s, "dead" (last changed before the queue round trip) for longer.
        sweeper = Sweeper(
            journal,
            queue,
            after_s=1.0,
            interval_s=1,
            duplicate_window_s=120,
            clock=lambda: alive.updated_at + 1.0,
        )
        assert await sweeper.sweep_once() == 1
        again = await asyncio.wait_for(queue.get(), 5)
        assert again.item.id == "dead" and again.redelivered
        await again.ack()
        assert await sweeper.sweep_once() == 0  # its updated_at moved: not again until unchanged again
        kinds = [e.kind for e in await journal.timeline("dead")]
        assert kinds.count(EventKind.RECOVERED) == 1
    finally:
        await journal.close()
