"""The retention SQL that docs/scaling.md gives operators of the PostgreSQL journal deletes old finished
messages from every table, and nothing else."""

from __future__ import annotations

import re
import time
from pathlib import Path

import asyncpg

from mogateway.core.message import Message, Sender
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.postgres import PostgresJournal
from postgres_databases import truncate_all

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
DAY = 86400.0


def _retention_sql() -> str:
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index("**Retention.**") :]
    found = re.search(r"```sql\n(.*?)```", after, re.DOTALL)
    assert found is not None, "docs/scaling.md has no retention SQL"
    return found.group(1)


def _message(message_id: str) -> Message:
    return Message(
        id=message_id,
        shortcode="56767",
        msisdn="919812345678",
        text="HI",
        received_at=time.time(),
        origin="http",
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )


async def test_the_documented_cleanup_deletes_old_finished_messages_from_every_table(pg_url: str) -> None:
    await truncate_all(pg_url)
    journal = PostgresJournal(pg_url)
    await journal.open()
    try:
        ids = ["old-done", "old-unfinished", "new-done"]
        await journal.store([_message(i) for i in ids])
        now = time.time()
        for mid in ("old-done", "new-done"):
            outcome = Event(EventKind.OUTCOME, now, {"outcome": "reply", "reply": "OK"})
            submitted = Event(EventKind.REPLY_SUBMITTED, now, {"channel": "smpp:a", "refs": [f"r-{mid}"]})
            assert await journal.apply([Change(mid, outcome, reply_text="OK")]) == [True]
            assert await journal.apply([Change(mid, submitted, reply_refs=(f"r-{mid}",))]) == [True]
    finally:
        await journal.close()
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            "UPDATE message_states SET updated_at = $1 WHERE id IN ('old-done', 'old-unfinished')",
            time.time() - 91 * DAY,
        )
        await conn.execute(_retention_sql())
        left = {
            table: sorted(r[0] for r in await conn.fetch(f"SELECT DISTINCT {column} FROM {table}"))
            for table, column in (
                ("messages", "id"),
                ("message_states", "id"),
                ("events", "message_id"),
                ("reply_refs", "message_id"),
            )
        }
    finally:
        await conn.close()
    assert left == {
        "messages": ["new-done", "old-unfinished"],
        "message_states": ["new-done", "old-unfinished"],
        "events": ["new-done"],
        "reply_refs": ["new-done"],
    }
