"""The stats table and keyset paging, against SQLite and PostgreSQL alike."""

from __future__ import annotations

from test_journal_behaviour import mo, outcome

from mogateway.core.ports import Journal, MessageFilter, StatsRow
from mogateway.core.timeline import Change


def row(at: int, node: str, client: str, kind: str, count: int, span: int = 60) -> StatsRow:
    return StatsRow(span, at, node, client, kind, count)


async def test_rows_are_replaced_not_added_and_summed_over_nodes(journal: Journal) -> None:
    await journal.write_stats([row(600, "a", "c1", "reply", 5), row(600, "b", "c1", "reply", 7)])
    await journal.write_stats([row(600, "a", "c1", "reply", 9), row(660, "a", "", "accepted", 3)])
    got = await journal.read_stats(60, 600, 720)
    assert sorted((r.client, r.kind, r.count, r.at) for r in got) == [
        ("", "accepted", 3, 600),
        ("c1", "reply", 16, 600),
    ]
    by_time = await journal.read_stats(60, 600, 720, by_time=True)
    assert sorted((r.at, r.kind, r.count) for r in by_time) == [(600, "reply", 16), (660, "accepted", 3)]


async def test_reads_one_node_or_all_but_one_and_respect_the_span_and_range(journal: Journal) -> None:
    await journal.write_stats(
        [
            row(600, "a", "", "accepted", 1),
            row(600, "b", "", "accepted", 2),
            row(1200, "a", "", "accepted", 4),
            row(601, "a", "", "mo_in", 8, span=1),
        ]
    )
    assert [r.count for r in await journal.read_stats(60, 0, 10_000, node="a")] == [5]
    assert [r.count for r in await journal.read_stats(60, 0, 10_000, exclude_node="a")] == [2]
    assert [r.count for r in await journal.read_stats(60, 600, 1200)] == [3]
    assert [r.count for r in await journal.read_stats(1, 0, 10_000)] == [8]
    assert await journal.read_stats(60, 5000, 6000) == []


async def test_old_rows_are_forgotten_per_span(journal: Journal) -> None:
    await journal.write_stats(
        [row(60, "a", "", "k", 1), row(120, "a", "", "k", 1), row(5, "a", "", "k", 1, span=1)]
    )
    await journal.write_stats([], forget_before={60: 120, 1: 6})
    assert [r.at for r in await journal.read_stats(60, 0, 1000, by_time=True)] == [120]
    assert await journal.read_stats(1, 0, 1000) == []


async def test_keyset_paging_and_client_filter(journal: Journal) -> None:
    stored = [mo(f"k{n}", received_at=1000.0 + (n // 2)) for n in range(7)]  # pairs share a received_at
    await journal.store(stored)
    await journal.apply([Change(stored[0].id, outcome("blank"), client_id="c-9")])
    seen: list[str] = []
    before = None
    while True:
        page = await journal.find(MessageFilter(limit=3, before=before))
        seen.extend(m.id for m in page)
        if len(page) < 3:
            break
        before = (page[-1].message.received_at, page[-1].id)
    expected = sorted(stored, key=lambda m: (m.received_at, m.id), reverse=True)
    assert seen == [m.id for m in expected]
    only = await journal.find(MessageFilter(client_id="c-9"))
    assert [m.id for m in only] == [stored[0].id]
