"""The embedded journal: SQLite in WAL mode, group commits on the event loop, readers in threads.

Writes go through :mod:`~mogateway.edges.storage.sqlite_writer` (a group per turn of the event loop,
fsynced by a thread of its own) and the store/apply/receipt calls of one turn are merged
(:class:`Coalescer`) and written by
:mod:`~mogateway.edges.storage.sqlite_batches`. Reads use their own read-only connections in worker threads,
so an admin listing never waits for the writer. The schema comes from ``storage.schema``.

Schema versions (``meta.schema_version``): 1 kept a message's first timeline entry as an event row; 2
keeps it in the message row (notes and rejection columns), so storing an MO writes one row; 3 adds the
worker that owns each MO (``core.workers``). An older file is upgraded in place when it is opened.

Several worker processes may write one file: with ``lock_path`` each group commit holds an exclusive
lock on that file (``flock``) from ``BEGIN`` to ``COMMIT``, so the workers take turns in the kernel's
order instead of SQLite's sleep-and-retry on a busy database.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mogateway.core.clients import ClientRecord
from mogateway.edges.storage import batches, schema
from mogateway.edges.storage.client_documents import client_document
from mogateway.edges.storage.dialect import SQLITE, Program, run_sync
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sql_journal import Batch, SqlJournal, write_client
from mogateway.edges.storage.sqlite_writer import Coalescer, Writer, connect

__all__ = ["SCHEMA_VERSION", "SqliteJournal"]

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 4
_SYNC_MODES = {"full": "FULL", "stores": "STORES", "normal": "NORMAL"}

# Version 1 -> 2: the first event (received/rejected) moves into the message row; "dispatching" was
# never written by a gateway and is gone from the table.
_UPGRADE_1_TO_2 = """
ALTER TABLE messages ADD COLUMN notes TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN rejection_field TEXT;
ALTER TABLE messages ADD COLUMN rejection_reason TEXT;
UPDATE messages SET
    notes = coalesce((SELECT json_extract(e.data, '$.notes') FROM events e
                      WHERE e.message_id = messages.id AND e.kind IN ('received', 'rejected')
                      ORDER BY e.seq LIMIT 1), ''),
    rejection_field = (SELECT json_extract(e.data, '$.field') FROM events e
                       WHERE e.message_id = messages.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1),
    rejection_reason = (SELECT json_extract(e.data, '$.reason') FROM events e
                        WHERE e.message_id = messages.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1);
