"""What every Journal must do, run against SQLite and PostgreSQL alike so the two cannot drift."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message, Rejection, Sender
from mogateway.core.ports import Journal, MessageFilter
from mogateway.core.repeats import content_source_id
from mogateway.core.timeline import (
    TABLE,
    Change,
    Event,
    EventKind,
    IllegalTransition,
    State,
    fold,
    transition,
)


def mo(
    message_id: str,
    *,
    rejected: Rejection | None = None,
    shortcode: str = "56767",
    msisdn: str = "919812345678",
    received_at: float | None = None,
) -> Message:
    return Message(
        id=message_id,
        shortcode=shortcode,
        msisdn=msisdn,
        text="VOTE 7",
        received_at=received_at if received_at is not None else time.time(),
        origin="http",
        source_id="src-" + message_id,
        sender=None if rejected else Sender(91, 9812, 345678, "airtel", "DL"),
        rejection=rejected,
        notes=("first",),
    )


def ev(kind: EventKind, **data: Any) -> Event:
    return Event(kind, time.time(), dict(data))


def outcome(kind: str, **data: Any) -> Event:
    return ev(EventKind.OUTCOME, outcome=kind, **data)


# ------------------------------------------------------------------------------------------ store


async def test_store_then_get_returns_every_field(journal: Journal) -> None:
    m = mo("m1", received_at=1_700_000_000.25)
    (res,) = await journal.store([m])
    assert (res.id, res.state, res.duplicate) == ("m1", State.QUEUED, False)
    rec = await journal.get("m1")
    assert rec is not None
    assert rec.message == m  # every field of the one message type comes back as it went in
    assert rec.state is State.QUEUED and rec.client_id is None and rec.reply_text is None
    assert rec.stored_at >= m.received_at and rec.updated_at == rec.stored_at
    (first,) = await journal.timeline("m1")
    assert first.kind is EventKind.RECEIVED and first.at == m.received_at
    assert first.data == {
        "origin": "http",
        "source_id": "src-m1",
        "notes": ["first"],
        "stored_at": rec.stored_at,
    }
    assert await journal.get("unknown") is None
    assert await journal.timeline("unknown") == []


async def test_storing_an_id_again_returns_the_stored_state_and_adds_nothing(journal: Journal) -> None:
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", outcome("blank"))])
    (again,) = await journal.store([mo("m1", shortcode="99999")])
    assert (again.state, again.duplicate) == (State.NO_REPLY, True)
    rec = await journal.get("m1")
    assert rec is not None and rec.message.shortcode == "56767"
    assert [e.kind for e in await journal.timeline("m1")] == [EventKind.RECEIVED, EventKind.OUTCOME]


async def test_a_rejected_duplicate_carries_its_first_reason(journal: Journal) -> None:
    why = Rejection("msisdn", "not an Indian mobile number")
    (first,) = await journal.store([mo("r1", rejected=why)])
    assert (first.state, first.duplicate, first.rejection) == (State.REJECTED, False, why)
    (again,) = await journal.store([mo("r1", rejected=Rejection("x", "other"))])
    assert (again.duplicate, again.rejection) == (True, why)
    (event,) = await journal.timeline("r1")
    assert event.kind is EventKind.REJECTED and event.data["reason"] == why.reason
    rec = await journal.get("r1")
    assert rec is not None and rec.message.rejection == why and rec.message.sender is None


async def test_the_same_id_twice_in_one_batch_is_stored_once(journal: Journal) -> None:
    results = await journal.store([mo("d1"), mo("d2"), mo("d1")])
    assert [(r.id, r.duplicate) for r in results] == [("d1", False), ("d2", False), ("d1", True)]
    assert len(await journal.timeline("d1")) == 1


async def test_concurrent_stores_of_many_batches_all_land(journal: Journal) -> None:
    batches = [[mo(f"b{n}-{k}") for k in range(20)] for n in range(25)]
    results = await asyncio.gather(*(journal.store(b) for b in batches))
    assert all(not r.duplicate for batch in results for r in batch)
    assert (await journal.counts_by_state()) == {"queued": 500}
    again = await asyncio.gather(*(journal.store(b[:2]) for b in batches))
    assert all(r.duplicate and r.state is State.QUEUED for batch in again for r in batch)


# ------------------------------------------------------------------------------------------ apply


async def test_a_change_applies_only_where_the_table_allows_it(journal: Journal) -> None:
    await journal.store([mo("m1")])
    answer = Change("m1", outcome("reply", reply="thanks"), client_id="cl_1", reply_text="thanks")
    assert await journal.apply([answer]) == [True]
    assert await journal.apply([answer]) == [False]  # answered: an outcome may only follow queued
    rec = await journal.get("m1")
    assert rec is not None
    assert (rec.state, rec.client_id, rec.reply_text) == (State.ANSWERED, "cl_1", "thanks")
    assert rec.updated_at >= rec.stored_at
    # The refused change left no event behind.
    assert [e.kind for e in await journal.timeline("m1")] == [EventKind.RECEIVED, EventKind.OUTCOME]


async def test_a_change_for_an_unknown_message_is_refused(journal: Journal) -> None:
    assert await journal.apply([Change("ghost", ev(EventKind.NOTE))]) == [False]
    assert await journal.timeline("ghost") == []


async def test_events_that_keep_the_state_are_appended_only_where_allowed(journal: Journal) -> None:
    await journal.store([mo("m1"), mo("m2")])
    await journal.apply([Change("m2", outcome("blank"))])
    results = await journal.apply(
        [Change("m1", ev(EventKind.RECOVERED, resume="dispatch")), Change("m2", ev(EventKind.RECOVERED))]
    )
    assert results == [True, False]  # recovered: only while unfinished (the sweeper's compare-and-set)
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.QUEUED


async def test_several_changes_to_one_message_apply_in_order(journal: Journal) -> None:
    await journal.store([mo("m1"), mo("m2")])
    results = await journal.apply(
        [
            Change("m2", outcome("blank")),
            Change("m1", outcome("reply"), reply_text="hi"),
            Change("m1", ev(EventKind.REPLY_SENDING)),
            Change("m1", ev(EventKind.REPLY_SUBMITTED, n=1), reply_refs=("ref-1",)),
            Change("m2", ev(EventKind.REPLY_SUBMITTED, n=2)),
        ]
    )
    assert results == [True, True, True, True, False]
    rec1, rec2 = await journal.get("m1"), await journal.get("m2")
    assert rec1 is not None and rec1.state is State.REPLIED and rec1.reply_text == "hi"
    assert rec2 is not None and rec2.state is State.NO_REPLY
    assert [e.kind for e in await journal.timeline("m1")] == [
        EventKind.RECEIVED,
        EventKind.OUTCOME,
        EventKind.REPLY_SENDING,
        EventKind.REPLY_SUBMITTED,
    ]
    assert await journal.record_deliveries([("ref-1", "delivered", "")]) == ["m1"]


async def test_of_many_concurrent_outcomes_exactly_one_wins(journal: Journal) -> None:
    await journal.store([mo("m1")])

    def attempt(n: int) -> Change:
        return Change("m1", outcome("reply", n=n), reply_text=f"r{n}")

    results = await asyncio.gather(*(journal.apply([attempt(n)]) for n in range(30)))
    assert sum(r[0] for r in results) == 1
    winner = next(n for n, r in enumerate(results) if r[0])
    rec = await journal.get("m1")
    assert rec is not None and rec.reply_text == f"r{winner}"
    outcomes = [e for e in await journal.timeline("m1") if e.kind is EventKind.OUTCOME]
    assert [e.data["n"] for e in outcomes] == [winner]


async def test_an_answer_and_its_intent_are_one_change_and_one_compare_and_set(journal: Journal) -> None:
    """The dispatcher records a reply's answer and its handover intent in one write: both events or
    neither, from queued only; of concurrent ones exactly one wins."""
    await journal.store([mo("m1"), mo("m2")])

    def answer_and_intent(n: int) -> Change:
        return Change(
            "m1", outcome("reply", n=n), reply_text=f"r{n}", then=(ev(EventKind.REPLY_SENDING, n=n),)
        )

    results = await asyncio.gather(*(journal.apply([answer_and_intent(n)]) for n in range(20)))
    assert sum(r[0] for r in results) == 1
    winner = next(n for n, r in enumerate(results) if r[0])
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.REPLYING and rec.reply_text == f"r{winner}"
    timeline = await journal.timeline("m1")
    assert [(e.kind, e.data.get("n")) for e in timeline] == [
        (EventKind.RECEIVED, None),
        (EventKind.OUTCOME, winner),
        (EventKind.REPLY_SENDING, winner),
    ]
    # Where the sequence is not allowed (the answer was recorded already), nothing is appended.
    await journal.apply([Change("m2", outcome("reply"), reply_text="hi")])
    assert await journal.apply([dataclasses.replace(answer_and_intent(99), message_id="m2")]) == [False]
    assert [e.kind for e in await journal.timeline("m2")] == [EventKind.RECEIVED, EventKind.OUTCOME]


async def test_of_two_concurrent_intents_exactly_one_wins(journal: Journal) -> None:
    """Two workers about to hand one reply over: only one may record the intent (and so send)."""
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", outcome("reply"), reply_text="hi")])
    results = await asyncio.gather(
        *(journal.apply([Change("m1", ev(EventKind.REPLY_SENDING, n=n))]) for n in range(10))
    )
    assert sum(r[0] for r in results) == 1
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.REPLYING


async def test_events_keep_the_order_they_were_applied(journal: Journal) -> None:
    await journal.store([mo("m1")])
    for n in range(12):
        await journal.apply(
            [Change("m1", ev(EventKind.NOTE, n=n)), Change("m1", ev(EventKind.NOTE, n=n + 100))]
        )
    notes = [e.data["n"] for e in await journal.timeline("m1") if e.kind is EventKind.NOTE]
    assert notes == [x for n in range(12) for x in (n, n + 100)]


async def test_touch_moves_only_unfinished_messages_and_adds_no_event(journal: Journal) -> None:
    await journal.store([mo("u"), mo("f")])
    await journal.apply([Change("f", outcome("blank"))])
    before = {m: await journal.get(m) for m in ("u", "f")}
    await asyncio.sleep(0.02)
    await journal.touch(["u", "f", "ghost"])
    after = {m: await journal.get(m) for m in ("u", "f")}
    assert after["u"].updated_at > before["u"].updated_at  # type: ignore[union-attr]
    assert after["f"].updated_at == before["f"].updated_at  # type: ignore[union-attr]
    assert len(await journal.timeline("u")) == 1


# ------------------------------------------------------------------------------ the table, randomly

_EVENTS = sorted(TABLE, key=lambda k: (k[0].value, k[1] or ""))


def _event_for(key: tuple[EventKind, str | None]) -> Event:
    kind, qualifier = key
    if kind is EventKind.OUTCOME:
        return outcome(str(qualifier))
    if kind is EventKind.DELIVERY:
        return ev(kind, status=qualifier, ref="r")
    return ev(kind)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.sampled_from([k for k in _EVENTS if k[0] not in (EventKind.RECEIVED, EventKind.REJECTED)]),
        min_size=1,
        max_size=12,
    )
)
async def test_no_journal_writes_a_state_the_table_did_not_produce(
    journal: Journal, steps: list[tuple[EventKind, str | None]]
) -> None:
    """Random event sequences, legal and illegal, through the journal and through core.timeline: each
    change is applied exactly when the table allows it, and the stored state is always the table's."""
    message_id = f"p{time.monotonic_ns()}"
    await journal.store([mo(message_id)])
    expected: State = State.QUEUED
    for key in steps:
        event = _event_for(key)
        try:
            allowed_after: State | None = transition(expected, event)
        except IllegalTransition:
            allowed_after = None
        reply = "r" if key == (EventKind.OUTCOME, "reply") else None
        (applied,) = await journal.apply([Change(message_id, event, reply_text=reply)])
        assert applied is (allowed_after is not None), (expected, key)
        if allowed_after is not None:
            expected = allowed_after
        rec = await journal.get(message_id)
        assert rec is not None and rec.state is expected, (key, rec.state if rec else None)
    timeline = await journal.timeline(message_id)
    state: State | None = None
    for event in timeline:
        state = transition(state, event)
    assert state is expected  # the stored timeline explains the stored state


