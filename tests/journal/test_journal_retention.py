"""Retention's journal calls, on both engines: old finished messages go with their events and reply
references, in batches, oldest first; unfinished ones stay whatever their age; SQLite gives the freed
pages back to the file system."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mogateway.core.message import Message, Sender
from mogateway.core.ports import Journal
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.edges.storage.sqlite import SqliteJournal

DAY = 86400.0
T0 = 1_700_000_000.0  # a fixed past time: received times are the message's, not the clock's


def message(mid: str, received_at: float) -> Message:
    return Message(
        id=mid,
        shortcode="56767",
        msisdn="919812345678",
        text=f"VOTE {mid}",
        received_at=received_at,
        origin="smpp:airtel",
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )


async def replied(journal: Journal, mid: str, *refs: str) -> None:
    """Take a stored message to ``replied``, its reply submitted as ``refs``."""
    outcome = Event(EventKind.OUTCOME, T0, {"outcome": "reply", "reply": "THANKS"})
    submitted = Event(EventKind.REPLY_SUBMITTED, T0, {"channel": "smpp:airtel", "refs": list(refs)})
    assert await journal.apply([Change(mid, outcome, client_id="c1", reply_text="THANKS")]) == [True]
    assert await journal.apply([Change(mid, submitted, reply_refs=refs)]) == [True]


async def test_old_finished_messages_go_in_batches_with_their_events_and_refs(journal: Journal) -> None:
    old = [f"old-{n:02d}" for n in range(7)]
    await journal.store([message(mid, T0 + n) for n, mid in enumerate(old)])
    await journal.store([message("old-queued", T0 + 1), message("new-done", T0 + 3 * DAY)])
    for mid in [*old, "new-done"]:
        await replied(journal, mid, f"ref-{mid}")

    batches = []
    while (n := await journal.delete_finished(T0 + DAY, limit=3)) > 0:
        batches.append(n)
    assert batches == [3, 3, 1]  # a backlog bigger than one batch, in batches

    for mid in old:
        assert await journal.get(mid) is None
        assert await journal.timeline(mid) == []
    assert await journal.record_deliveries([(f"ref-{old[0]}", "delivered", "")]) == [None]
    queued = await journal.get("old-queued")
    assert queued is not None and queued.state is State.QUEUED  # never deleted, whatever its age
    assert await journal.record_deliveries([("ref-new-done", "delivered", "")]) == ["new-done"]
    assert await journal.counts_by_state() == {"queued": 1, "delivered": 1}


async def test_the_oldest_go_first_and_the_range_start_is_kept(journal: Journal) -> None:
    await journal.store([message(f"m{n}", T0 + n * 3600) for n in range(5)])
    for n in range(5):
        await replied(journal, f"m{n}")
    assert await journal.delete_finished(T0 + DAY, received_since=T0 + 3600, limit=2) == 2
    left = [mid for mid in ("m0", "m1", "m2", "m3", "m4") if await journal.get(mid) is not None]
    assert left == ["m0", "m3", "m4"]  # m0 before the range; m1, m2 the oldest in it


async def test_a_page_of_finished_messages_has_their_whole_record(journal: Journal) -> None:
    ids = ["b", "a", "c", "d"]
    await journal.store([message(mid, T0 + (1 if mid in "ab" else 2)) for mid in ids])
    for mid in ("a", "b", "c"):
        await replied(journal, mid, f"{mid}-2", f"{mid}-1")  # d stays queued

    first = await journal.finished_page(T0, T0 + DAY, limit=2)
    assert [f.record.message.id for f in first] == ["a", "b"]  # received time, then id
    rest = await journal.finished_page(
        T0, T0 + DAY, after=(first[-1].record.message.received_at, "b"), limit=2
    )
    assert [f.record.message.id for f in rest] == ["c"]
    a = first[0]
    assert a.record.state is State.REPLIED and a.record.reply_text == "THANKS"
    assert a.reply_refs == ("a-1", "a-2")
    assert [e.kind for e in a.events] == [EventKind.RECEIVED, EventKind.OUTCOME, EventKind.REPLY_SUBMITTED]
    assert a.events[1].data["outcome"] == "reply"


async def test_deleting_by_id_skips_unfinished_and_unknown_messages(journal: Journal) -> None:
    await journal.store([message("done", T0), message("waiting", T0)])
    await replied(journal, "done", "r1")
    assert await journal.delete_finished_ids(["done", "waiting", "nobody"]) == 1
    assert await journal.get("done") is None
    assert await journal.get("waiting") is not None
    assert await journal.delete_finished_ids(["done"]) == 0  # again: nothing, no error


async def test_sqlite_gives_freed_pages_back_to_the_file_system(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal(path)
    await journal.open()
    try:
        ids = [f"m{n:05d}" for n in range(3000)]
        for start in range(0, len(ids), 500):
            await journal.store([message(mid, T0) for mid in ids[start : start + 500]])
        for mid in ids:
            await journal.apply([Change(mid, Event(EventKind.OUTCOME, T0, {"outcome": "blank"}))])
        while await journal.delete_finished(T0 + 1, limit=1000):
            pass
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental, from the start
            free_before = conn.execute("PRAGMA freelist_count").fetchone()[0]
        assert free_before > 50
        reclaimed = 0
        while (n := await journal.reclaim_space(64)) > 0:
            assert n <= 64
            reclaimed += n
        assert reclaimed == free_before
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        await journal.close()


async def test_an_old_sqlite_file_is_converted_to_incremental_vacuum_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a file as a mogateway before retention made it
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("CREATE TABLE filler (x TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 200,)] * 2000)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    journal = SqliteJournal(path)
    await journal.open()
    await journal.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM filler").fetchone()[0] == 2000


async def test_one_process_sweeps_at_a_time_on_postgresql(journal: Journal, backend: str) -> None:
    async with journal.sweeping() as first:
        assert first
        if backend == "postgres":
            other = type(journal)(journal.url)  # type: ignore[call-arg, attr-defined]
            await other.open()
            try:
                async with other.sweeping() as second:
                    assert not second
            finally:
                await other.close()
    async with journal.sweeping() as again:  # released at the end of the block
        assert again


async def test_a_deleted_whatsapp_message_is_remembered_by_id_until_its_window_ends(journal: Journal) -> None:
    wa = Message(
        id="wa-1",
        shortcode="919876543210",
        msisdn="919812345678",
        text="BAL",
        received_at=T0,
        origin="whatsapp:106",
        source_id="wamid.A",
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )
    wa_later = wa.with_changes(id="wa-2", source_id="wamid.B", received_at=T0 + 2 * DAY)
    await journal.store([wa, wa_later, message("sms-1", T0)])
    for mid in ("wa-1", "wa-2", "sms-1"):
        await replied(journal, mid)
    assert await journal.seen_whatsapp(["wa-1", "wa-2", "sms-1"]) == set()  # not deleted: not "seen"
    assert await journal.delete_finished(T0 + 3 * DAY) == 3
    assert await journal.seen_whatsapp(["wa-1", "wa-2", "sms-1", "other"]) == {"wa-1", "wa-2"}
    assert await journal.forget_seen_whatsapp(T0 + DAY) == 1  # wa-1 is past its window
    assert await journal.seen_whatsapp(["wa-1", "wa-2"]) == {"wa-2"}


async def test_the_replay_window_survives_a_backup_and_a_restore(tmp_path: Path) -> None:
    from mogateway.edges.journal_backup import backup, restore

    path = tmp_path / "live.db"
    journal = SqliteJournal(path)
    await journal.open()
    try:
        wa = message("wa-1", T0).with_changes(origin="whatsapp:106", source_id="wamid.A")
        await journal.store([wa])
        await replied(journal, "wa-1")
        assert await journal.delete_finished(T0 + DAY) == 1
        copy = tmp_path / "copy.db"
        backup(str(path), str(copy))
    finally:
        await journal.close()
    restored = tmp_path / "restored.db"
    restore(str(copy), str(restored))
    again = SqliteJournal(restored)
    await again.open()
    try:
        assert await again.seen_whatsapp(["wa-1"]) == {"wa-1"}
    finally:
        await again.close()


async def test_reply_origins_name_the_origin_of_each_known_reply_part(journal: Journal) -> None:
    wa = message("wa-1", T0).with_changes(origin="whatsapp:106", source_id="wamid.A")
    await journal.store([wa, message("sms-1", T0)])
    await replied(journal, "wa-1", "wamid.OUT1", "wamid.OUT2")
    await replied(journal, "sms-1", "smsc-1")
    found = await journal.reply_origins(["wamid.OUT2", "smsc-1", "unknown"])
    assert found == {"wamid.OUT2": "whatsapp:106", "smsc-1": "smpp:airtel"}
    assert await journal.reply_origins([]) == {}
