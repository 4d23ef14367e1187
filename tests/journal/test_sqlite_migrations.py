"""The SQLite journal takes its schema from the same migration files as PostgreSQL: a new file is
created by them, a file written before they were SQLite's is taken over at the version it had and
upgraded in place, and either way the file ends with the schema a new one has."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from mogateway.core.message import Message, Sender
from mogateway.core.repeats import content_source_id
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.edges.storage import migrations, schema
from mogateway.edges.storage.sqlite import SqliteJournal

FIXTURES = Path(__file__).parent / "fixtures"
T = 1_700_000_000.0


def _affinity(declared: str) -> str:
    """SQLite's type affinity of a declared column type (its rules, in their order)."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(s in t for s in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in t or not t:
        return "BLOB"
    if any(s in t for s in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def structure(path: Path) -> dict[str, Any]:
    """What a SQLite file's schema is, beyond how its SQL was spelled: every table's columns (name,
    affinity, not null, default, key), whether it keeps a rowid, and every index (table, columns,
    condition)."""
    with sqlite3.connect(path) as conn:
        found: dict[str, Any] = {}
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            columns = [
                (c[1], _affinity(c[2]), bool(c[3]), c[4], c[5])
                for c in conn.execute(f"PRAGMA table_info({name})")
            ]
            found[f"table {name}"] = (columns, "WITHOUT ROWID" in sql.upper())
        for name, table, sql in conn.execute(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ):
            where = re.search(r"\bWHERE\b(.*)", sql, re.IGNORECASE | re.DOTALL)
            columns = [c[2] for c in conn.execute(f"PRAGMA index_info({name})")]
            found[f"index {name}"] = (table, columns, " ".join(where[1].split()) if where else None)
    return found


async def _fresh(path: Path) -> dict[str, Any]:
    journal = SqliteJournal(path)
    await journal.open()
    await journal.close()
    return structure(path)


def _from_dump(path: Path, dump: str) -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript((FIXTURES / dump).read_text(encoding="utf-8"))
    return path


def _applied(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


async def test_a_new_file_is_made_by_every_migration_and_has_the_described_columns(tmp_path: Path) -> None:
    found = await _fresh(tmp_path / "new.db")
    assert _applied(tmp_path / "new.db") == [m.version for m in migrations.MIGRATIONS]
    for table, columns in schema.TABLES.items():
        described = [(c.name, _affinity(c.sqlite), "NOT NULL" in c.sqlite) for c in columns]
        assert [c[:3] for c in found[f"table {table}"][0]] == described, table
    assert "table meta" not in found
    # The partial index the unfinished messages are read through is spelled as the queries spell it.
    _, _, condition = found["index message_states_unfinished"]
    assert condition == schema.UNFINISHED_SQL


async def test_a_journal_written_at_a7c9be2_is_taken_over_and_upgraded_in_place(tmp_path: Path) -> None:
    path = _from_dump(tmp_path / "old.db", "journal_a7c9be2.sql")
    journal = SqliteJournal(path)
    await journal.open()
    try:
        replied = await journal.get("a-replied")
        assert replied is not None and replied.state is State.REPLIED
        assert (replied.client_id, replied.reply_text, replied.message.notes) == ("cl_1", "thanks", ("n1",))
        assert (replied.stored_at, replied.updated_at) == (T + 1.5, T + 20)
        kinds = [e.kind for e in await journal.timeline("a-replied")]
        assert kinds == [EventKind.RECEIVED, EventKind.OUTCOME, EventKind.REPLY_SUBMITTED]
        rejected = await journal.get("d-rejected")
        assert rejected is not None and rejected.state is State.REJECTED
        assert [r.id for r in await journal.unfinished(10, owner=1)] == ["b-queued", "e-smpp"]
        assert await journal.counts_by_state() == {"replied": 1, "queued": 2, "answered": 1, "rejected": 1}
        client = await journal.get_client("cl_1")
        assert client is not None and client.callback_url == "http://127.0.0.1:9/cb"
        assert await journal.get_setting("node_secret") == "kept"
        (row,) = await journal.read_stats(60, int(T), int(T) + 60)
        assert (row.kind, row.count) == ("received", 5)
        # Writes: a redelivery of the SMPP MO found through the number's index, a receipt, a new MO.
        again = Message(
            "again", "56767", "919812345678", "VOTE 7", T + 6, "smpp:b2",
            content_source_id("digest1", int((T + 6) * 1000)), Sender(91, 9812, 345678),
        )  # fmt: skip
        (stored,) = await journal.store([again], None, [T - 600])
        assert (stored.id, stored.duplicate) == ("e-smpp", True)
        assert await journal.record_deliveries([("r1", "delivered", "")]) == ["a-replied"]
        (new,) = await journal.store([again.with_changes(id="new", source_id="s-new")], [1])
        assert new.state is State.QUEUED and not new.duplicate
        blank = Event(EventKind.OUTCOME, time.time(), {"outcome": "blank"})
        assert await journal.apply([Change("new", blank)]) == [True]
    finally:
        await journal.close()
    assert _applied(path) == [m.version for m in migrations.MIGRATIONS]
    assert structure(path) == await _fresh(tmp_path / "new.db")


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_a_journal_of_an_older_sqlite_version_ends_with_a_new_files_schema(
    tmp_path: Path, version: int
) -> None:
    # The files of test_schema.py's upgrades, taken the rest of the way.
    from test_schema import _VERSION_1, _VERSION_3

    path = tmp_path / f"v{version}.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_VERSION_1 if version == 1 else _VERSION_3)
        # What the code of versions 2 and 3 created at every start besides (CREATE ... IF NOT EXISTS).
        conn.executescript(
            """
            CREATE TABLE IF NOT EXISTS clients (id TEXT NOT NULL PRIMARY KEY, doc TEXT NOT NULL,
                                                updated_at REAL NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS settings (key TEXT NOT NULL PRIMARY KEY,
                                                 value TEXT NOT NULL) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS messages_shortcode ON messages (shortcode, received_at);
            CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, message_id TEXT NOT NULL,
                                               at REAL NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS events_message ON events (message_id, seq);
            """
            if version > 1
            else ""
        )
        if version == 2:  # as test_schema.py makes it: no owner column
            conn.executescript(
                """
                DROP INDEX messages_unfinished;
                ALTER TABLE messages DROP COLUMN owner;
                UPDATE meta SET value = '2';
                """
            )
    journal = SqliteJournal(path)
    await journal.open()
    await journal.close()
    found, fresh = structure(path), await _fresh(tmp_path / "new.db")
    # Versions 1 and 2 get the stats table from 0004; test_schema.py's file of version 3 lacks it (the
    # code of version 3 created it at every start).
    if version == 3:
        fresh.pop("table stats")
    # reply_refs of version 1 were written without NOT NULL on the key (a primary key of a table
    # WITHOUT ROWID is not null anyway).
    found.pop("table reply_refs")
    fresh.pop("table reply_refs")
    assert found == fresh


async def test_opening_again_applies_nothing_and_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await _fresh(path)
    with sqlite3.connect(path) as conn:
        conn.isolation_level = None
        assert migrations.migrate_sqlite(conn) == []
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (?, 'from_the_future')", (999,))
    journal = SqliteJournal(path)
    with pytest.raises(migrations.SchemaBehind, match="newer than this mogateway"):
        await journal.open()


def test_a_migration_file_says_which_statements_are_one_engines() -> None:
    m = migrations.Migration(
        9,
        "example",
        "-- both\nCREATE TABLE a (x text);\n-- engine: postgres\nCREATE INDEX p ON a (x);\n"
        "-- engine: sqlite\nCREATE INDEX s ON a (x);\n-- engine: both\nDROP TABLE b;\n",
    )
    assert "CREATE INDEX p" in m.statements_for("postgres") and "CREATE INDEX s" not in m.statements_for(
        "postgres"
    )
    sqlite_part = m.statements_for("sqlite")
    assert [s.split()[0:3] for s in migrations._split(sqlite_part)] == [
        ["--", "both", "CREATE"],
        ["CREATE", "INDEX", "s"],
        ["DROP", "TABLE", "b;"],
    ]
    for migration in migrations.MIGRATIONS:  # every file splits into whole statements on SQLite
        assert migrations._split(migration.statements_for("sqlite")) is not None
