"""WhatsApp on both journals, with no schema change: the channel and the wamid ride in the origin and the
source id, the reply's wamids in reply_refs, and Meta's statuses are delivery events."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from mogateway.core.message import Message, Sender
from mogateway.core.ports import Journal
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import throwaway_database

WAMID = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAEhgg"


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with throwaway_database("mogw_whatsapp") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def make_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Journal]:
    if request.param == "sqlite":
        return lambda: SqliteJournal(tmp_path / "journal.db")
    url: str = request.getfixturevalue("pg_url")
    return lambda: PostgresJournal(url)


@pytest.fixture
async def journal(make_journal: Callable[[], Journal]) -> AsyncIterator[Journal]:
    j = make_journal()
    await j.open()
    try:
        yield j
    finally:
        await j.close()


def _ev(kind: EventKind, **data: object) -> Event:
    return Event(kind, time.time(), dict(data))


async def test_a_whatsapp_message_and_its_statuses(journal: Journal) -> None:
    mid = f"wa{time.time_ns()}"
    m = Message(
        id=mid,
        shortcode="919876543210",
        msisdn="919812345678",
        text="HELLO",
        received_at=1_764_216_000.0,
        origin="whatsapp:106540352242922",
        source_id=WAMID,
        sender=Sender(91, 9812, 345678, "vi", ""),
        notes=("whatsapp text",),
    )
    await journal.store([m])
    rec = await journal.get(mid)
    assert rec is not None and rec.message == m
    assert rec.message.channel == "whatsapp" and rec.message.wamid == WAMID
    await journal.apply([Change(mid, _ev(EventKind.OUTCOME, outcome="reply"), reply_text="hi")])
    refs = (f"wamid.reply-1-{mid}", f"wamid.reply-2-{mid}")
    await journal.apply([Change(mid, _ev(EventKind.REPLY_SUBMITTED), reply_refs=refs)])
    assert await journal.record_deliveries([(refs[0], "sent", "")]) == [mid]
    assert (await journal.get(mid)).state is State.REPLIED  # type: ignore[union-attr]
    assert await journal.record_deliveries([(refs[0], "read", ""), (refs[1], "delivered", "")]) == [mid, mid]
    assert (await journal.get(mid)).state is State.DELIVERED  # type: ignore[union-attr]
    assert await journal.record_deliveries([(refs[1], "failed", "code 131026: undeliverable")]) == [mid]
    assert (await journal.get(mid)).state is State.UNDELIVERED  # type: ignore[union-attr]
    statuses = [e.data["status"] for e in await journal.timeline(mid) if e.kind is EventKind.DELIVERY]
    assert statuses == ["sent", "read", "delivered", "failed"]


async def test_the_whatsapp_member_is_kept_byte_for_byte_and_an_sms_has_none(journal: Journal) -> None:
    """Migration 0010: the callback's member is stored with the message (text, not jsonb: its bytes
    are the callback's), and read back wherever the message is read back."""
    mid = f"wm{time.time_ns()}"
    member = (
        '{"v":1,"type":"location","wamid":"' + WAMID + '","profile_name":"आशा",'
        '"location":{"latitude":19.076,"longitude":72,"name":"Gateway of India"}}'
    )
    wa = Message(
        id=mid,
        shortcode="919876543210",
        msisdn="919812345678",
        text="",
        received_at=1_764_216_000.0,
        origin="whatsapp:106540352242922",
        source_id=WAMID + mid,
        sender=Sender(91, 9812, 345678, "vi", ""),
        whatsapp=member,
    )
    sms = Message(
        id=mid + "s",
        shortcode="56767",
        msisdn="919812345678",
        text="BAL",
        received_at=1_764_216_000.0,
        origin="smpp:airtel",
        sender=Sender(91, 9812, 345678, "airtel", ""),
    )
    await journal.store([wa, sms])
    rec = await journal.get(mid)
    assert rec is not None and rec.message == wa and rec.message.whatsapp == member
    rec_sms = await journal.get(sms.id)
    assert rec_sms is not None and rec_sms.message.whatsapp is None
    # What a restarted node recovers and dispatches carries it too.
    unfinished = {r.message.id: r.message for r in await journal.unfinished(1000)}
    assert unfinished[mid].whatsapp == member
