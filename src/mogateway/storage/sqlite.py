"""The embedded journal: SQLite in WAL mode, one writer thread, group commit.

Every write goes to one thread that owns the write connection. It takes all the writes waiting for it,
runs them in one transaction and commits once — one fsync for the whole group with
``synchronous=FULL`` — and only then resolves the callers' futures. Should one write fail, the group is
rolled back and each write runs again alone, so one bad write cannot spoil the others. That is what
lets the gateway acknowledge a source only after its MO is on disk while still storing thousands of
MOs a second. Reads use their own connections in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from mogateway.core.timeline import EventKind, State
from mogateway.storage.journal import (
    Change,
    ClientRecord,
    Event,
    MessageFilter,
    MessageRecord,
    NewMessage,
    StoreResult,
)

__all__ = ["SqliteJournal"]

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    origin TEXT NOT NULL,
    source_id TEXT,
    shortcode TEXT NOT NULL,
    msisdn TEXT NOT NULL,
    message TEXT NOT NULL,
    received_at REAL NOT NULL,
    stored_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL,
    cc INTEGER, ndc INTEGER, sn INTEGER,
    operator TEXT NOT NULL DEFAULT '',
    circle TEXT NOT NULL DEFAULT '',
    client_id TEXT,
    reply_text TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_received ON messages (received_at);
CREATE INDEX IF NOT EXISTS messages_msisdn ON messages (msisdn, received_at);
CREATE INDEX IF NOT EXISTS messages_shortcode ON messages (shortcode, received_at);
CREATE INDEX IF NOT EXISTS messages_unfinished ON messages (state, updated_at)
    WHERE state IN ('queued', 'dispatching', 'answered');
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_message ON events (message_id, seq);
CREATE TABLE IF NOT EXISTS reply_refs (ref TEXT PRIMARY KEY, message_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS clients (
    id TEXT PRIMARY KEY,
    doc TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""

_MSG_COLUMNS = (
    "id, origin, source_id, shortcode, msisdn, message, received_at, stored_at, updated_at, state, "
    "cc, ndc, sn, operator, circle, client_id, reply_text"
)
_UNFINISHED = ("queued", "dispatching", "answered")
_SYNC_MODES = {"full": "FULL", "normal": "NORMAL"}
_MAX_GROUP = 2000


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _row_to_message(row: Sequence[Any]) -> MessageRecord:
    return MessageRecord(
        id=row[0],
        origin=row[1],
        source_id=row[2],
        shortcode=row[3],
        msisdn=row[4],
        message=row[5],
        received_at=row[6],
        stored_at=row[7],
        updated_at=row[8],
        state=State(row[9]),
        cc=row[10],
        ndc=row[11],
        sn=row[12],
        operator=row[13],
        circle=row[14],
        client_id=row[15],
        reply_text=row[16],
    )


def _client_doc(client: ClientRecord) -> str:
    return orjson.dumps(
        {
            "id": client.id,
            "name": client.name,
            "shortcodes": client.shortcodes,
            "keywords": client.keywords,
            "callback_url": client.callback_url,
            "token": client.token,
            "timeout_s": client.timeout_s,
            "max_concurrency": client.max_concurrency,
            "tsunix_unit": client.tsunix_unit,
            "unescape_newlines": client.unescape_newlines,
            "created_at": client.created_at,
            "updated_at": client.updated_at,
            "extra": client.extra,
        }
    ).decode()


def _client_from_doc(doc: str) -> ClientRecord:
    return ClientRecord(**orjson.loads(doc))


class _Writer(threading.Thread):
    """The one thread that writes. Jobs are callables taking the connection."""

    def __init__(self, path: str, synchronous: str, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(name="journal-writer", daemon=True)
        self._path = path
        self._sync = synchronous
        self._loop = loop
        self.jobs: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]] | None]
        self.jobs = queue.SimpleQueue()
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = _connect(self._path)
            conn.execute(f"PRAGMA synchronous={self._sync}")
            conn.executescript(_SCHEMA)
        except BaseException as exc:  # reported to open()
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        stop = False
        while not stop:
            first = self.jobs.get()
            if first is None:
                break
            group = [first]
            while len(group) < _MAX_GROUP:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                group.append(job)
            self._run_group(conn, group)
        conn.close()

    def _run_group(
        self,
        conn: sqlite3.Connection,
        group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]],
    ) -> None:
        # Fast path: the whole group in one transaction, one commit. Jobs are written not to fail; if
        # one does, the group is rolled back and every job runs again in a transaction of its own, so
        # the failure stays with the job that caused it.
        try:
            conn.execute("BEGIN IMMEDIATE")
            values = [fn(conn) for fn, _ in group]
            conn.execute("COMMIT")
        except Exception:
            self._rollback(conn)
            results = [self._run_alone(conn, fn, fut) for fn, fut in group]
        else:
            results = [(fut, True, value) for (_, fut), value in zip(group, values, strict=True)]
        self._loop.call_soon_threadsafe(_resolve_all, results)

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _run_alone(
        self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any], fut: asyncio.Future[Any]
    ) -> tuple[asyncio.Future[Any], bool, Any]:
        try:
            conn.execute("BEGIN IMMEDIATE")
            value = fn(conn)
            conn.execute("COMMIT")
        except Exception as exc:
            log.warning("journal write failed: %s: %s", type(exc).__name__, exc)
            self._rollback(conn)
            return fut, False, exc
        return fut, True, value


def _resolve_all(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in results:
        if fut.done():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


class SqliteJournal:
    """The Journal on one SQLite file (see module docstring for how writes are grouped)."""

    def __init__(self, path: str | Path, synchronous: str = "full") -> None:
        self.path = str(path)
        self._sync = _SYNC_MODES[synchronous]
        self._writer: _Writer | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        writer = _Writer(self.path, self._sync, asyncio.get_running_loop())
        writer.start()
        await asyncio.to_thread(writer.ready.wait)
        if writer.error is not None:
            raise writer.error
        self._writer = writer
        version = await self._write(self._check_version)
        log.debug("journal %s schema version %s", self.path, version)

    @staticmethod
    def _check_version(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return SCHEMA_VERSION
        found = int(row[0])
        if found > SCHEMA_VERSION:
            raise RuntimeError(
                f"journal {conn} has schema version {found}, newer than this mogateway ({SCHEMA_VERSION})"
            )
        return found

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.jobs.put(None)
            await asyncio.to_thread(writer.join)
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
        self._writer.jobs.put((fn, fut))
        return fut

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(lambda: fn(self._reader()))

    # ------------------------------------------------------------------ messages

    async def store(self, messages: Sequence[NewMessage]) -> list[StoreResult]:
        if not messages:
            return []
        now = time.time()
        rows = [
            (
                m.id,
                m.origin,
                m.source_id,
                m.shortcode,
                m.msisdn,
                m.message,
                m.received_at,
                now,
                now,
                m.state.value,
                m.cc,
                m.ndc,
                m.sn,
                m.operator,
                m.circle,
            )
            for m in messages
        ]

        def job(conn: sqlite3.Connection) -> list[StoreResult]:
            results: list[StoreResult] = []
            events: list[tuple[str, float, str, str]] = []
            insert = conn.execute
            for m, row in zip(messages, rows, strict=True):
                cur = insert(
                    "INSERT INTO messages (id, origin, source_id, shortcode, msisdn, message, received_at, "
                    "stored_at, updated_at, state, cc, ndc, sn, operator, circle) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                    row,
                )
                if cur.rowcount == 1:
                    kind = EventKind.REJECTED if m.state is State.REJECTED else EventKind.RECEIVED
                    data: dict[str, Any] = {"origin": m.origin, "stored_at": now}
                    if m.source_id is not None:
                        data["source_id"] = m.source_id
                    if m.notes:
                        data["notes"] = list(m.notes)
                    if m.state is State.REJECTED:
                        data["reason"] = m.reason
                        data["field"] = m.reason_field
                    events.append((m.id, m.received_at, kind.value, orjson.dumps(data).decode()))
                    results.append(StoreResult(m.id, m.state, False, m.reason, m.reason_field))
                else:
                    found = conn.execute("SELECT state FROM messages WHERE id=?", (m.id,)).fetchone()
                    reason, field = "", ""
                    if found[0] == State.REJECTED.value:
                        ev = conn.execute(
                            "SELECT data FROM events WHERE message_id=? AND kind='rejected' LIMIT 1", (m.id,)
                        ).fetchone()
                        if ev is not None:
                            info = orjson.loads(ev[0])
                            reason, field = info.get("reason", ""), info.get("field", "")
                    results.append(StoreResult(m.id, State(found[0]), True, reason, field))
            conn.executemany("INSERT INTO events (message_id, at, kind, data) VALUES (?,?,?,?)", events)
            return results

        return await self._write(job)

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        if not changes:
            return []
        now = time.time()

        def job(conn: sqlite3.Connection) -> list[bool]:
            applied: list[bool] = []
            events: list[tuple[str, float, str, str]] = []
            refs: list[tuple[str, str]] = []
            for ch in changes:
                if ch.state is not None or ch.expect is not None:
                    sets = ["updated_at=?"]
                    params: list[Any] = [now]
                    if ch.state is not None:
                        sets.append("state=?")
                        params.append(ch.state.value)
                    if ch.client_id is not None:
                        sets.append("client_id=?")
                        params.append(ch.client_id)
                    if ch.reply_text is not None:
                        sets.append("reply_text=?")
                        params.append(ch.reply_text)
                    sql = f"UPDATE messages SET {', '.join(sets)} WHERE id=?"
                    params.append(ch.message_id)
                    if ch.expect is not None:
                        sql += f" AND state IN ({','.join('?' * len(ch.expect))})"
                        params.extend(s.value for s in ch.expect)
                    if conn.execute(sql, params).rowcount != 1:
                        applied.append(False)
                        continue
                applied.append(True)
                for ev in ch.events:
                    events.append((ch.message_id, ev.at, ev.kind.value, orjson.dumps(ev.data).decode()))
                refs.extend((ref, ch.message_id) for ref in ch.reply_refs)
            if events:
                conn.executemany("INSERT INTO events (message_id, at, kind, data) VALUES (?,?,?,?)", events)
            if refs:
                conn.executemany("INSERT OR REPLACE INTO reply_refs VALUES (?,?)", refs)
            return applied

        return await self._write(job)

    async def record_delivery(self, ref: str, status: str, detail: str) -> str | None:
        now = time.time()
        delivered = status == "delivered"

        def job(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT message_id FROM reply_refs WHERE ref=?", (ref,)).fetchone()
            if row is None:
                return None
            message_id: str = row[0]
            data = orjson.dumps({"ref": ref, "status": status, "detail": detail}).decode()
            conn.execute(
                "INSERT INTO events (message_id, at, kind, data) VALUES (?,?,?,?)",
                (message_id, now, EventKind.DELIVERY.value, data),
            )
            # An undelivered part makes the reply undelivered; a later "delivered" for another part
            # must not hide it.
            if delivered:
                conn.execute(
                    "UPDATE messages SET state='delivered', updated_at=? WHERE id=? AND state='replied'",
                    (now, message_id),
                )
            else:
                conn.execute(
                    "UPDATE messages SET state='undelivered', updated_at=? WHERE id=? "
                    "AND state IN ('replied', 'delivered')",
                    (now, message_id),
                )
            return message_id

        return await self._write(job)

    async def get(self, message_id: str) -> MessageRecord | None:
        def q(conn: sqlite3.Connection) -> MessageRecord | None:
            row = conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages WHERE id=?", (message_id,)).fetchone()
            return None if row is None else _row_to_message(row)

        return await self._read(q)

    async def timeline(self, message_id: str) -> list[Event]:
        def q(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT kind, at, data FROM events WHERE message_id=? ORDER BY seq", (message_id,)
            ).fetchall()
            return [Event(EventKind(k), at, orjson.loads(d)) for k, at, d in rows]

        return await self._read(q)

    async def find(self, where: MessageFilter) -> list[MessageRecord]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("shortcode", where.shortcode),
            ("msisdn", where.msisdn),
            ("state", where.state.value if where.state else None),
        ):
            if value is not None:
                clauses.append(f"{column}=?")
                params.append(value)
        if where.since is not None:
            clauses.append("received_at>=?")
            params.append(where.since)
        if where.until is not None:
            clauses.append("received_at<?")
            params.append(where.until)
        sql = f"SELECT {_MSG_COLUMNS} FROM messages"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY received_at DESC, id DESC LIMIT ?"
        params.append(where.limit)

        def q(conn: sqlite3.Connection) -> list[MessageRecord]:
            return [_row_to_message(r) for r in conn.execute(sql, params).fetchall()]

        return await self._read(q)

    async def unfinished(self, limit: int, older_than: float | None = None) -> list[MessageRecord]:
        sql = f"SELECT {_MSG_COLUMNS} FROM messages WHERE state IN ('queued','dispatching','answered')"
        params: list[Any] = []
        if older_than is not None:
            sql += " AND updated_at<?"
            params.append(older_than)
        sql += " ORDER BY updated_at LIMIT ?"
        params.append(limit)

        def q(conn: sqlite3.Connection) -> list[MessageRecord]:
            return [_row_to_message(r) for r in conn.execute(sql, params).fetchall()]

        return await self._read(q)

    async def counts_by_state(self) -> dict[str, int]:
        def q(conn: sqlite3.Connection) -> dict[str, int]:
            return dict(conn.execute("SELECT state, count(*) FROM messages GROUP BY state").fetchall())

        return await self._read(q)

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        doc = _client_doc(client)

        def job(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO clients VALUES (?,?,?) ON CONFLICT (id) DO UPDATE SET doc=excluded.doc, "
                "updated_at=excluded.updated_at",
                (client.id, doc, client.updated_at),
            )

        await self._write(job)

    async def get_client(self, client_id: str) -> ClientRecord | None:
        def q(conn: sqlite3.Connection) -> ClientRecord | None:
            row = conn.execute("SELECT doc FROM clients WHERE id=?", (client_id,)).fetchone()
            return None if row is None else _client_from_doc(row[0])

        return await self._read(q)

    async def list_clients(self) -> list[ClientRecord]:
        def q(conn: sqlite3.Connection) -> list[ClientRecord]:
            rows = conn.execute("SELECT doc FROM clients ORDER BY id").fetchall()
            return [_client_from_doc(r[0]) for r in rows]

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