# ------------------------------------------------------------------------------------------ receipts


async def test_delivery_receipts_follow_the_reply_refs(journal: Journal) -> None:
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", outcome("reply"), reply_text="hi")])
    await journal.apply([Change("m1", ev(EventKind.REPLY_SUBMITTED), reply_refs=("a", "b"))])
    assert await journal.record_deliveries([("nobody", "delivered", "")]) == [None]
    assert await journal.record_deliveries([("a", "delivered", "DELIVRD")]) == ["m1"]
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.DELIVERED
    assert await journal.record_deliveries([("b", "undelivered", "EXPIRED")]) == ["m1"]
    assert await journal.record_deliveries([("a", "delivered", "DELIVRD")]) == ["m1"]
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.UNDELIVERED  # a later "delivered" does not hide it
    deliveries = [e.data for e in await journal.timeline("m1") if e.kind is EventKind.DELIVERY]
    assert [(d["ref"], d["status"]) for d in deliveries] == [
        ("a", "delivered"),
        ("b", "undelivered"),
        ("a", "delivered"),
    ]


# ------------------------------------------------------------------------------------------ queries


async def test_unfinished_lists_what_is_left_in_id_order(journal: Journal) -> None:
    await journal.store([mo("q"), mo("r"), mo("a"), mo("f")])
    await journal.apply([Change("f", outcome("blank"))])
    await asyncio.sleep(0.01)
    await journal.apply([Change("r", outcome("reply"), reply_text="x")])
    await asyncio.sleep(0.01)
    await journal.apply([Change("a", outcome("reply"), reply_text="x")])
    await journal.apply([Change("a", ev(EventKind.REPLY_SENDING))])
    assert [r.id for r in await journal.unfinished(10)] == ["a", "q", "r"]
    assert [r.id for r in await journal.unfinished(2)] == ["a", "q"]
    assert [r.id for r in await journal.unfinished(2, after="a")] == ["q", "r"]
    rec_r = await journal.get("r")
    assert rec_r is not None
    assert [r.id for r in await journal.unfinished(10, older_than=rec_r.updated_at)] == ["q"]


