"""Both engines answer every read alike: the same writes made to a SQLite and a PostgreSQL journal, then
every listing (find with each filter and page, history, unfinished by owner, age and page, counts,
stats) compared answer by answer. And the state a message is stored in is the one the timeline's table
gives its first event, on both."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mogateway.core.message import Message, Rejection, Sender
from mogateway.core.ports import Journal, MessageFilter, StatsRow
from mogateway.core.timeline import Change, Event, EventKind, State, fold
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import truncate_all

T = 1_700_000_000.0


def _mo(n: int) -> Message:
    rejected = n % 7 == 6
    return Message(
        id=f"m{n:03d}",
        shortcode="56767" if n % 3 else "56161",
        msisdn=f"9198123456{n % 4:02d}",
        text=f"VOTE {n}",
        received_at=T + n // 2,  # pairs share a time: paging must order them by id
        origin="http",
        source_id=f"s{n}",
        sender=None if rejected else Sender(91, 9812, 345600 + n % 4, "airtel", "DL"),
        rejection=Rejection("msisdn", "not a mobile number") if rejected else None,
        notes=("n",) if n % 5 == 0 else (),
    )


async def _fill(journal: Journal) -> None:
    messages = [_mo(n) for n in range(60)]
    await journal.store(messages, owners=[n % 2 for n in range(60)])
    reply = Event(EventKind.OUTCOME, T + 100, {"outcome": "reply", "reply": "thanks"})
    blank = Event(EventKind.OUTCOME, T + 100, {"outcome": "blank"})
    accepted = [m.id for m in messages if m.accepted]
    await journal.apply(
        [Change(mid, reply, client_id="cl_a", reply_text="thanks") for mid in accepted[::3]]
        + [Change(mid, blank, client_id="cl_b") for mid in accepted[1::3]]
    )
    sent = Event(EventKind.REPLY_SUBMITTED, T + 101, {"channel": "smpp:a", "refs": []})
    await journal.apply([Change(mid, sent, reply_refs=(f"r-{mid}",)) for mid in accepted[::6]])
    await journal.record_deliveries([(f"r-{mid}", "delivered", "") for mid in accepted[::12]])
    await journal.write_stats(
        [StatsRow(60, int(T) + 60 * k, f"n{k % 2}", "", "received", k) for k in range(5)]
    )


@pytest.fixture
async def both(tmp_path: Path, pg_url: str) -> AsyncIterator[tuple[Journal, Journal]]:
    await truncate_all(pg_url)
    sqlite, postgres = SqliteJournal(tmp_path / "j.db"), PostgresJournal(pg_url)
    await sqlite.open()
    await postgres.open()
    try:
        yield sqlite, postgres
    finally:
        await sqlite.close()
        await postgres.close()


def _comparable(value: Any) -> Any:
    """Records without the times the journals took from their own clock."""
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_comparable(v) for v in value)
    if hasattr(value, "message") and hasattr(value, "stored_at"):
        return (value.message, value.state, value.client_id, value.reply_text, value.owner)
    if isinstance(value, Event):
        return (value.kind, {k: v for k, v in value.data.items() if k != "stored_at"})
    return value


async def test_every_read_answers_alike_on_both_engines(both: tuple[Journal, Journal]) -> None:
    sqlite, postgres = both
    for journal in both:
        await _fill(journal)

    async def same(read: Any) -> Any:
        a, b = await read(sqlite), await read(postgres)
        assert _comparable(a) == _comparable(b)
        return a

    filters = [
        MessageFilter(limit=100),
        MessageFilter(shortcode="56161"),
        MessageFilter(msisdn="919812345601", limit=5),
        MessageFilter(state=State.NO_REPLY),
        MessageFilter(state=State.DELIVERED),
        MessageFilter(client_id="cl_a", since=T + 5, until=T + 20),
        MessageFilter(before=(T + 10, "m021"), limit=7),  # m020 and m021 share T + 10
    ]
    for where in filters:
        assert await same(lambda j, w=where: j.find(w)), where
    # Paging through everything ten at a time gives every message once, newest first, on both.
    pages: list[str] = []
    where = MessageFilter(limit=10)
    while page := await same(lambda j, w=where: j.find(w)):
        pages += [r.id for r in page]
        where = MessageFilter(limit=10, before=(page[-1].message.received_at, page[-1].id))
    assert pages == sorted(pages, key=lambda mid: (int(mid[1:]) // 2, mid), reverse=True)
    assert len(pages) == 60
    for mid in ("m000", "m006", "m012", "unknown"):
        await same(lambda j, m=mid: j.history(m))
    unfinished = await same(lambda j: j.unfinished(100))
    assert unfinished and all(r.state in (State.QUEUED, State.ANSWERED) for r in unfinished)
    await same(lambda j: j.unfinished(100, owner=1))
    await same(lambda j: j.unfinished(5, after="m010", owner=0))
    assert await same(lambda j: j.unfinished(100, older_than=0.0)) == []
    counts = await same(lambda j: j.counts_by_state())
    assert sum(counts.values()) == 60
    await same(lambda j: j.read_stats(60, int(T), int(T) + 300))
    await same(lambda j: j.read_stats(60, int(T), int(T) + 300, by_time=True, exclude_node="n0"))


async def test_the_stored_state_is_where_the_tables_first_event_leads(journal: Journal) -> None:
    accepted, rejected = _mo(1), _mo(6)
    stored = await journal.store([accepted, rejected])
    for result in stored:
        timeline = await journal.timeline(result.id)
        record = await journal.get(result.id)
        assert record is not None
        assert [e.kind for e in timeline] == [
            EventKind.RECEIVED if result.id == accepted.id else EventKind.REJECTED
        ]
        assert result.state == record.state == fold(timeline)
    assert [r.state for r in stored] == [State.QUEUED, State.REJECTED]
    # A duplicate reports the state its first copy has now.
    await journal.apply([Change(accepted.id, Event(EventKind.OUTCOME, time.time(), {"outcome": "blank"}))])
    (again,) = await journal.store([accepted])
    assert (again.duplicate, again.state) == (True, State.NO_REPLY)
