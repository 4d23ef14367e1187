"""What every Journal must do, run against SQLite and PostgreSQL alike so the two cannot drift."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mogateway.core.timeline import EventKind, State
from mogateway.storage.journal import (
    Change,
    ClientRecord,
    Event,
    Journal,
    MessageFilter,
    NewMessage,
    new_message_id,
)

PENDING = frozenset({State.QUEUED, State.DISPATCHING})
ANSWERED = frozenset({State.ANSWERED})


def mo(
    message_id: str | None = None,
    *,
    state: State = State.QUEUED,
    shortcode: str = "56767",
    msisdn: str = "919812345678",
    received_at: float | None = None,
    reason: str = "",
    field: str = "",
) -> NewMessage:
    return NewMessage(
        id=message_id or new_message_id(),
        origin="http",
        source_id="src-" + (message_id or "x"),
        shortcode=shortcode,
        msisdn=msisdn,
        message="VOTE 7",
        received_at=received_at if received_at is not None else time.time(),
        state=state,
        cc=91 if state is State.QUEUED else None,
        ndc=98123 if state is State.QUEUED else None,
        sn=45678 if state is State.QUEUED else None,
        operator="airtel" if state is State.QUEUED else "",
        circle="DL" if state is State.QUEUED else "",
        reason=reason,
        reason_field=field,
        notes=("first",),
    )


def ev(kind: EventKind, **data: object) -> Event:
    return Event(kind, time.time(), dict(data))


# ------------------------------------------------------------------------------------------ store


async def test_store_then_get_returns_every_field(journal: Journal) -> None:
    m = mo("m1", received_at=1_700_000_000.25)
    (res,) = await journal.store([m])
    assert (res.id, res.state, res.duplicate) == ("m1", State.QUEUED, False)
    rec = await journal.get("m1")
    assert rec is not None
    assert (rec.origin, rec.source_id, rec.shortcode, rec.msisdn, rec.message) == (
        "http",
        "src-m1",
        "56767",
        "919812345678",
        "VOTE 7",
    )
    assert (rec.cc, rec.ndc, rec.sn, rec.operator, rec.circle) == (91, 98123, 45678, "airtel", "DL")
    assert rec.received_at == 1_700_000_000.25
    assert rec.state is State.QUEUED and rec.client_id is None and rec.reply_text is None
    assert rec.stored_at >= rec.received_at and rec.updated_at == rec.stored_at
    (first,) = await journal.timeline("m1")
    assert first.kind is EventKind.RECEIVED
    assert first.data["origin"] == "http" and first.data["source_id"] == "src-m1"
    assert first.data["notes"] == ["first"]
    assert await journal.get("unknown") is None
    assert await journal.timeline("unknown") == []


async def test_storing_an_id_again_returns_the_stored_state_and_adds_nothing(journal: Journal) -> None:
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", [ev(EventKind.OUTCOME, outcome="blank")], State.NO_REPLY, PENDING)])
    (again,) = await journal.store([mo("m1", shortcode="99999")])
    assert (again.state, again.duplicate) == (State.NO_REPLY, True)
    rec = await journal.get("m1")
    assert rec is not None and rec.shortcode == "56767"
    assert [e.kind for e in await journal.timeline("m1")] == [EventKind.RECEIVED, EventKind.OUTCOME]


async def test_a_rejected_duplicate_carries_its_first_reason(journal: Journal) -> None:
    bad = mo("r1", state=State.REJECTED, reason="not an Indian mobile number", field="msisdn")
    (first,) = await journal.store([bad])
    assert (first.state, first.duplicate, first.reason, first.reason_field) == (
        State.REJECTED,
        False,
        "not an Indian mobile number",
        "msisdn",
    )
    (again,) = await journal.store([mo("r1", state=State.REJECTED, reason="other", field="x")])
    assert (again.duplicate, again.reason, again.reason_field) == (
        True,
        "not an Indian mobile number",
        "msisdn",
    )
    (event,) = await journal.timeline("r1")
    assert event.kind is EventKind.REJECTED and event.data["reason"] == "not an Indian mobile number"


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


async def test_compare_and_set_applies_only_from_the_expected_states(journal: Journal) -> None:
    await journal.store([mo("m1")])
    outcome = Change(
        "m1",
        [ev(EventKind.OUTCOME, outcome="reply", reply="thanks")],
        State.ANSWERED,
        expect=PENDING,
        client_id="cl_1",
        reply_text="thanks",
    )
    assert await journal.apply([outcome]) == [True]
    assert await journal.apply([outcome]) == [False]  # already answered: not pending any more
    rec = await journal.get("m1")
    assert rec is not None
    assert (rec.state, rec.client_id, rec.reply_text) == (State.ANSWERED, "cl_1", "thanks")
    assert rec.updated_at >= rec.stored_at
    # The refused change left no event behind.
    assert [e.kind for e in await journal.timeline("m1")] == [EventKind.RECEIVED, EventKind.OUTCOME]


async def test_a_change_for_an_unknown_message_with_expect_is_refused(journal: Journal) -> None:
    assert await journal.apply([Change("ghost", [ev(EventKind.NOTE)], State.ANSWERED, PENDING)]) == [False]
    assert await journal.timeline("ghost") == []


async def test_events_without_a_state_are_always_appended_and_keep_the_state(journal: Journal) -> None:
    await journal.store([mo("m1")])
    assert await journal.apply([Change("m1", [ev(EventKind.RECOVERED, resume="dispatch")])]) == [True]
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.QUEUED


async def test_several_changes_to_one_message_apply_in_order(journal: Journal) -> None:
    await journal.store([mo("m1"), mo("m2")])
    results = await journal.apply(
        [
            Change("m1", [ev(EventKind.ROUTED, client_id="c")], State.DISPATCHING, PENDING),
            Change("m2", [ev(EventKind.OUTCOME, outcome="blank")], State.NO_REPLY, PENDING),
            Change("m1", [ev(EventKind.OUTCOME, outcome="reply")], State.ANSWERED, PENDING, reply_text="hi"),
            Change("m1", [ev(EventKind.REPLY_SUBMITTED, n=1)], State.REPLIED, ANSWERED, reply_refs=["ref-1"]),
            Change("m2", [ev(EventKind.REPLY_SUBMITTED, n=2)], State.REPLIED, ANSWERED),
        ]
    )
    assert results == [True, True, True, True, False]
    rec1, rec2 = await journal.get("m1"), await journal.get("m2")
    assert rec1 is not None and rec1.state is State.REPLIED and rec1.reply_text == "hi"
    assert rec2 is not None and rec2.state is State.NO_REPLY
    assert [e.kind for e in await journal.timeline("m1")] == [
        EventKind.RECEIVED,
        EventKind.ROUTED,
        EventKind.OUTCOME,
        EventKind.REPLY_SUBMITTED,
    ]


async def test_of_many_concurrent_outcomes_exactly_one_wins(journal: Journal) -> None:
    await journal.store([mo("m1")])

    def attempt(n: int) -> Change:
        return Change(
            "m1", [ev(EventKind.OUTCOME, outcome="reply", n=n)], State.ANSWERED, PENDING, reply_text=f"r{n}"
        )

    results = await asyncio.gather(*(journal.apply([attempt(n)]) for n in range(30)))
    assert sum(r[0] for r in results) == 1
    winner = next(n for n, r in enumerate(results) if r[0])
    rec = await journal.get("m1")
    assert rec is not None and rec.reply_text == f"r{winner}"
    outcomes = [e for e in await journal.timeline("m1") if e.kind is EventKind.OUTCOME]
    assert [e.data["n"] for e in outcomes] == [winner]


async def test_events_keep_the_order_they_were_applied(journal: Journal) -> None:
    await journal.store([mo("m1")])
    for n in range(12):
        await journal.apply([Change("m1", [ev(EventKind.NOTE, n=n), ev(EventKind.NOTE, n=n + 100)])])
    notes = [e.data["n"] for e in await journal.timeline("m1") if e.kind is EventKind.NOTE]
    assert notes == [x for n in range(12) for x in (n, n + 100)]


# ------------------------------------------------------------------------------------------ receipts


async def test_delivery_receipts_follow_the_reply_refs(journal: Journal) -> None:
    await journal.store([mo("m1")])
    await journal.apply([Change("m1", [], State.ANSWERED, PENDING, reply_text="hi")])
    await journal.apply(
        [Change("m1", [ev(EventKind.REPLY_SUBMITTED)], State.REPLIED, ANSWERED, reply_refs=["a", "b"])]
    )
    assert await journal.record_delivery("nobody", "delivered", "") is None
    assert await journal.record_delivery("a", "delivered", "DELIVRD") == "m1"
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.DELIVERED
    assert await journal.record_delivery("b", "undelivered", "EXPIRED") == "m1"
    assert await journal.record_delivery("a", "delivered", "DELIVRD") == "m1"
    rec = await journal.get("m1")
    assert rec is not None and rec.state is State.UNDELIVERED  # a later "delivered" does not hide it
    deliveries = [e.data for e in await journal.timeline("m1") if e.kind is EventKind.DELIVERY]
    assert [(d["ref"], d["status"]) for d in deliveries] == [
        ("a", "delivered"),
        ("b", "undelivered"),
        ("a", "delivered"),
    ]


# ------------------------------------------------------------------------------------------ queries


async def test_unfinished_lists_what_is_left_oldest_change_first(journal: Journal) -> None:
    await journal.store([mo("q"), mo("d"), mo("a"), mo("f")])
    await journal.apply([Change("f", [], State.NO_REPLY, PENDING)])
    await asyncio.sleep(0.01)
    await journal.apply([Change("d", [], State.DISPATCHING, PENDING)])
    await asyncio.sleep(0.01)
    await journal.apply([Change("a", [], State.ANSWERED, PENDING, reply_text="x")])
    ids = [r.id for r in await journal.unfinished(10)]
    assert ids == ["q", "d", "a"]
    assert [r.id for r in await journal.unfinished(2)] == ["q", "d"]
    rec_d = await journal.get("d")
    assert rec_d is not None
    assert [r.id for r in await journal.unfinished(10, older_than=rec_d.updated_at)] == ["q"]


async def test_counts_by_state(journal: Journal) -> None:
    await journal.store([mo("a"), mo("b"), mo("c", state=State.REJECTED, reason="r", field="f")])
    await journal.apply([Change("a", [], State.NO_REPLY, PENDING)])
    assert await journal.counts_by_state() == {"queued": 1, "no_reply": 1, "rejected": 1}


async def test_find_filters_and_orders_newest_first(journal: Journal) -> None:
    await journal.store(
        [
            mo("old", received_at=1000.0),
            mo("mid", received_at=2000.0, shortcode="12345"),
            mo("new", received_at=3000.0, msisdn="919999999999"),
        ]
    )
    await journal.apply([Change("new", [], State.NO_REPLY, PENDING)])

    async def ids(**kw: object) -> list[str]:
        return [r.id for r in await journal.find(MessageFilter(**kw))]  # type: ignore[arg-type]

    assert await ids() == ["new", "mid", "old"]
    assert await ids(limit=2) == ["new", "mid"]
    assert await ids(shortcode="12345") == ["mid"]
    assert await ids(msisdn="919999999999") == ["new"]
    assert await ids(state=State.QUEUED) == ["mid", "old"]
    assert await ids(since=2000.0) == ["new", "mid"]
    assert await ids(until=2000.0) == ["old"]
    assert await ids(since=1500.0, until=2500.0, shortcode="56767") == []


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
    await journal.apply([Change("m1", [ev(EventKind.NOTE, n=1)], State.ANSWERED, PENDING, reply_text="x")])
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