async def test_unfinished_of_one_owner_lists_only_the_mos_stored_for_it(journal: Journal) -> None:
    await journal.store([mo("a"), mo("b"), mo("c")], owners=[1, 0, 1])
    await journal.store([mo("d")])  # no owners: worker 0
    assert [r.id for r in await journal.unfinished(10)] == ["a", "b", "c", "d"]
    assert [r.id for r in await journal.unfinished(10, owner=0)] == ["b", "d"]
    assert [r.id for r in await journal.unfinished(10, owner=1)] == ["a", "c"]
    assert [r.id for r in await journal.unfinished(1, after="a", owner=1)] == ["c"]
    await journal.apply([Change("c", outcome("blank"))])
    assert [r.id for r in await journal.unfinished(10, owner=1)] == ["a"]
    assert await journal.unfinished(10, owner=2) == []


async def test_reassign_moves_only_unfinished_mos_to_another_owner(journal: Journal) -> None:
    await journal.store([mo("a"), mo("b"), mo("c")], owners=[0, 0, 3])
    await journal.apply([Change("b", outcome("blank"))])
    await journal.reassign({"a": 1, "b": 1, "c": 1})
    assert [r.id for r in await journal.unfinished(10, owner=1)] == ["a", "c"]
    finished = await journal.get("b")
    assert finished is not None and finished.owner == 0  # its history stays as it was


