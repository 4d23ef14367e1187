"""The journal on PostgreSQL (asyncpg), for several gateway nodes sharing one database.

Writes are grouped like the SQLite journal's: ``store`` and ``apply`` calls wait in one queue, and a few
writer tasks each take everything waiting, merge it into a handful of array statements (``unnest``) and
commit it in one transaction — one WAL flush for the whole group, a few round trips instead of one per
row. Only after the commit are the callers' futures resolved, so "stored" still means durable. When a
merged group fails (a deadlock between two groups updating the same messages, a bad value), each call
of the group is run again on its own, so one caller's failure is never another's.

A change is an ``UPDATE ... WHERE <allowed states> RETURNING id`` whose condition and new state come from
``core.timeline`` through ``storage.schema`` (the same rules as the SQLite journal): under READ COMMITTED
PostgreSQL re-checks that condition against the newest row version after waiting for a concurrent
writer, so of two nodes recording an outcome for the same message exactly one succeeds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson

from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message, Rejection
from mogateway.core.ports import MessageFilter, MessageRecord, StatsRow, Stored
from mogateway.core.repeats import find_repeats, repeat_lookups
from mogateway.core.timeline import Change, Event, EventKind, State, Step, step_for
from mogateway.edges.storage import migrations, schema
from mogateway.edges.storage.client_documents import client_document, client_from_document
from mogateway.edges.storage.console_sessions import PostgresConsoleSessions
from mogateway.edges.storage.sealing import Sealer

__all__ = ["PostgresJournal", "redact_url"]

log = logging.getLogger(__name__)

_MAX_GROUP = 5000  # messages or changes merged into one transaction
_RETRIES = 3

_INSERT_MESSAGES = f"""
INSERT INTO messages ({", ".join(schema.INSERT_COLUMNS)})
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::float8[], $8::float8[], $9::int[], $10::int[], $11::int8[], $12::text[],
                     $13::text[], $14::text[], $15::text[], $16::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
_INSERT_STATES = f"""
INSERT INTO message_states ({", ".join(schema.STATE_COLUMNS)})
SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::text[], $5::text[], $6::int[])
"""
_EXISTING = (
    "SELECT m.id, s.state, m.rejection_field, m.rejection_reason "
    f"FROM {schema.MESSAGES_FROM} WHERE m.id = ANY($1::text[])"
)
# MOs that may repeat an earlier one (SMPP): every writer (worker, node) that stores an MO of a number
# takes that number's lock first, in one order, so the one that reads the number's recent MOs second
# sees the first one's (core.repeats.find_repeats). Transaction-scoped: released at commit.
_LOCK_NUMBERS = """
SELECT count(pg_advisory_xact_lock(k))
FROM (SELECT DISTINCT hashtextextended(n, 20261126) AS k FROM unnest($1::text[]) AS n ORDER BY k) AS keys
"""
_EARLIER_OF_FAMILIES = """
SELECT m.id, m.msisdn, m.source_id, m.received_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) AS k(msisdn, low, high, since)
JOIN messages AS m ON m.msisdn = k.msisdn
    AND m.source_id COLLATE "C" >= k.low AND m.source_id COLLATE "C" < k.high
WHERE m.received_at >= k.since
"""
_INSERT_EVENTS = """
INSERT INTO events (message_id, at, kind, data)
SELECT m, a, k, d::jsonb
FROM unnest($1::text[], $2::float8[], $3::text[], $4::text[]) WITH ORDINALITY AS t(m, a, k, d, o)
ORDER BY o
"""
_UPSERT_REFS = """
INSERT INTO reply_refs (ref, message_id) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (ref) DO UPDATE SET message_id = excluded.message_id
"""


def _update_sql(step: Step) -> str:
    """The compare-and-set UPDATE of one timeline step over many messages (see storage.schema)."""
    sql = schema.state_sql(step, "s.state")
    return (
        f"UPDATE message_states AS s SET state = {sql.after}, updated_at = $1, "
        "client_id = coalesce(c.client_id, s.client_id), reply_text = coalesce(c.reply_text, s.reply_text) "
        "FROM unnest($2::text[], $3::text[], $4::text[]) AS c(id, client_id, reply_text) "
        f"WHERE s.id = c.id AND {sql.allowed} RETURNING s.id"
    )


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclasses.dataclass(slots=True)
class _Job:
    """One ``store`` or ``apply`` call waiting for a writer."""

    messages: Sequence[Message] | None
    changes: Sequence[Change] | None
    now: float
    future: asyncio.Future[Any]
    owners: Sequence[int] | None = None
    repeat_since: Sequence[float | None] | None = None

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

    def add(self, message_id: str, event: Event) -> None:
        self.ids.append(message_id)
        self.ats.append(event.at)
        self.kinds.append(event.kind.value)
        self.datas.append(schema.event_json(event))

    async def insert(self, conn: Any) -> None:
        if self.ids:
            await conn.execute(_INSERT_EVENTS, self.ids, self.ats, self.kinds, self.datas)


