"""The journal's one schema description (storage/schema.py) holds for both engines: SQLite creates it,
PostgreSQL's migrations arrive at it, and a journal file of schema version 1 is upgraded in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from mogateway.core.message import Message, Rejection, Sender
from mogateway.core.timeline import EventKind, State
from mogateway.edges.storage import migrations, schema
from mogateway.edges.storage.sqlite import SqliteJournal

# The schema of mogateway 0.1 (journal version 1), as it wrote it, with a few rows in it.
_VERSION_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE messages (
    id TEXT PRIMARY KEY, origin TEXT NOT NULL, source_id TEXT, shortcode TEXT NOT NULL,
    msisdn TEXT NOT NULL, message TEXT NOT NULL, received_at REAL NOT NULL, stored_at REAL NOT NULL,
    updated_at REAL NOT NULL, state TEXT NOT NULL, cc INTEGER, ndc INTEGER, sn INTEGER,
    operator TEXT NOT NULL DEFAULT '', circle TEXT NOT NULL DEFAULT '', client_id TEXT, reply_text TEXT
) WITHOUT ROWID;
CREATE INDEX messages_pending ON messages (state) WHERE state IN ('queued', 'dispatching', 'answered');
CREATE INDEX messages_msisdn ON messages (msisdn, received_at);
CREATE TABLE events (seq INTEGER PRIMARY KEY, message_id TEXT NOT NULL, at REAL NOT NULL,
                     kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE reply_refs (ref TEXT PRIMARY KEY, message_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE clients (id TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO messages VALUES ('ok', 'smpp:a', 'c:abc:1', '56767', '919812345678', 'VOTE', 10.0, 11.0,
    12.0, 'replied', 91, 9812, 345678, 'airtel', 'DL', 'cl_1', 'thanks');
INSERT INTO events (message_id, at, kind, data) VALUES
    ('ok', 10.0, 'received', '{"origin":"smpp:a","stored_at":11.0,"source_id":"c:abc:1","notes":["n1"]}'),
    ('ok', 11.5, 'outcome', '{"outcome":"reply","reply":"thanks"}'),
    ('ok', 12.0, 'reply_submitted', '{"channel":"smpp:a","refs":["r1"]}');
INSERT INTO reply_refs VALUES ('r1', 'ok');
INSERT INTO messages VALUES ('bad', 'http', NULL, '56767', '12345', 'HI', 20.0, 21.0, 21.0, 'rejected',
    NULL, NULL, NULL, '', '', NULL, NULL);
INSERT INTO events (message_id, at, kind, data) VALUES
    ('bad', 20.0, 'rejected', '{"origin":"http","stored_at":21.0,"reason":"too short","field":"msisdn"}');
INSERT INTO messages VALUES ('mid', 'http', 's1', '56767', '919812345678', 'HI', 30.0, 31.0, 31.0,
    'dispatching', 91, 9812, 345678, '', '', NULL, NULL);
INSERT INTO events (message_id, at, kind, data) VALUES
    ('mid', 30.0, 'received', '{"origin":"http","stored_at":31.0,"source_id":"s1"}');
"""


async def test_a_version_1_journal_is_upgraded_in_place_and_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_VERSION_1)
    journal = SqliteJournal(path)
    await journal.open()
    try:
        ok = await journal.get("ok")
        assert ok is not None and ok.state is State.REPLIED and ok.message.notes == ("n1",)
        kinds = [e.kind for e in await journal.timeline("ok")]
        assert kinds == [EventKind.RECEIVED, EventKind.OUTCOME, EventKind.REPLY_SUBMITTED]
        bad = await journal.get("bad")
        assert bad is not None and bad.message.rejection == Rejection("msisdn", "too short")
        (first,) = await journal.timeline("bad")
        assert first.kind is EventKind.REJECTED and first.data["reason"] == "too short"
        mid = await journal.get("mid")
        assert mid is not None and mid.state is State.QUEUED  # "dispatching" is no longer a state
        assert [r.id for r in await journal.unfinished(10)] == ["mid"]
        assert await journal.record_deliveries([("r1", "delivered", "")]) == ["ok"]
    finally:
        await journal.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (migrations.LATEST,)
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "messages_pending" not in indexes and "messages_unfinished" not in indexes
        assert "message_states_unfinished" in indexes
        # one index keyed by the number (the content lookup's), not two
        assert "messages_msisdn" not in indexes and "messages_msisdn_source" in indexes


