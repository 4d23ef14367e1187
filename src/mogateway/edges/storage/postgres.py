"""The journal on PostgreSQL (asyncpg), for several gateway nodes sharing one database.

What the journal does is written once for both engines (``storage.sql_journal``, ``storage.batches``);
here is how it runs on PostgreSQL. Writes are grouped like the SQLite journal's: ``store``, ``apply`` and
receipt calls wait in one queue, and a few writer tasks each take everything waiting, merge the calls
of each kind into one batch (a handful of array statements, ``unnest``) and commit the group in one
transaction — one WAL flush for the whole group, a few round trips instead of one per row. Only after
the commit are the callers' futures resolved, so "stored" still means durable. When a merged group
fails (a deadlock between two groups updating the same messages, a bad value), each call of the group
is run again on its own, so one caller's failure is never another's.

The schema is changed only by ``mogateway migrate`` (``storage.migrations``); a journal checks at open
that the database is at this mogateway's version, so no two nodes race to change it under traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from mogateway.core.redaction import redact_url
from mogateway.edges.storage import batches, migrations
from mogateway.edges.storage.console_sessions import PostgresConsoleSessions
from mogateway.edges.storage.dialect import POSTGRES, Program, run_async
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sql_journal import Batch, SqlJournal

__all__ = ["PostgresJournal", "redact_url"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_MAX_GROUP = 5000  # messages or changes merged into one transaction
#: The advisory lock one node of a cluster holds while it sweeps old messages (service.retention).
_SWEEP_LOCK = 0x6D6F7277  # "morw"; the migrations' lock is another
_RETRIES = 3
#: The order in which a group writes its batches: a change may follow the store of its message.
_ORDER: tuple[Batch, ...] = (batches.store, batches.apply, batches.deliveries)


@dataclasses.dataclass(slots=True)
class _Job:
    """One ``store``, ``apply`` or receipts call waiting for a writer."""

    batch: Batch
    items: Sequence[Any]
    future: asyncio.Future[list[Any]]


class PostgresJournal(SqlJournal):
    """The Journal on PostgreSQL. ``url`` is a ``postgresql://`` DSN; the schema must be migrated."""

    dialect = POSTGRES

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

    def console_sessions(self) -> PostgresConsoleSessions:
        """The console's sessions and sign-in throttle, in this journal (storage/console_sessions.py)."""
        return PostgresConsoleSessions(self._require_pool)

    @contextlib.asynccontextmanager
    async def sweeping(self) -> AsyncIterator[bool]:
        """Yes for one node of the cluster at a time: a session advisory lock, held on a connection of
        the pool for the sweep (released by the server should that connection die)."""
        async with self._require_pool().acquire() as conn:
            held = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", _SWEEP_LOCK))
            try:
                yield held
            finally:
                if held:
                    await conn.execute("SELECT pg_advisory_unlock($1)", _SWEEP_LOCK)

    # ------------------------------------------------------------------ programs

    async def _batch(self, batch: Batch, items: Sequence[Any]) -> list[Any]:
        if not self._writers:
            raise RuntimeError("journal is not open")
        job = _Job(batch, items, asyncio.get_running_loop().create_future())
        self._jobs.put_nowait(job)
        return await job.future

    async def _writing(self, program: Callable[..., Program[T]], *args: Any) -> T:
        async with self._require_pool().acquire() as conn, conn.transaction():
            return await run_async(conn, program(POSTGRES, *args))

    async def _reading(self, program: Callable[..., Program[T]], *args: Any, snapshot: bool = False) -> T:
        async with self._require_pool().acquire() as conn:
            if not snapshot:
                return await run_async(conn, program(POSTGRES, *args))
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                return await run_async(conn, program(POSTGRES, *args))

    # ------------------------------------------------------------------ group commit

    async def _write_forever(self) -> None:
        jobs = self._jobs
        while True:
            first = await jobs.get()
            if first is None:
                return
            group = [first]
            size = len(first.items)
            stop = False
            while size < _MAX_GROUP and not jobs.empty():
                job = jobs.get_nowait()
                if job is None:
                    stop = True
                    break
                group.append(job)
                size += len(job.items)
            await self._run_group(group)
            if stop:
                return

    async def _run_group(self, group: list[_Job]) -> None:
        try:
            results = await self._transaction(group)
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0], None, exc)
                return
            # Run each call alone so that one bad call (or a deadlock) fails only itself.
            for job in group:
                try:
                    (result,) = await self._transaction([job])
                except Exception as single:
                    _settle(job, None, single)
                else:
                    _settle(job, result, None)
            return
        for job, result in zip(group, results, strict=True):
            _settle(job, result, None)

    async def _transaction(self, group: list[_Job]) -> list[list[Any]]:
        pool = self._require_pool()
        for attempt in range(1, _RETRIES + 1):
            try:
                async with pool.acquire() as conn, conn.transaction():
                    return await _write_group(conn, group)
            except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
                if attempt == _RETRIES:
                    raise
                await asyncio.sleep(0.01 * attempt)
        raise AssertionError("unreachable")


async def _write_group(conn: Any, group: list[_Job]) -> list[list[Any]]:
    """Each kind of call in the group as one batch, in :data:`_ORDER`; the results of each call."""
    now = time.time()
    results: dict[int, list[Any]] = {}
    for batch in _ORDER:
        jobs = [job for job in group if job.batch is batch]
        if not jobs:
            continue
        flat = [item for job in jobs for item in job.items]
        out = await run_async(conn, batch(POSTGRES, flat, now))
        start = 0
        for job in jobs:
            results[id(job)] = out[start : start + len(job.items)]
            start += len(job.items)
    return [results[id(job)] for job in group]


def _settle(job: _Job, result: list[Any] | None, exc: BaseException | None) -> None:
    if job.future.done():
        return
    if exc is not None:
        job.future.set_exception(exc)
    else:
        job.future.set_result(result or [])
