"""A redelivered MO is the first one whichever bind brought it: intake hands SMPP MOs to the journal
with their repeat window, and the journal finds the MO from the same number with the same content or
SMSC id (service/intake.py, core.repeats.find_repeats), here with a real SQLite journal."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from mogateway.core.message import Arrival, Message, id_for_source
from mogateway.core.repeats import content_source_id
from mogateway.core.timeline import State
from mogateway.edges.numbering_files import sender_resolver
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.intake import Intake
from mogateway.service.metrics import Metrics


class Queue:
    def __init__(self) -> None:
        self.put_ids: list[str] = []

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        self.put_ids.extend(m.id for m in items)


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[SqliteJournal]:
    j = SqliteJournal(tmp_path / "journal.db")
    await j.open()
    yield j
    await j.close()


def over(bind: str, text: str, source_id: str, *, window: float = 600.0, ms: int | None = None) -> Arrival:
    message = Message("", "56767", "919810012345", text, time.time(), f"smpp:{bind}", source_id=source_id)
    return Arrival(message, first_seen_ms=ms, repeat_window_s=window)


async def test_content_redelivered_over_another_bind_is_the_first_mo_and_is_not_queued_again(
    journal: SqliteJournal,
) -> None:
    queue, metrics = Queue(), Metrics()
    intake = Intake(journal, queue, sender_resolver(), metrics)  # type: ignore[arg-type]
    now_ms = int(time.time() * 1000)
    (first,) = await intake.accept([over("b0", "VOTE 1", content_source_id("d1", now_ms), ms=now_ms)])
    (again,) = await intake.accept([over("b1", "VOTE 1", content_source_id("d1", now_ms + 5), ms=now_ms + 5)])
    (unwindowed,) = await intake.accept(
        [over("b1", "VOTE 1", content_source_id("d1", now_ms + 9), window=0, ms=now_ms + 9)]
    )
    assert (first.duplicate, again.duplicate, again.id, again.state) == (False, True, first.id, State.QUEUED)
    assert not unwindowed.duplicate  # no window: content names nothing
    assert queue.put_ids == [first.id, unwindowed.id]
    record = await journal.get(first.id)
    assert record is not None and record.message.origin == "smpp:b0"  # replies go back over its bind


async def test_an_smsc_message_id_names_one_mo_over_every_bind(journal: SqliteJournal) -> None:
    queue = Queue()
    intake = Intake(journal, queue, sender_resolver(), Metrics())  # type: ignore[arg-type]
    (first,) = await intake.accept([over("b0", "HI", "s:7001")])
    (again,) = await intake.accept([over("b1", "HI", "s:7001")])
    (same_bind,) = await intake.accept([over("b0", "HI", "s:7001", window=0)])
    assert first.id == again.id == same_bind.id == id_for_source("smpp:b0:s:7001")
    assert again.duplicate and same_bind.duplicate and queue.put_ids == [first.id]
