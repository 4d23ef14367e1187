"""The journal on PostgreSQL (asyncpg), for several gateway nodes sharing one database.

Writes are grouped like the SQLite journal's: ``store`` and ``apply`` calls wait in one queue, and a few
writer tasks each take everything waiting, merge it into a handful of array statements (``unnest``) and
commit it in one transaction — one WAL flush for the whole group, a few round trips instead of one per
row. Only after the commit are the callers' futures resolved, so "stored" still means durable. When a
merged group fails (a deadlock between two groups updating the same messages, a bad value), each call
of the group is run again on its own, so one caller's failure is never another's.

Compare-and-set (``Change.expect``) is an ``UPDATE ... WHERE state = ANY(expected)``: under READ
COMMITTED PostgreSQL re-checks that condition against the newest row version after waiting for a
concurrent writer, so of two nodes recording an outcome for the same message exactly one succeeds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson

from mogateway.core.timeline import EventKind, State
from mogateway.storage import migrations
from mogateway.storage.journal import (
    MESSAGE_COLUMNS,
    Change,
    ClientRecord,
    Event,
    MessageFilter,
    MessageRecord,
    NewMessage,
    StoreResult,
    message_from_row,
)

__all__ = ["PostgresJournal", "redact_url"]

log = logging.getLogger(__name__)

_MAX_GROUP = 5000  # messages or changes merged into one transaction
_RETRIES = 3

_INSERT_MESSAGES = """
INSERT INTO messages (id, origin, source_id, shortcode, msisdn, message, received_at, stored_at,
                      updated_at, state, cc, ndc, sn, operator, circle)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::float8[], $8::float8[], $8::float8[], $9::text[], $10::int[], $11::int[],
                     $12::int8[], $13::text[], $14::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
_EXISTING = """
SELECT m.id, m.state,
       (SELECT e.data FROM events e WHERE e.message_id = m.id AND e.kind = 'rejected' ORDER BY e.seq LIMIT 1)
FROM messages m WHERE m.id = ANY($1::text[])
"""
_INSERT_EVENTS = """
INSERT INTO events (message_id, at, kind, data)
SELECT m, a, k, d::jsonb
FROM unnest($1::text[], $2::float8[], $3::text[], $4::text[]) WITH ORDINALITY AS t(m, a, k, d, o)
ORDER BY o
"""
_COMPARE_AND_SET = """
UPDATE messages AS m SET
    state = coalesce(c.state, m.state),
    client_id = coalesce(c.client_id, m.client_id),
    reply_text = coalesce(c.reply_text, m.reply_text),
    updated_at = c.now
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::float8[])
     AS c(id, state, client_id, reply_text, expect, now)
WHERE m.id = c.id AND (c.expect IS NULL OR m.state = ANY(string_to_array(c.expect, ',')))
RETURNING m.id
"""
_UPSERT_REFS = """
INSERT INTO reply_refs (ref, message_id) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (ref) DO UPDATE SET message_id = excluded.message_id
"""


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _event_data(m: NewMessage, stored_at: float) -> dict[str, Any]:
    """The data of a new message's first event: the same keys the SQLite journal writes."""
    data: dict[str, Any] = {"origin": m.origin, "stored_at": stored_at}
    if m.source_id is not None:
        data["source_id"] = m.source_id
    if m.notes:
        data["notes"] = list(m.notes)
    if m.state is State.REJECTED:
        data["reason"] = m.reason
        data["field"] = m.reason_field
    return data


@dataclasses.dataclass(slots=True)
class _Job:
    """One ``store`` or ``apply`` call waiting for a writer."""

    messages: Sequence[NewMessage] | None
    changes: Sequence[Change] | None
    now: float
    future: asyncio.Future[Any]

    @property
    def size(self) -> int:
        return len(self.messages or self.changes or ())