async def test_sqlite_tables_are_the_described_columns(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    await journal.close()
    with sqlite3.connect(tmp_path / "j.db") as conn:
        for table, columns in schema.TABLES.items():
            found = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            assert found == [c.name for c in columns], table


async def test_postgres_migrations_arrive_at_the_described_columns(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        for table, columns in schema.TABLES.items():
            rows = await conn.fetch(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_name = $1 ORDER BY ordinal_position",
                table,
            )
            found = {r["column_name"]: (r["data_type"], r["is_nullable"] == "NO") for r in rows}
            assert list(found) == [c.name for c in columns], table
            for c in columns:
                wanted_type = c.postgres.split(" NOT NULL")[0].split(" DEFAULT")[0]
                assert found[c.name] == (wanted_type, "NOT NULL" in c.postgres), (table, c.name)
    finally:
        await conn.close()


# A journal of schema version 3 (one row per message, its state in it), with messages in several states
# and owned by two workers. Version 2 is the same without the owner column.
_VERSION_3 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '3');
CREATE TABLE messages (
    id TEXT NOT NULL PRIMARY KEY, origin TEXT NOT NULL, source_id TEXT, shortcode TEXT NOT NULL,
    msisdn TEXT NOT NULL, message TEXT NOT NULL, received_at REAL NOT NULL, stored_at REAL NOT NULL,
    updated_at REAL NOT NULL, state TEXT NOT NULL, cc INTEGER, ndc INTEGER, sn INTEGER,
    operator TEXT NOT NULL DEFAULT '', circle TEXT NOT NULL DEFAULT '', client_id TEXT, reply_text TEXT,
    notes TEXT NOT NULL DEFAULT '', rejection_field TEXT, rejection_reason TEXT,
    owner INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE events (seq INTEGER PRIMARY KEY, message_id TEXT NOT NULL, at REAL NOT NULL,
                     kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE reply_refs (ref TEXT NOT NULL PRIMARY KEY, message_id TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX messages_received ON messages (received_at);
CREATE INDEX messages_msisdn_source ON messages (msisdn, source_id);
CREATE INDEX messages_unfinished ON messages (owner, id)
    WHERE state IN ('answered', 'queued', 'replying');
INSERT INTO messages VALUES ('a-done', 'smpp:a', 'c:abc:1', '56767', '919812345678', 'VOTE', 10.0, 11.0,
    12.0, 'replied', 91, 9812, 345678, 'airtel', 'DL', 'cl_1', 'thanks', '["n1"]', NULL, NULL, 0);
INSERT INTO reply_refs VALUES ('r1', 'a-done');
INSERT INTO messages VALUES ('b-queued', 'http', NULL, '56767', '919812345679', 'HI', 20.0, 21.0,
    21.5, 'queued', 91, 9812, 345679, '', '', NULL, NULL, '', NULL, NULL, 1);
INSERT INTO messages VALUES ('c-answered', 'http', 's1', '56767', '919812345670', 'HELP', 30.0, 31.0,
    32.0, 'answered', 91, 9812, 345670, '', '', 'cl_2', 'call us', '', NULL, NULL, 0);
INSERT INTO messages VALUES ('d-rejected', 'http', NULL, '56767', '12345', 'X', 40.0, 41.0, 41.0,
    'rejected', NULL, NULL, NULL, '', '', NULL, NULL, '', 'msisdn', 'too short', 0);
"""


@pytest.mark.parametrize("version", [2, 3])
async def test_an_older_journal_moves_its_states_out_of_the_message_rows(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_VERSION_3)
        if version == 2:  # what version 2 wrote: no owner column
            conn.executescript(
                """
                DROP INDEX messages_unfinished;
                ALTER TABLE messages DROP COLUMN owner;
                CREATE INDEX messages_unfinished ON messages (id)
                    WHERE state IN ('answered', 'queued', 'replying');
                UPDATE meta SET value='2' WHERE key='schema_version';
                """
            )
    journal = SqliteJournal(path)
    await journal.open()
    try:
        done = await journal.get("a-done")
        assert done is not None and done.state is State.REPLIED and done.message.notes == ("n1",)
        assert (done.client_id, done.reply_text) == ("cl_1", "thanks")
        assert (done.updated_at, done.stored_at) == (12.0, 11.0)
        rejected = await journal.get("d-rejected")
        assert rejected is not None and rejected.state is State.REJECTED
        assert rejected.message.rejection == Rejection("msisdn", "too short")
        owner_of_queued = 1 if version == 3 else 0  # version 2 had no owners: all are worker 0's
        assert [r.id for r in await journal.unfinished(10, owner=owner_of_queued)] == (
            ["b-queued"] if version == 3 else ["b-queued", "c-answered"]
        )
        assert [r.id for r in await journal.unfinished(10)] == ["b-queued", "c-answered"]
        assert await journal.counts_by_state() == {"replied": 1, "queued": 1, "answered": 1, "rejected": 1}
        assert await journal.record_deliveries([("r1", "delivered", "")]) == ["a-done"]
        delivered = await journal.get("a-done")
        assert delivered is not None and delivered.state is State.DELIVERED
        await journal.store([_message("new")], owners=[1])
        assert "new" in [r.id for r in await journal.unfinished(10, owner=1)]
    finally:
        await journal.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (migrations.LATEST,)
        for table in ("messages", "message_states"):
            found = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            assert found == [c.name for c in schema.TABLES[table]], table
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "messages_unfinished" not in indexes
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name='message_states_unfinished'"
        ).fetchone()
        assert "(owner, id)" in sql


def _message(message_id: str) -> Message:
    return Message(
        id=message_id,
        shortcode="56767",
        msisdn="919812345678",
        text="HI",
        received_at=1.0,
        origin="http",
        source_id=None,
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )
