"""The retention sweep on both engines: whole days older than the retention go, in batches, with their
events and reply references; unfinished messages stay; the export files are complete, atomic, and a
sweep stopped between export and delete is finished by the next without a duplicate or a loss."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from prometheus_client import generate_latest
from traffic import DAY, EPOCH, day_of_traffic, finish

from mogateway.core.ports import Journal
from mogateway.service.metrics import Metrics
from mogateway.service.retention import ExportFailed, Retention
from mogateway.service.retention_export import DayFile, export_line


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def retention(journal: Journal, clock: Clock, export_dir: Path | None = None) -> Retention:
    return Retention(journal, Metrics(), days=2, export_dir=export_dir, clock=clock, batch=4, pause_s=0)


async def present(journal: Journal, ids: Sequence[str]) -> list[str]:
    return [mid for mid in ids if await journal.get(mid) is not None]


def lines(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_whole_old_days_go_in_batches_and_unfinished_messages_stay(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    day0 = await day_of_traffic(journal, 0, 9, unfinished=2)  # 9 > the batch of 4
    day1 = await day_of_traffic(journal, 1, 3)
    day2 = await day_of_traffic(journal, 2, 3)
    clock = Clock(EPOCH + 3 * DAY + 3600)  # day 3: days 1 and 2 are the two kept
    sweeper = retention(journal, clock)
    caplog.set_level(logging.INFO, "mogateway.retention")

    swept = await sweeper.sweep()

    assert swept.deleted == 9
    assert await present(journal, day0) == day0[9:]  # the two unfinished ones
    assert await present(journal, day1 + day2) == day1 + day2
    for mid in day0[:9]:
        assert await journal.timeline(mid) == []
    assert await journal.record_deliveries([(f"{day0[0]}-r1", "delivered", "")]) == [None]
    assert "mogateway_retention_deleted_total 9.0" in generate_latest(sweeper._metrics.registry).decode()
    said = [r.getMessage() for r in caplog.records if r.name == "mogateway.retention"]
    assert len(said) == 1 and "deleted 9 finished messages received before 2023-11-21" in said[0]

    assert (await sweeper.sweep()).deleted == 0  # nothing more: and no line
    assert len([r for r in caplog.records if r.name == "mogateway.retention"]) == 1
    clock.now += DAY
    assert (await sweeper.sweep()).deleted == 3
    assert await present(journal, day1) == []


async def test_each_day_is_exported_whole_before_it_is_deleted(journal: Journal, tmp_path: Path) -> None:
    day0 = await day_of_traffic(journal, 0, 6, unfinished=1)
    day1 = await day_of_traffic(journal, 1, 5)
    await day_of_traffic(journal, 2, 2)
    out = tmp_path / "export"

    swept = await retention(journal, Clock(EPOCH + 4 * DAY), out).sweep()

    assert (swept.deleted, swept.files) == (11, 2)
    assert sorted(p.name for p in out.iterdir()) == ["messages-2023-11-20.jsonl", "messages-2023-11-21.jsonl"]
    first = lines(out / "messages-2023-11-20.jsonl")
    assert [row["id"] for row in first] == day0[:6]  # in order, finished only
    assert [row["id"] for row in lines(out / "messages-2023-11-21.jsonl")] == day1
    row = first[0]
    assert {k: row[k] for k in ("channel", "origin", "shortcode", "msisdn", "state", "outcome")} == {
        "channel": "smpp",
        "origin": "smpp:airtel",
        "shortcode": "56767",
        "msisdn": "919812345678",
        "state": "replied",
        "outcome": "reply",
    }
    assert (row["client_id"], row["reply_text"], row["reply_refs"]) == ("votes", "THANKS", [f"{day0[0]}-r1"])
    assert str(row["received"]).startswith("2023-11-20T") and row["text"] == f"VOTE {day0[0]}"
    assert [e["kind"] for e in row["events"]] == ["received", "outcome", "reply_submitted"]  # type: ignore[index]
    assert await present(journal, day0 + day1) == day0[6:]


async def test_a_sweep_stopped_between_export_and_delete_is_finished_without_duplicates(
    journal: Journal, tmp_path: Path
) -> None:
    day0 = await day_of_traffic(journal, 0, 7)
    out = tmp_path / "export"
    clock = Clock(EPOCH + 3 * DAY)
    path = out / "messages-2023-11-20.jsonl"

    # A crash while the file is written: its temporary file is left, the day's name never appears.
    partial = DayFile(out, EPOCH)
    partial.add([export_line(m) for m in await journal.finished_page(EPOCH, EPOCH + DAY, limit=3)])
    assert not path.exists() and len(list(out.iterdir())) == 1

    # A crash after the file is complete, before the deletes: the journal keeps the whole day.
    class CrashBeforeDelete(Exception):
        pass

    async def crash(ids: Sequence[str]) -> int:
        raise CrashBeforeDelete

    crashing = retention(journal, clock, out)
    crashing.journal = _Patched(journal, delete_finished_ids=crash)
    with pytest.raises(CrashBeforeDelete):
        await crashing.sweep()
    assert [row["id"] for row in lines(path)] == day0
    assert await present(journal, day0) == day0

    # And a crash half way through the deletes.
    assert await journal.delete_finished_ids(day0[:3]) == 3

    swept = await retention(journal, clock, out).sweep()
    assert swept.deleted == 4
    assert [row["id"] for row in lines(path)] == day0  # once each, none lost
    assert sorted(p.name for p in out.iterdir()) == [path.name]  # the leftover temporary file is gone
    assert await present(journal, day0) == []


async def test_a_message_finished_after_its_day_was_exported_joins_the_file(
    journal: Journal, tmp_path: Path
) -> None:
    day0 = await day_of_traffic(journal, 0, 3, unfinished=1)
    out = tmp_path / "export"
    sweeper = retention(journal, Clock(EPOCH + 3 * DAY), out)
    assert (await sweeper.sweep()).deleted == 3
    path = out / "messages-2023-11-20.jsonl"
    assert [row["id"] for row in lines(path)] == day0[:3]

    await finish(journal, day0[3], EPOCH + 3 * DAY)
    assert (await sweeper.sweep()).deleted == 1
    assert [row["id"] for row in lines(path)] == day0  # merged in its place, the others kept


async def test_an_export_directory_that_cannot_be_written_deletes_nothing(
    journal: Journal, tmp_path: Path
) -> None:
    day0 = await day_of_traffic(journal, 0, 2)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the directory should be")
    with pytest.raises(ExportFailed, match="retention_export_dir"):
        await retention(journal, Clock(EPOCH + 3 * DAY), blocked).sweep()
    assert await present(journal, day0) == day0


class _Patched:
    """``journal`` with some of its calls replaced (to stop a sweep where a crash would)."""

    def __init__(self, journal: Journal, **calls: object) -> None:
        self._journal = journal
        self._calls = calls

    def __getattr__(self, name: str) -> object:
        return self._calls.get(name) or getattr(self._journal, name)