class _Events:
    """Event rows collected for one ``INSERT ... unnest`` (kept in the order they were added)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.ats: list[float] = []
        self.kinds: list[str] = []
        self.datas: list[str] = []

    def add(self, message_id: str, at: float, kind: str, data: dict[str, Any]) -> None:
        self.ids.append(message_id)
        self.ats.append(at)
        self.kinds.append(kind)
        self.datas.append(orjson.dumps(data).decode())

    async def insert(self, conn: Any) -> None:
        if self.ids:
            await conn.execute(_INSERT_EVENTS, self.ids, self.ats, self.kinds, self.datas)


class PostgresJournal:
    """The Journal on PostgreSQL. ``url`` is a ``postgresql://`` DSN; the schema must be migrated."""

    def __init__(self, url: str, *, writers: int = 4, pool_size: int = 10, connect_timeout_s: float = 10.0):
        self.url = url
        self._writers_wanted = max(1, writers)
        self._pool_size = max(pool_size, writers + 2)
        self._connect_timeout = connect_timeout_s
        self._pool: Any = None
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._writers: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        where = redact_url(self.url)
        try:
            pool = await asyncpg.create_pool(
                self.url, min_size=1, max_size=self._pool_size, timeout=self._connect_timeout
            )
        except (TimeoutError, OSError) as exc:
            raise RuntimeError(f"cannot connect to the journal database {where}: {exc}") from None
        except asyncpg.PostgresError as exc:
            raise RuntimeError(f"the journal database {where} refused the connection: {exc}") from None
        try:
            async with pool.acquire() as conn:
                version = await migrations.check(conn, where)
        except BaseException:
            await pool.close()
            raise
        log.debug("journal %s schema version %d", where, version)
        self._pool = pool
        self._jobs = asyncio.Queue()
        self._writers = [
            asyncio.create_task(self._write_forever(), name=f"journal-writer-{n}")
            for n in range(self._writers_wanted)
        ]

    async def close(self) -> None:
        # Writers finish what is queued before they see their stop marker.
        for _ in self._writers:
            self._jobs.put_nowait(None)
        await asyncio.gather(*self._writers, return_exceptions=True)
        self._writers = []
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require_pool(self) -> Any:
        if self._pool is None:
            raise RuntimeError("journal is not open")
        return self._pool

    # ------------------------------------------------------------------ group commit

    def _submit(self, job: _Job) -> asyncio.Future[Any]:
        if not self._writers:
            raise RuntimeError("journal is not open")
        self._jobs.put_nowait(job)
        return job.future

    async def _write_forever(self) -> None:
        jobs = self._jobs
        while True:
            first = await jobs.get()
            if first is None:
                return
            group = [first]
            size = first.size
            stop = False
            while size < _MAX_GROUP and not jobs.empty():
                job = jobs.get_nowait()
                if job is None:
                    stop = True
                    break
                group.append(job)
                size += job.size
            await self._run_group(group)
            if stop:
                return

    async def _run_group(self, group: list[_Job]) -> None:
        try:
            results = await self._transaction(group)
        except Exception as exc:
            if len(group) == 1:
                _fail(group[0], exc)
                return
            # Run each call alone so that one bad call (or a deadlock) fails only itself.
            for job in group:
                try:
                    (result,) = await self._transaction([job])
                except Exception as single:
                    _fail(job, single)
                else:
                    _succeed(job, result)
            return
        for job, result in zip(group, results, strict=True):
            _succeed(job, result)

    async def _transaction(self, group: list[_Job]) -> list[Any]:
        pool = self._require_pool()
        for attempt in range(1, _RETRIES + 1):
            try:
                async with pool.acquire() as conn, conn.transaction():
                    return await self._write_group(conn, group)
            except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
                if attempt == _RETRIES:
                    raise
                await asyncio.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    async def _write_group(self, conn: Any, group: list[_Job]) -> list[Any]:
        events = _Events()
        stores = [job for job in group if job.messages is not None]
        applies = [job for job in group if job.changes is not None]
        stored = await self._store_rows(conn, stores, events) if stores else {}
        applied = await self._apply_rows(conn, applies, events) if applies else {}
        await events.insert(conn)
        return [stored[id(job)] if job.messages is not None else applied[id(job)] for job in group]

    # ------------------------------------------------------------------ messages

    async def store(self, messages: Sequence[NewMessage]) -> list[StoreResult]:
        if not messages:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(messages, None, time.time(), loop.create_future())
        result: list[StoreResult] = await self._submit(job)
        return result

    async def _store_rows(self, conn: Any, jobs: list[_Job], events: _Events) -> dict[int, list[StoreResult]]:
        flat = [(job, m) for job in jobs for m in job.messages or ()]
        columns: list[list[Any]] = [[] for _ in range(14)]
        for job, m in flat:
            for column, value in zip(
                columns,
                (
                    m.id,
                    m.origin,
                    m.source_id,
                    m.shortcode,
                    m.msisdn,
                    m.message,
                    m.received_at,
                    job.now,
                    m.state.value,
                    m.cc,
                    m.ndc,
                    m.sn,
                    m.operator,
                    m.circle,
                ),
                strict=True,
            ):
                column.append(value)
        inserted = {row[0] for row in await conn.fetch(_INSERT_MESSAGES, *columns)}
        # The first occurrence of an id in the group is the one that was inserted; later ones (and ids
        # stored before) are duplicates and get the stored message's state.
        fresh: set[int] = set()
        claimed: set[str] = set()
        for n, (_job, m) in enumerate(flat):
            if m.id in inserted and m.id not in claimed:
                claimed.add(m.id)
                fresh.add(n)
        duplicates = [m.id for n, (_job, m) in enumerate(flat) if n not in fresh]
        existing: dict[str, tuple[State, str, str]] = {}
        if duplicates:
            for row_id, state, rejected in await conn.fetch(_EXISTING, duplicates):
                info = orjson.loads(rejected) if rejected is not None else {}
                existing[row_id] = (State(state), info.get("reason", ""), info.get("field", ""))
        out: dict[int, list[StoreResult]] = {id(job): [] for job in jobs}
        for n, (job, m) in enumerate(flat):
            if n in fresh:
                kind = EventKind.REJECTED if m.state is State.REJECTED else EventKind.RECEIVED
                events.add(m.id, m.received_at, kind.value, _event_data(m, job.now))
                out[id(job)].append(StoreResult(m.id, m.state, False, m.reason, m.reason_field))
            else:
                state, reason, field = existing[m.id]
                out[id(job)].append(StoreResult(m.id, state, True, reason, field))
        return out

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        if not changes:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(None, changes, time.time(), loop.create_future())
        result: list[bool] = await self._submit(job)
        return result

    async def _apply_rows(self, conn: Any, jobs: list[_Job], events: _Events) -> dict[int, list[bool]]:
        flat = [(job, ch) for job in jobs for ch in job.changes or ()]
        applied = [True] * len(flat)
        # One UPDATE may touch a row once, so changes to the same message go to successive rounds, in
        # the order they were given (a later change sees the state an earlier one left).
        rounds: list[list[int]] = []
        round_of: dict[str, int] = {}
        for n, (_job, ch) in enumerate(flat):
            if ch.state is None and ch.expect is None:
                continue
            k = round_of.get(ch.message_id, -1) + 1
            round_of[ch.message_id] = k
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(n)
        for members in rounds:
            params: list[list[Any]] = [[] for _ in range(6)]
            for n in members:
                job, ch = flat[n]
                params[0].append(ch.message_id)
                params[1].append(ch.state.value if ch.state is not None else None)
                params[2].append(ch.client_id)
                params[3].append(ch.reply_text)
                params[4].append(",".join(s.value for s in ch.expect) if ch.expect is not None else None)
                params[5].append(job.now)
            updated = {row[0] for row in await conn.fetch(_COMPARE_AND_SET, *params)}
            for n in members:
                applied[n] = flat[n][1].message_id in updated
        refs: dict[str, str] = {}
        for n, (_job, ch) in enumerate(flat):
            if not applied[n]:
                continue
            for ev in ch.events:
                events.add(ch.message_id, ev.at, ev.kind.value, ev.data)
            for ref in ch.reply_refs:
                refs[ref] = ch.message_id
        if refs:
            await conn.execute(_UPSERT_REFS, list(refs), list(refs.values()))
        out: dict[int, list[bool]] = {id(job): [] for job in jobs}
        for n, (job, _ch) in enumerate(flat):
            out[id(job)].append(applied[n])
        return out

    async def record_delivery(self, ref: str, status: str, detail: str) -> str | None:
        now = time.time()
        pool = self._require_pool()
        async with pool.acquire() as conn, conn.transaction():
            message_id: str | None = await conn.fetchval(
                "SELECT message_id FROM reply_refs WHERE ref=$1", ref
            )
            if message_id is None:
                return None
            data = orjson.dumps({"ref": ref, "status": status, "detail": detail}).decode()
            await conn.execute(
                "INSERT INTO events (message_id, at, kind, data) VALUES ($1, $2, $3, $4::jsonb)",
                message_id,
                now,
                EventKind.DELIVERY.value,
                data,
            )
            # An undelivered part makes the reply undelivered; a later "delivered" for another part
            # must not hide it.
            if status == "delivered":
                await conn.execute(
                    "UPDATE messages SET state='delivered', updated_at=$1 WHERE id=$2 AND state='replied'",
                    now,
                    message_id,
                )
            else:
                await conn.execute(
                    "UPDATE messages SET state='undelivered', updated_at=$1 WHERE id=$2 "
                    "AND state IN ('replied', 'delivered')",
                    now,
                    message_id,
                )
            return message_id

    async def get(self, message_id: str) -> MessageRecord | None:
        row = await self._require_pool().fetchrow(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id=$1", message_id
        )
        return None if row is None else message_from_row(row)

    async def timeline(self, message_id: str) -> list[Event]:
        rows = await self._require_pool().fetch(
            "SELECT kind, at, data FROM events WHERE message_id=$1 ORDER BY seq", message_id
        )
        return [Event(EventKind(kind), at, orjson.loads(data)) for kind, at, data in rows]

    async def find(self, where: MessageFilter) -> list[MessageRecord]:
        clauses: list[str] = []
        params: list[Any] = []

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        if where.shortcode is not None:
            clauses.append(f"shortcode={param(where.shortcode)}")
        if where.msisdn is not None:
            clauses.append(f"msisdn={param(where.msisdn)}")
        if where.state is not None:
            clauses.append(f"state={param(where.state.value)}")
        if where.since is not None:
            clauses.append(f"received_at>={param(where.since)}")
        if where.until is not None:
            clauses.append(f"received_at<{param(where.until)}")
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY received_at DESC, id DESC LIMIT {param(where.limit)}"
        return [message_from_row(r) for r in await self._require_pool().fetch(sql, *params)]

    async def unfinished(self, limit: int, older_than: float | None = None) -> list[MessageRecord]:
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE state IN ('queued','dispatching','answered')"
        params: list[Any] = []
        if older_than is not None:
            params.append(older_than)
            sql += " AND updated_at<$1"
        params.append(limit)
        sql += f" ORDER BY updated_at LIMIT ${len(params)}"
        return [message_from_row(r) for r in await self._require_pool().fetch(sql, *params)]

    async def counts_by_state(self) -> dict[str, int]:
        rows = await self._require_pool().fetch("SELECT state, count(*) FROM messages GROUP BY state")
        return {state: int(n) for state, n in rows}

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        doc = orjson.dumps(dataclasses.asdict(client)).decode()
        await self._require_pool().execute(
            "INSERT INTO clients (id, doc, updated_at) VALUES ($1, $2::jsonb, $3) "
            "ON CONFLICT (id) DO UPDATE SET doc=excluded.doc, updated_at=excluded.updated_at",
            client.id,
            doc,
            client.updated_at,
        )

    async def get_client(self, client_id: str) -> ClientRecord | None:
        doc = await self._require_pool().fetchval("SELECT doc FROM clients WHERE id=$1", client_id)
        return None if doc is None else ClientRecord(**orjson.loads(doc))

    async def list_clients(self) -> list[ClientRecord]:
        rows = await self._require_pool().fetch("SELECT doc FROM clients ORDER BY id")
        return [ClientRecord(**orjson.loads(r[0])) for r in rows]

    async def delete_client(self, client_id: str) -> bool:
        now = time.time()
        async with self._require_pool().acquire() as conn, conn.transaction():
            deleted = await conn.fetchval("DELETE FROM clients WHERE id=$1 RETURNING id", client_id)
            if deleted is None:
                return False
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES ('clients_deleted_at', $1) "
                "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                repr(now),
            )
            return True

    async def clients_version(self) -> float:
        value = await self._require_pool().fetchval(
            "SELECT greatest(coalesce((SELECT max(updated_at) FROM clients), 0), "
            "coalesce((SELECT value::float8 FROM settings WHERE key='clients_deleted_at'), 0))"
        )
        return float(value or 0.0)

    # ------------------------------------------------------------------ settings

    async def get_setting(self, key: str) -> str | None:
        value = await self._require_pool().fetchval("SELECT value FROM settings WHERE key=$1", key)
        return None if value is None else str(value)

    async def set_setting_if_absent(self, key: str, value: str) -> str:
        # Two statements, not one: the SELECT must see a row another node committed while the INSERT
        # waited on it, which a single statement's snapshot would not.
        async with self._require_pool().acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, value
            )
            return str(await conn.fetchval("SELECT value FROM settings WHERE key=$1", key))


def _succeed(job: _Job, result: Any) -> None:
    if not job.future.done():
        job.future.set_result(result)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(exc)