async def test_paging_unfinished_by_id_reads_each_once_while_states_change(journal: Journal) -> None:
    """A backlog several pages long, read page by page while some of it finishes and some of it moves
    on (new updated_at): every message still unfinished is read exactly once — the fault of paging by
    last change, which read the same page again and stopped."""
    ids = [f"m{i:05d}" for i in range(2_500)]
    for start in range(0, len(ids), 500):
        await journal.store([mo(i) for i in ids[start : start + 500]])
    seen: list[str] = []
    after = ""
    finished: set[str] = set()
    while True:
        page = await journal.unfinished(300, after=after)
        if not page:
            break
        seen.extend(r.id for r in page)
        after = page[-1].id
        # Meanwhile the dispatcher finishes a few messages ahead and touches others (moving updated_at).
        ahead = [i for i in ids if i > after][:50]
        finish, touch = ahead[:20], ahead[20:]
        finished.update(finish)
        await journal.apply(
            [Change(i, outcome("blank")) for i in finish]
            + [Change(i, ev(EventKind.RECOVERED)) for i in touch]
        )
    assert len(seen) == len(set(seen))  # nothing read twice
    assert set(seen) == set(ids) - finished  # nothing skipped


async def test_counts_by_state(journal: Journal) -> None:
    await journal.store([mo("a"), mo("b"), mo("c", rejected=Rejection("f", "r"))])
    await journal.apply([Change("a", outcome("blank"))])
    assert await journal.counts_by_state() == {"queued": 1, "no_reply": 1, "rejected": 1}


