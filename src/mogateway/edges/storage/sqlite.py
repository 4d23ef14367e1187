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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message
from mogateway.core.ports import MessageFilter, MessageRecord, StatsRow, Stored
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage import schema
from mogateway.edges.storage.client_documents import client_document, client_from_document
from mogateway.edges.storage.console_sessions import SqliteConsoleSessions
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sqlite_batches import apply_batch, delivery_batch, store_batch
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


class SqliteJournal:
    """The journal on one SQLite file (see the module docstring)."""

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
        #: Seals client secrets on write and opens them on read (storage/sealing.py).
        self.sealer = sealer or Sealer()
        self._sync = _SYNC_MODES[synchronous]
        self._writer: Writer | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._stores = Coalescer(store_batch)
        # Storing an MO must be on disk before its source is acknowledged; what happens to it afterwards
        # rides on the next fsync (sqlite_writer: synchronous = stores).
        self._applies = Coalescer(apply_batch, durable=False)
        self._deliveries = Coalescer(delivery_batch, durable=False)

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

    def _coalesced(self, coalescer: Coalescer, items: Sequence[Any]) -> asyncio.Future[list[Any]]:
        if self._writer is None:
            raise RuntimeError("journal is not open")
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        coalescer.add(self._writer, items, fut)
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

    # ------------------------------------------------------------------ messages

    async def store(
        self,
        messages: Sequence[Message],
        owners: Sequence[int] | None = None,
        repeat_since: Sequence[float | None] | None = None,
    ) -> list[Stored]:
        if not messages:
            return []
        count = len(messages)
        items = list(
            zip(
                messages,
                owners if owners is not None else [0] * count,
                repeat_since if repeat_since is not None else [None] * count,
                strict=True,
            )
        )
        return await self._coalesced(self._stores, items)

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        if not changes:
            return []
        return await self._coalesced(self._applies, changes)

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        if not receipts:
            return []
        return await self._coalesced(self._deliveries, receipts)

    async def touch(self, message_ids: Sequence[str]) -> None:
        now = time.time()
        ids = list(message_ids)

        def job(conn: sqlite3.Connection) -> None:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                conn.execute(
                    f"UPDATE message_states SET updated_at=? WHERE {schema.UNFINISHED_SQL} "
                    f"AND id IN ({','.join('?' * len(chunk))})",
                    [now, *chunk],
                )

        if ids:
            await self._write(job)

    async def reassign(self, owners: Mapping[str, int]) -> None:
        rows = [(owner, mid) for mid, owner in owners.items()]
        sql = f"UPDATE message_states SET owner=? WHERE id=? AND {schema.UNFINISHED_SQL}"

        def job(conn: sqlite3.Connection) -> None:
            conn.executemany(sql, rows)

        if rows:
            await self._write(job)

    async def get(self, message_id: str) -> MessageRecord | None:
        sql = f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} WHERE m.id=?"

        def q(conn: sqlite3.Connection) -> MessageRecord | None:
            row = conn.execute(sql, (message_id,)).fetchone()
            return None if row is None else schema.record_from_row(row)

        return await self._read(q)

    async def timeline(self, message_id: str) -> list[Event]:
        found = await self.history(message_id)
        return [] if found is None else found[1]

    async def history(self, message_id: str) -> tuple[MessageRecord, list[Event]] | None:
        sql = f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} WHERE m.id=?"

        def q(conn: sqlite3.Connection) -> tuple[MessageRecord, list[Event]] | None:
            conn.execute("BEGIN")  # one snapshot for both statements (WAL: readers never wait)
            try:
                row = conn.execute(sql, (message_id,)).fetchone()
                if row is None:
                    return None
                rows = conn.execute(
                    "SELECT kind, at, data FROM events WHERE message_id=? ORDER BY seq", (message_id,)
                ).fetchall()
            finally:
                conn.execute("COMMIT")
            record = schema.record_from_row(row)
            events = [Event(EventKind(k), at, orjson.loads(d)) for k, at, d in rows]
            return record, [schema.first_event(record), *events]

        return await self._read(q)

    async def find(self, where: MessageFilter) -> list[MessageRecord]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("m.shortcode", where.shortcode),
            ("m.msisdn", where.msisdn),
            ("s.state", where.state.value if where.state else None),
            ("s.client_id", where.client_id),
        ):
            if value is not None:
                clauses.append(f"{column}=?")
                params.append(value)
        if where.since is not None:
            clauses.append("m.received_at>=?")
            params.append(where.since)
        if where.until is not None:
            clauses.append("m.received_at<?")
            params.append(where.until)
        if where.before is not None:
            clauses.append("(m.received_at<? OR (m.received_at=? AND m.id<?))")
            params += [where.before[0], where.before[0], where.before[1]]
        sql = f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM}"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY m.received_at DESC, m.id DESC LIMIT ?"
        params.append(where.limit)

        def q(conn: sqlite3.Connection) -> list[MessageRecord]:
            return [schema.record_from_row(r) for r in conn.execute(sql, params).fetchall()]

        return await self._read(q)

    async def unfinished(
        self, limit: int, *, after: str = "", older_than: float | None = None, owner: int | None = None
    ) -> list[MessageRecord]:
        sql = (
            f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} "
            f"WHERE {schema.UNFINISHED_SQL} AND s.id>?"
        )
        params: list[Any] = [after]
        if owner is not None:
            sql += " AND s.owner=?"
            params.append(owner)
        if older_than is not None:
            sql += " AND s.updated_at<?"
            params.append(older_than)
        sql += " ORDER BY s.id LIMIT ?"
        params.append(limit)

        def q(conn: sqlite3.Connection) -> list[MessageRecord]:
            return [schema.record_from_row(r) for r in conn.execute(sql, params).fetchall()]

        return await self._read(q)

    async def counts_by_state(self) -> dict[str, int]:
        def q(conn: sqlite3.Connection) -> dict[str, int]:
            return dict(conn.execute("SELECT state, count(*) FROM message_states GROUP BY state").fetchall())

        return await self._read(q)

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
                conn.execute(
                    "INSERT INTO clients VALUES (?,?,?) ON CONFLICT (id) DO UPDATE SET doc=excluded.doc, "
                    "updated_at=excluded.updated_at",
                    (client.id, doc, client.updated_at),
                )
            finally:
                conn.execute(f"PRAGMA secure_delete={before}")

        await self._write(job)

    async def get_client(self, client_id: str) -> ClientRecord | None:
        def q(conn: sqlite3.Connection) -> ClientRecord | None:
            row = conn.execute("SELECT doc FROM clients WHERE id=?", (client_id,)).fetchone()
            return None if row is None else client_from_document(row[0], self.sealer)

        return await self._read(q)

    async def list_clients(self) -> list[ClientRecord]:
        def q(conn: sqlite3.Connection) -> list[ClientRecord]:
            rows = conn.execute("SELECT doc FROM clients ORDER BY id").fetchall()
            return [client_from_document(r[0], self.sealer) for r in rows]

        return await self._read(q)

    async def delete_client(self, client_id: str) -> bool:
        now = time.time()

        def job(conn: sqlite3.Connection) -> bool:
            deleted = conn.execute("DELETE FROM clients WHERE id=?", (client_id,)).rowcount == 1
            if deleted:
                conn.execute(
                    "INSERT INTO settings VALUES ('clients_deleted_at', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                    (repr(now),),
                )
            return deleted

        return await self._write(job)

    async def clients_version(self) -> float:
        def q(conn: sqlite3.Connection) -> float:
            row = conn.execute(
                "SELECT max(coalesce((SELECT max(updated_at) FROM clients), 0), "
                "coalesce((SELECT CAST(value AS REAL) FROM settings WHERE key='clients_deleted_at'), 0))"
            ).fetchone()
            return float(row[0] or 0.0)

        return await self._read(q)

    # ------------------------------------------------------------------ settings

    async def get_setting(self, key: str) -> str | None:
        def q(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._read(q)

    async def set_setting_if_absent(self, key: str, value: str) -> str:
        def job(conn: sqlite3.Connection) -> str:
            conn.execute("INSERT INTO settings VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value))
            return str(conn.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()[0])

        return await self._write(job)

    # ------------------------------------------------------------------ console

    def console_sessions(self) -> SqliteConsoleSessions:
        """The console's sessions and sign-in throttle, in this journal (storage/console_sessions.py)."""
        return SqliteConsoleSessions(self._write, self._read)

    # ------------------------------------------------------------------ stats

    async def write_stats(
        self, rows: Sequence[StatsRow], forget_before: Mapping[int, int] | None = None
    ) -> None:
        values = [(r.span, r.at, r.node, r.client, r.kind, r.count) for r in rows]

        def job(conn: sqlite3.Connection) -> None:
            if values:
                conn.executemany(
                    "INSERT INTO stats VALUES (?,?,?,?,?,?) "
                    "ON CONFLICT (span, at, node, client, kind) DO UPDATE SET count=excluded.count",
                    values,
                )
            for span, before in (forget_before or {}).items():
                conn.execute("DELETE FROM stats WHERE span=? AND at<?", (span, before))

        await self._write(job)

    async def read_stats(
        self,
        span: int,
        since: int,
        until: int,
        *,
        node: str | None = None,
        exclude_node: str | None = None,
        by_time: bool = False,
    ) -> list[StatsRow]:
        sql = "SELECT {at}, client, kind, sum(count) FROM stats WHERE span=? AND at>=? AND at<?"
        params: list[Any] = [span, since, until]
        if node is not None:
            sql += " AND node=?"
            params.append(node)
        if exclude_node is not None:
            sql += " AND node<>?"
            params.append(exclude_node)
        sql += " GROUP BY at, client, kind" if by_time else " GROUP BY client, kind"
        sql = sql.format(at="at" if by_time else "?")
        if not by_time:
            params.insert(0, since)

        def q(conn: sqlite3.Connection) -> list[StatsRow]:
            rows = conn.execute(sql, params).fetchall()
            return [StatsRow(span, int(at), "", client, kind, int(n)) for at, client, kind, n in rows]

        return await self._read(q)