class PostgresJournal:
    """The Journal on PostgreSQL. ``url`` is a ``postgresql://`` DSN; the schema must be migrated."""

    def __init__(
        self,
        url: str,
        *,
        writers: int = 4,
        pool_size: int = 10,
        connect_timeout_s: float = 10.0,
        sealer: Sealer | None = None,
    ):
        self.url = url
        #: Seals client secrets on write and opens them on read (storage/sealing.py).
        self.sealer = sealer or Sealer()
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

    async def store(
        self,
        messages: Sequence[Message],
        owners: Sequence[int] | None = None,
        repeat_since: Sequence[float | None] | None = None,
    ) -> list[Stored]:
        if not messages:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(messages, None, time.time(), loop.create_future(), owners, repeat_since)
        result: list[Stored] = await self._submit(job)
        return result

    async def _store_rows(self, conn: Any, jobs: list[_Job], events: _Events) -> dict[int, list[Stored]]:
        flat = [(job, m) for job in jobs for m in job.messages or ()]
        owners = [o for job in jobs for o in (job.owners or [0] * job.size)]
        since = [s for job in jobs for s in (job.repeat_since or [None] * job.size)]
        if any(s is not None for s in since):
            flat = await self._name_repeats(conn, flat, since)
        columns: list[list[Any]] = [[] for _ in schema.INSERT_COLUMNS]
        first_of: dict[str, int] = {}
        for n, (job, m) in enumerate(flat):
            if m.id in first_of:
                continue
            first_of[m.id] = n
            for column, value in zip(columns, schema.message_row(m, job.now), strict=True):
                column.append(value)
        inserted = {row[0] for row in await conn.fetch(_INSERT_MESSAGES, *columns)}
        states: list[list[Any]] = [[] for _ in schema.STATE_COLUMNS]
        for mid, n in first_of.items():
            if mid in inserted:
                job, m = flat[n]
                state = State.QUEUED if m.accepted else State.REJECTED
                row = schema.state_row(mid, state, job.now, owners[n])
                for column, value in zip(states, row, strict=True):
                    column.append(value)
        if states[0]:
            await conn.execute(_INSERT_STATES, *states)
        duplicates = [m.id for n, (_job, m) in enumerate(flat) if m.id not in inserted or first_of[m.id] != n]
        existing: dict[str, tuple[State, Rejection | None]] = {}
        if duplicates:
            for row_id, state, field, reason in await conn.fetch(_EXISTING, duplicates):
                existing[row_id] = (State(state), None if field is None else Rejection(field, reason or ""))
        out: dict[int, list[Stored]] = {id(job): [] for job in jobs}
        for n, (job, m) in enumerate(flat):
            if m.id in inserted and first_of[m.id] == n:
                state = State.QUEUED if m.accepted else State.REJECTED
                out[id(job)].append(Stored(m.id, state, False, m.rejection))
            else:
                state, rejection = existing[m.id]
                out[id(job)].append(Stored(m.id, state, True, rejection))
        return out

    @staticmethod
    async def _name_repeats(
        conn: Any, flat: list[tuple[_Job, Message]], since: list[float | None]
    ) -> list[tuple[_Job, Message]]:
        """``flat`` with each message that repeats an earlier MO (its number, and its SMSC id or content)
        given that MO's id (``core.repeats.find_repeats``)."""
        batch = [(m, s) for (_job, m), s in zip(flat, since, strict=True)]
        lookups = repeat_lookups(batch)
        if not lookups:
            return flat
        await conn.fetchval(_LOCK_NUMBERS, sorted({msisdn for msisdn, *_ in lookups}))
        columns = [list(column) for column in zip(*lookups, strict=True)]
        earlier = await conn.fetch(_EARLIER_OF_FAMILIES, *columns)
        named = list(flat)
        for n, first_id in find_repeats(batch, [tuple(row) for row in earlier]).items():
            job, m = flat[n]
            named[n] = (job, m.with_changes(id=first_id))
        return named

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        if not changes:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(None, changes, time.time(), loop.create_future())
        result: list[bool] = await self._submit(job)
        return result

    async def _apply_rows(self, conn: Any, jobs: list[_Job], events: _Events) -> dict[int, list[bool]]:
        flat = [(job, ch) for job in jobs for ch in job.changes or ()]
        applied = [False] * len(flat)
        now = max((job.now for job in jobs), default=time.time())
        for members in schema.rounds(flat, key=lambda pair: pair[1].message_id):
            by_step: dict[Step, list[int]] = {}
            for n in members:
                by_step.setdefault(flat[n][1].step, []).append(n)
            for step, indexes in by_step.items():
                chs = [flat[n][1] for n in indexes]
                updated = {
                    row[0]
                    for row in await conn.fetch(
                        _update_sql(step),
                        now,
                        [ch.message_id for ch in chs],
                        [ch.client_id for ch in chs],
                        [ch.reply_text for ch in chs],
                    )
                }
                for n in indexes:
                    applied[n] = flat[n][1].message_id in updated
        refs: dict[str, str] = {}
        for n, (_job, ch) in enumerate(flat):
            if not applied[n]:
                continue
            for event in ch.events:
                events.add(ch.message_id, event)
            for ref in ch.reply_refs:
                refs[ref] = ch.message_id
        if refs:
            await conn.execute(_UPSERT_REFS, list(refs), list(refs.values()))
        out: dict[int, list[bool]] = {id(job): [] for job in jobs}
        for n, (job, _ch) in enumerate(flat):
            out[id(job)].append(applied[n])
        return out

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        if not receipts:
            return []
        rows = await self._require_pool().fetch(
            "SELECT ref, message_id FROM reply_refs WHERE ref = ANY($1::text[])",
            list({ref for ref, _, _ in receipts}),
        )
        owners: dict[str, str] = {row["ref"]: row["message_id"] for row in rows}
        now = time.time()
        changes: list[Change] = []
        found: list[str | None] = []
        for ref, status, detail in receipts:
            message_id = owners.get(ref)
            found.append(message_id)
            if message_id is not None:
                event = Event(EventKind.DELIVERY, now, {"ref": ref, "status": status, "detail": detail})
                step_for(event)  # an unknown status raises here, before anything is written
                changes.append(Change(message_id, event))
        await self.apply(changes)
        return found

    async def touch(self, message_ids: Sequence[str]) -> None:
        if message_ids:
            await self._require_pool().execute(
                f"UPDATE message_states SET updated_at=$1 WHERE {schema.UNFINISHED_SQL} "
                "AND id = ANY($2::text[])",
                time.time(),
                list(message_ids),
            )

    async def reassign(self, owners: Mapping[str, int]) -> None:
        if owners:
            await self._require_pool().execute(
                "UPDATE message_states s SET owner=o.owner "
                "FROM unnest($1::text[], $2::int[]) AS o(id, owner) "
                f"WHERE s.id=o.id AND s.{schema.UNFINISHED_SQL}",
                list(owners),
                list(owners.values()),
            )

    async def get(self, message_id: str) -> MessageRecord | None:
        row = await self._require_pool().fetchrow(
            f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} WHERE m.id=$1", message_id
        )
        return None if row is None else schema.record_from_row(row)

    async def timeline(self, message_id: str) -> list[Event]:
        found = await self.history(message_id)
        return [] if found is None else found[1]

    async def history(self, message_id: str) -> tuple[MessageRecord, list[Event]] | None:
        async with (
            self._require_pool().acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),  # one snapshot for both
        ):
            row = await conn.fetchrow(
                f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} WHERE m.id=$1", message_id
            )
            if row is None:
                return None
            rows = await conn.fetch(
                "SELECT kind, at, data FROM events WHERE message_id=$1 ORDER BY seq", message_id
            )
        record = schema.record_from_row(row)
        events = [Event(EventKind(kind), at, orjson.loads(data)) for kind, at, data in rows]
        return record, [schema.first_event(record), *events]

    async def find(self, where: MessageFilter) -> list[MessageRecord]:
        clauses: list[str] = []
        params: list[Any] = []

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        for column, value in (
            ("m.shortcode", where.shortcode),
            ("m.msisdn", where.msisdn),
            ("s.state", where.state.value if where.state else None),
            ("s.client_id", where.client_id),
        ):
            if value is not None:
                clauses.append(f"{column}={param(value)}")
        if where.since is not None:
            clauses.append(f"m.received_at>={param(where.since)}")
        if where.until is not None:
            clauses.append(f"m.received_at<{param(where.until)}")
        if where.before is not None:
            clauses.append(f"(m.received_at, m.id) < ({param(where.before[0])}, {param(where.before[1])})")
        sql = f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM}"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY m.received_at DESC, m.id DESC LIMIT {param(where.limit)}"
        return [schema.record_from_row(r) for r in await self._require_pool().fetch(sql, *params)]

    async def unfinished(
        self, limit: int, *, after: str = "", older_than: float | None = None, owner: int | None = None
    ) -> list[MessageRecord]:
        sql = (
            f"SELECT {schema.MESSAGE_COLUMNS} FROM {schema.MESSAGES_FROM} "
            f"WHERE s.{schema.UNFINISHED_SQL} AND s.id>$1"
        )
        params: list[Any] = [after]
        if older_than is not None:
            params.append(older_than)
            sql += f" AND s.updated_at<${len(params)}"
        if owner is not None:
            params.append(owner)
            sql += f" AND s.owner=${len(params)}"
        params.append(limit)
        sql += f" ORDER BY s.id LIMIT ${len(params)}"
        return [schema.record_from_row(r) for r in await self._require_pool().fetch(sql, *params)]

    async def counts_by_state(self) -> dict[str, int]:
        rows = await self._require_pool().fetch(
            "SELECT state, count(*) FROM message_states GROUP BY state"
        )
        return {state: int(n) for state, n in rows}

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        doc = client_document(client, self.sealer)
        await self._require_pool().execute(
            "INSERT INTO clients (id, doc, updated_at) VALUES ($1, $2::jsonb, $3) "
            "ON CONFLICT (id) DO UPDATE SET doc=excluded.doc, updated_at=excluded.updated_at",
            client.id,
            doc,
            client.updated_at,
        )

    async def get_client(self, client_id: str) -> ClientRecord | None:
        doc = await self._require_pool().fetchval("SELECT doc FROM clients WHERE id=$1", client_id)
        return None if doc is None else client_from_document(doc, self.sealer)

    async def list_clients(self) -> list[ClientRecord]:
        rows = await self._require_pool().fetch("SELECT doc FROM clients ORDER BY id")
        return [client_from_document(r[0], self.sealer) for r in rows]

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

    # ------------------------------------------------------------------ stats

    def console_sessions(self) -> PostgresConsoleSessions:
        """The console's sessions and sign-in throttle, in this journal (storage/console_sessions.py)."""
        return PostgresConsoleSessions(self._require_pool)

    async def write_stats(
        self, rows: Sequence[StatsRow], forget_before: Mapping[int, int] | None = None
    ) -> None:
        async with self._require_pool().acquire() as conn, conn.transaction():
            if rows:
                await conn.execute(
                    "INSERT INTO stats (span, at, node, client, kind, count) SELECT * FROM "
                    "unnest($1::int[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::int8[]) "
                    "ON CONFLICT (span, at, node, client, kind) DO UPDATE SET count=excluded.count",
                    [r.span for r in rows],
                    [r.at for r in rows],
                    [r.node for r in rows],
                    [r.client for r in rows],
                    [r.kind for r in rows],
                    [r.count for r in rows],
                )
            for span, before in (forget_before or {}).items():
                await conn.execute("DELETE FROM stats WHERE span=$1 AND at<$2", span, before)

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
        params: list[Any] = [span, since, until]
        sql = "SELECT {at}, client, kind, sum(count) FROM stats WHERE span=$1 AND at>=$2 AND at<$3"
        if node is not None:
            params.append(node)
            sql += f" AND node=${len(params)}"
        if exclude_node is not None:
            params.append(exclude_node)
            sql += f" AND node<>${len(params)}"
        sql += " GROUP BY at, client, kind" if by_time else " GROUP BY client, kind"
        sql = sql.format(at="at" if by_time else "$2::int8")
        rows = await self._require_pool().fetch(sql, *params)
        return [StatsRow(span, int(at), "", client, kind, int(n)) for at, client, kind, n in rows]


def _succeed(job: _Job, result: Any) -> None:
    if not job.future.done():
        job.future.set_result(result)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(exc)