async def test_find_filters_orders_newest_first_and_pages_by_key(journal: Journal) -> None:
    await journal.store(
        [
            mo("old", received_at=1000.0),
            mo("mid", received_at=2000.0, shortcode="12345"),
            mo("new", received_at=3000.0, msisdn="919999999999"),
            mo("new2", received_at=3000.0),
        ]
    )
    await journal.apply([Change("new", outcome("blank"), client_id="cl_x")])

    async def ids(**kw: object) -> list[str]:
        return [r.id for r in await journal.find(MessageFilter(**kw))]  # type: ignore[arg-type]

    assert await ids() == ["new2", "new", "mid", "old"]
    assert await ids(limit=2) == ["new2", "new"]
    assert await ids(limit=2, before=(3000.0, "new")) == ["mid", "old"]  # the next page
    assert await ids(before=(3000.0, "new2")) == ["new", "mid", "old"]  # same time, smaller id
    assert await ids(shortcode="12345") == ["mid"]
    assert await ids(msisdn="919999999999") == ["new"]
    assert await ids(state=State.QUEUED) == ["new2", "mid", "old"]
    assert await ids(client_id="cl_x") == ["new"]
    assert await ids(since=2000.0) == ["new2", "new", "mid"]
    assert await ids(until=2000.0) == ["old"]
    assert await ids(since=1500.0, until=2500.0, shortcode="56767") == []


def content_mo(
    message_id: str, digest: str, *, msisdn: str = "919812345678", at: float | None = None
) -> Message:
    """An MO named by its content (an SMPP MO without an SMSC message id), seen at ``at``."""
    at = time.time() if at is None else at
    return dataclasses.replace(
        mo(message_id, msisdn=msisdn, received_at=at),
        origin="smpp:b1",
        source_id=content_source_id(digest, int(at * 1000)),
    )


