"""The CSV export streams: it reads the journal a page at a time and sends each page before reading the
next, so the rows in memory are one page whatever the period holds (bench/portal_export.py measures
the RSS of a million-row month)."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

from mogateway.api.portal.reports import COLUMNS, csv_rows, period
from mogateway.core.message import Message, Sender
from mogateway.core.ports import MessageRecord
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.client_scope import EXPORT_PAGE, ClientScope
from mogateway.service.registry import Registry


class CountingStore:
    """The journal's portal store, counting the pages an export reads."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.pages: list[int] = []

    async def client_page(self, *args: Any) -> list[MessageRecord]:
        page: list[MessageRecord] = await self._store.client_page(*args)
        self.pages.append(len(page))
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def _fill(journal: SqliteJournal, count: int, now: float) -> None:
    sender = Sender(91, 9812, 345678, "airtel", "DL")
    for first in range(0, count, 1000):
        ids = range(first, min(count, first + 1000))
        texts = ["=HYPERLINK(1)" if n == 7 else f"VOTE, {n}\nline" for n in ids]
        await journal.store(
            [
                Message(f"m{n:06d}", "56767", "919812345678", t, now - count + n, "http", f"s{n}", sender)
                for n, t in zip(ids, texts, strict=True)
            ]
        )
        outcome = Event(EventKind.OUTCOME, now, {"outcome": "blank"})
        await journal.apply([Change(f"m{n:06d}", outcome, client_id="cl_a") for n in ids])


async def test_the_export_reads_and_sends_a_page_at_a_time(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        now = time.time()
        count = EXPORT_PAGE * 3 + 17
        await _fill(journal, count, now)
        store = CountingStore(journal.portal())

        async def check(url: str) -> None:
            return None

        scope = ClientScope(store, Registry(journal), "cl_a", check_url=check)  # type: ignore[arg-type]
        chunks = csv_rows(scope, now - count - 1, now + 1)
        header = await anext(chunks)
        first = await anext(chunks)
        assert store.pages == [EXPORT_PAGE]  # one page read, and already sent
        rest = [chunk async for chunk in chunks]
        assert store.pages == [EXPORT_PAGE, EXPORT_PAGE, EXPORT_PAGE, 17]
        rows = list(csv.reader(io.StringIO(b"".join([header, first, *rest]).decode())))
        assert tuple(rows[0]) == COLUMNS and len(rows) == count + 1
        assert [r[0] for r in rows[1:]] == [f"m{n:06d}" for n in range(count)]  # oldest first, none twice
        assert rows[2][7] == "VOTE, 1\nline"  # commas and line breaks survive quoting
        assert rows[8][7] == "'=HYPERLINK(1)"  # not a formula in a spreadsheet
        other = ClientScope(journal.portal(), Registry(journal), "cl_b", check_url=check)
        assert [c async for c in csv_rows(other, now - count - 1, now + 1)] == [header]
    finally:
        await journal.close()


def test_a_period_is_a_day_or_a_month() -> None:
    since, until, name = period({"month": "2026-02"})
    assert name == "2026-02" and 27 * 86400 < until - since < 30 * 86400
    since, until, name = period({"day": "2026-12-31"})
    assert name == "2026-12-31" and 23 * 3600 <= until - since <= 25 * 3600
    for bad in ({}, {"day": "2026-13-01"}, {"month": "26-01"}, {"day": "yesterday"}):
        try:
            period(bad)
            raise AssertionError(bad)
        except ValueError:
            pass