UPDATE messages SET state = 'queued' WHERE state = 'dispatching';
DELETE FROM events WHERE kind IN ('received', 'rejected');
DROP INDEX IF EXISTS messages_pending;
DROP INDEX IF EXISTS messages_unfinished;
DROP INDEX IF EXISTS messages_unfinished_id;
"""
_UPGRADE_2_TO_3 = """
ALTER TABLE messages ADD COLUMN owner INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS messages_unfinished;
"""
# Version 3 -> 4: what changes as a message moves leaves its row for a short one of its own
# (storage/schema.py), spelled out as version 4 has it. DROP COLUMN needs SQLite 3.35 and no index on
# the column.
_UPGRADE_3_TO_4 = """
DROP INDEX IF EXISTS messages_unfinished;
CREATE TABLE message_states (
    id TEXT NOT NULL PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL,
    client_id TEXT,
    reply_text TEXT,
    owner INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO message_states (id, state, updated_at, client_id, reply_text, owner)
    SELECT id, state, updated_at, client_id, reply_text, owner FROM messages;
ALTER TABLE messages DROP COLUMN updated_at;
ALTER TABLE messages DROP COLUMN state;
ALTER TABLE messages DROP COLUMN client_id;
ALTER TABLE messages DROP COLUMN reply_text;
ALTER TABLE messages DROP COLUMN owner;
"""


def _prepare(conn: sqlite3.Connection) -> None:
    """Create or upgrade the schema (run by the writer, in a thread, before it takes any job)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row is not None else None
        if version is not None and version > SCHEMA_VERSION:
            raise RuntimeError(
                f"the journal has schema version {version}, newer than this mogateway ({SCHEMA_VERSION}): "
                "upgrade mogateway"
            )
        upgrades = {
            1: _UPGRADE_1_TO_2 + _UPGRADE_2_TO_3 + _UPGRADE_3_TO_4,
            2: _UPGRADE_2_TO_3 + _UPGRADE_3_TO_4,
            3: _UPGRADE_3_TO_4,
        }
        if version in upgrades:
            for statement in upgrades[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            log.info("journal upgraded from schema version %d to %d", version, SCHEMA_VERSION)
        for statement in (schema.sqlite_tables() + schema.sqlite_indexes()).split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# Values of PRAGMA secure_delete, to put back the build's own setting after a client write.
_SECURE_DELETE = {0: "OFF", 1: "ON", 2: "FAST"}


class SqliteJournal(SqlJournal):
    """The journal on one SQLite file (see the module docstring)."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        synchronous: str = "stores",
        *,
        sealer: Sealer | None = None,
        lock_path: str | None = None,
    ) -> None:
        self.path = str(path)
        self._lock_path = lock_path
        self.sealer = sealer or Sealer()
        self._sync = _SYNC_MODES[synchronous]
        self._writer: Writer | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        # Storing an MO must be on disk before its source is acknowledged; what happens to it afterwards
        # rides on the next fsync (sqlite_writer: synchronous = stores).
        self._coalescers = {
            batches.store: Coalescer(_on_sqlite(batches.store)),
            batches.apply: Coalescer(_on_sqlite(batches.apply), durable=False),
            batches.deliveries: Coalescer(_on_sqlite(batches.deliveries), durable=False),
        }

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        writer = Writer(self.path, self._sync, _prepare, asyncio.get_running_loop(), self._lock_path)
        await writer.open()
        self._writer = writer

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.close()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        self._local = threading.local()

    # ------------------------------------------------------------------ plumbing

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        if self._writer is None:
            raise RuntimeError("journal is not open")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writer.submit((fn, fut))
        return fut

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(lambda: fn(self._reader()))

    async def _batch(self, batch: Batch, items: Sequence[Any]) -> list[Any]:
        if self._writer is None:
            raise RuntimeError("journal is not open")
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._coalescers[batch].add(self._writer, items, fut)
        return await fut

    async def _writing(self, program: Callable[..., Program[T]], *args: Any) -> T:
        return await self._write(lambda conn: run_sync(conn, program(SQLITE, *args)))

    async def _reading(self, program: Callable[..., Program[T]], *args: Any, snapshot: bool = False) -> T:
        def read(conn: sqlite3.Connection) -> T:
            if not snapshot:
                return run_sync(conn, program(SQLITE, *args))
            conn.execute("BEGIN")  # one snapshot for every statement (WAL: readers never wait)
            try:
                return run_sync(conn, program(SQLITE, *args))
            finally:
                conn.execute("COMMIT")

        return await self._read(read)

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        doc = client_document(client, self.sealer)

        def job(conn: sqlite3.Connection) -> None:
            # The document replaced may hold secrets (in plain text, or under a retired key): they must
            # not linger in the file's free space, whatever this SQLite build's default is. Only around
            # this write, so the message tables keep the build's own trade-off.
            before = _SECURE_DELETE.get(conn.execute("PRAGMA secure_delete").fetchone()[0], "OFF")
            conn.execute("PRAGMA secure_delete=ON")
            try:
                run_sync(conn, write_client(SQLITE, client.id, doc, client.updated_at))
            finally:
                conn.execute(f"PRAGMA secure_delete={before}")

        await self._write(job)


def _on_sqlite(batch: Batch) -> Callable[[sqlite3.Connection, list[Any]], list[Any]]:
    """``batch`` as the writer's coalescer runs it: on its connection, in its group transaction."""
    return lambda conn, items: run_sync(conn, batch(SQLITE, items, time.time()))