async def test_an_mo_repeating_a_stored_ones_content_within_its_window_is_that_mo(journal: Journal) -> None:
    now = time.time()
    (first,) = await journal.store([content_mo("first", "d1", at=now - 100)], None, [now - 600])
    assert (first.id, first.duplicate) == ("first", False)
    await journal.apply([Change("first", outcome("blank"))])
    results = await journal.store(
        [
            content_mo("again", "d1", at=now),  # a redelivery (over any bind): the first MO
            content_mo("late", "d1", at=now),  # ... but not for a window that starts after the first
            content_mo("other-number", "d1", msisdn="919812345679", at=now),
            content_mo("other-text", "d2", at=now),
            content_mo("no-window", "d1", at=now),
        ],
        None,
        [now - 600, now - 50, now - 600, now - 600, None],
    )
    assert [(r.id, r.duplicate, r.state) for r in results] == [
        ("first", True, State.NO_REPLY),
        ("late", False, State.QUEUED),
        ("other-number", False, State.QUEUED),
        ("other-text", False, State.QUEUED),
        ("no-window", False, State.QUEUED),
    ]
    assert await journal.get("again") is None


async def test_a_number_sending_many_texts_has_each_one_repeated_by_its_own_redelivery(
    journal: Journal,
) -> None:
    # More contents than a statement's chunk (256), all from one number: each redelivery finds its own.
    now = time.time()
    firsts = await journal.store(
        [content_mo(f"a{n}", f"d{n}", at=now) for n in range(600)], None, [now - 600] * 600
    )
    again = await journal.store(
        [content_mo(f"b{n}", f"d{n}", at=now + 1) for n in reversed(range(601))], None, [now - 599] * 601
    )
    assert [r.duplicate for r in firsts] == [False] * 600
    assert [(r.id, r.duplicate) for r in again] == [("b600", False)] + [
        (f"a{n}", True) for n in reversed(range(600))
    ]


async def test_concurrent_stores_of_one_content_keep_exactly_one(journal: Journal) -> None:
    # 12 numbers x 5 texts, each delivered 6 times in separate concurrent calls (PostgreSQL runs them
    # in concurrent transactions): one MO per number and text, every repeat answered with its id.
    now = time.time()
    calls = [
        [content_mo(f"k{k}-d{d}-{copy}", f"d{d}", msisdn=f"9198123456{k:02d}", at=now)]
        for copy in range(6)
        for k in range(12)
        for d in range(5)
    ]
    results = await asyncio.gather(*(journal.store(c, None, [now - 600]) for c in calls))
    firsts = {r.id for (r,) in results if not r.duplicate}
    assert len(firsts) == 60
    by_content: dict[str, set[str]] = {}
    for call, (r,) in zip(calls, results, strict=True):
        by_content.setdefault(call[0].msisdn + call[0].source_id.split(":")[1], set()).add(r.id)
    assert all(len(ids) == 1 for ids in by_content.values())
    assert sorted(r.message.id for r in await journal.unfinished(1000)) == sorted(firsts)


async def test_two_journals_storing_one_content_at_once_keep_exactly_one(
    journal: Journal, journal_factory: Callable[[], Journal]
) -> None:
    # Two writers (two worker processes, or two nodes on PostgreSQL), each storing every MO in its own
    # transaction, the SMSC redelivering the same 300 MOs to both: each is stored once.
    other = journal_factory()
    await other.open()
    now = time.time()

    async def deliver(j: Journal, name: str) -> list[str]:
        ids = []
        for n in range(300):
            m = content_mo(f"{name}-{n}", f"d{n % 30}", msisdn=f"9198123456{n // 30:02d}", at=now)
            (stored,) = await j.store([m], None, [now - 600])
            ids.append(stored.id)
        return ids

    try:
        mine, theirs = await asyncio.gather(deliver(journal, "a"), deliver(other, "b"))
    finally:
        await other.close()
    assert mine == theirs  # every MO answered with one id on both
    assert len(set(mine)) == 300
    assert sorted(r.message.id for r in await journal.unfinished(1000)) == sorted(mine)


# ------------------------------------------------------------------------- clients and settings


def client(client_id: str, updated_at: float) -> ClientRecord:
    return ClientRecord(
        id=client_id,
        name=f"app {client_id}",
        shortcodes=["56767"],
        keywords=["VOTE"],
        callback_url="https://app.example/mo",
        token="t" * 43,
        timeout_s=12.5,
        max_concurrency=8,
        tsunix_unit="s",
        unescape_newlines=False,
        created_at=updated_at,
        updated_at=updated_at,
        extra={"team": "tv"},
    )


async def test_clients_round_trip_and_version_moves(journal: Journal) -> None:
    assert await journal.list_clients() == []
    assert await journal.clients_version() == 0.0
    await journal.put_client(client("cl_b", 100.0))
    await journal.put_client(client("cl_a", 200.0))
    assert await journal.get_client("cl_b") == client("cl_b", 100.0)
    assert [c.id for c in await journal.list_clients()] == ["cl_a", "cl_b"]
    assert await journal.clients_version() == 200.0
    await journal.put_client(client("cl_b", 300.0))
    assert await journal.clients_version() == 300.0
    assert await journal.delete_client("cl_b") is True
    assert await journal.delete_client("cl_b") is False
    assert await journal.get_client("cl_b") is None
    assert await journal.clients_version() > 300.0  # a deletion moves the version too


async def test_settings_keep_the_first_value(journal: Journal) -> None:
    assert await journal.get_setting("admin_token") is None
    assert await journal.set_setting_if_absent("admin_token", "first") == "first"
    assert await journal.set_setting_if_absent("admin_token", "second") == "first"
    assert await journal.get_setting("admin_token") == "first"


async def test_everything_survives_reopening(
    journal: Journal, journal_factory: Callable[[], Journal]
) -> None:
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", outcome("reply"), reply_text="x")])
    await journal.set_setting_if_absent("k", "v")
    await journal.close()
    again = journal_factory()
    await again.open()
    try:
        rec = await again.get("m1")
        assert rec is not None and rec.state is State.ANSWERED and rec.reply_text == "x"
        assert len(await again.timeline("m1")) == 2
        assert await again.get_setting("k") == "v"
    finally:
        await again.close()
    await journal.open()  # the fixture closes it again


async def test_history_is_one_instant_its_state_always_agrees_with_its_events(journal: Journal) -> None:
    """Read while every message walks queued -> answered -> replying -> replied: the state of each read is
    the state its events lead to (two separate reads could show a state with events it has not got)."""
    ids = [f"h{n:03d}" for n in range(200)]
    await journal.store([mo(mid) for mid in ids])
    steps = [
        outcome("reply", reply="hi"),
        ev(EventKind.REPLY_SENDING, channel="smpp"),
        ev(EventKind.REPLY_SUBMITTED, channel="smpp"),
    ]

    async def walk() -> None:
        for step in steps:
            for start in range(0, len(ids), 20):
                await journal.apply([Change(mid, step) for mid in ids[start : start + 20]])

    async def read() -> int:
        reads = 0
        while not walking.done():
            for mid in ids[::7]:
                found = await journal.history(mid)
                assert found is not None
                record, events = found
                assert fold(events) is record.state, (record.state, [e.kind for e in events])
                reads += 1
        return reads

    walking = asyncio.ensure_future(walk())
    try:
        reads = await read()
    finally:
        await walking  # also when a read failed: the journal must not close under the writer
    assert reads > 0
    final = await journal.history(ids[-1])
    assert final is not None and final[0].state is State.REPLIED and len(final[1]) == 4
    assert await journal.history("ghost") is None
