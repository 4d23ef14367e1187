"""The console's sessions and failed sign-ins in the journal, for both engines (SQLite, PostgreSQL).

What the rows mean, and what is (and is not) in them, is ``api.console.sessions``'s to say; here is
only their SQL. The tables are described in ``storage.schema``; migrations 0008 and 0011 create them
on both engines. Every worker of a gateway and every node of a
cluster reads and writes the same rows, so a sign-in, a sign-out and the throttle hold everywhere and
survive a restart.

Both tables stay bounded: adding a session forgets the expired ones and, past ``keep``, those expiring
soonest; recording a failure forgets the failures older than the throttle's window and, past
``keep``, the oldest ones.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["PostgresConsoleSessions", "SqliteConsoleSessions"]

T = TypeVar("T")

# ------------------------------------------------------------------------------------------ SQLite

_SQLITE_FORGET_EXPIRED = "DELETE FROM console_sessions WHERE expires_at <= ?"
_SQLITE_ADD = (
    "INSERT INTO console_sessions (id_hash, expires_at, flashes, admin_token_tag) VALUES (?, ?, '', ?)"
)
# LIMIT -1 OFFSET n: every row after the first n.
_SQLITE_KEEP = (
    "DELETE FROM console_sessions WHERE id_hash IN "
    "(SELECT id_hash FROM console_sessions ORDER BY expires_at DESC LIMIT -1 OFFSET ?)"
)
_SQLITE_FAILURE = (
    "INSERT INTO console_signin_failures (address, at, failures) VALUES (?, ?, 1) "
    "ON CONFLICT (address, at) DO UPDATE SET failures = failures + 1"
)
_SQLITE_KEEP_FAILURES = (
    "DELETE FROM console_signin_failures WHERE (address, at) IN "
    "(SELECT address, at FROM console_signin_failures ORDER BY at DESC LIMIT -1 OFFSET ?)"
)

SqliteWrite = Callable[[Callable[[sqlite3.Connection], Any]], "asyncio.Future[Any]"]
SqliteRead = Callable[[Callable[[sqlite3.Connection], Any]], Coroutine[Any, Any, Any]]


def _light(fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
    """A write that need not wait for an fsync (storage/sqlite_writer.py): it survives a crash of the
    process, and a power cut can at most show a flash again or forget a failed sign-in."""
    fn.durable = False  # type: ignore[attr-defined]
    return fn


class SqliteConsoleSessions:
    """The console's rows in a SQLite journal, through its writer and its reader threads."""

    def __init__(self, write: SqliteWrite, read: SqliteRead) -> None:
        self._write = write
        self._read = read

    async def add_session(self, key: str, token_tag: str, expires_at: float, now: float, keep: int) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute(_SQLITE_FORGET_EXPIRED, (now,))
            conn.execute(_SQLITE_ADD, (key, expires_at, token_tag))
            conn.execute(_SQLITE_KEEP, (keep,))

        await self._write(job)

    async def session(self, key: str, now: float) -> tuple[float, str, str] | None:
        def q(conn: sqlite3.Connection) -> tuple[float, str, str] | None:
            row = conn.execute(
                "SELECT expires_at, flashes, admin_token_tag FROM console_sessions "
                "WHERE id_hash = ? AND expires_at > ?",
                (key, now),
            ).fetchone()
            return None if row is None else (float(row[0]), str(row[1]), str(row[2]))

        found: tuple[float, str, str] | None = await self._read(q)
        return found

    async def set_flashes(self, key: str, flashes: str) -> None:
        @_light
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE console_sessions SET flashes = ? WHERE id_hash = ?", (flashes, key))

        await self._write(job)

    async def end_session(self, key: str) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM console_sessions WHERE id_hash = ?", (key,))

        await self._write(job)

    async def end_all_sessions(self) -> int:
        def job(conn: sqlite3.Connection) -> int:
            return int(conn.execute("DELETE FROM console_sessions").rowcount)

        ended: int = await self._write(job)
        return ended

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]:
        def q(conn: sqlite3.Connection) -> tuple[int, float | None]:
            count, oldest = conn.execute(
                "SELECT coalesce(sum(failures), 0), min(at) FROM console_signin_failures "
                "WHERE address = ? AND at > ?",
                (address, since),
            ).fetchone()
            return int(count), None if oldest is None else float(oldest)

        found: tuple[int, float | None] = await self._read(q)
        return found

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None:
        @_light
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM console_signin_failures WHERE at <= ?", (forget_before,))
            conn.execute(_SQLITE_FAILURE, (address, at))
            conn.execute(_SQLITE_KEEP_FAILURES, (keep,))

        await self._write(job)


# -------------------------------------------------------------------------------------- PostgreSQL

_PG_KEEP = (
    "DELETE FROM console_sessions WHERE id_hash IN "
    "(SELECT id_hash FROM console_sessions ORDER BY expires_at DESC OFFSET $1)"
)
_PG_FAILURE = (
    "INSERT INTO console_signin_failures (address, at, failures) VALUES ($1, $2, 1) "
    "ON CONFLICT (address, at) DO UPDATE SET failures = console_signin_failures.failures + 1"
)
_PG_KEEP_FAILURES = (
    "DELETE FROM console_signin_failures WHERE (address, at) IN "
    "(SELECT address, at FROM console_signin_failures ORDER BY at DESC OFFSET $1)"
)


class PostgresConsoleSessions:
    """The console's rows in a PostgreSQL journal, on its connection pool (``pool()`` gives it)."""

    def __init__(self, pool: Callable[[], Any]) -> None:
        self._pool = pool

    async def add_session(self, key: str, token_tag: str, expires_at: float, now: float, keep: int) -> None:
        async with self._pool().acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM console_sessions WHERE expires_at <= $1", now)
            await conn.execute(
                "INSERT INTO console_sessions (id_hash, expires_at, flashes, admin_token_tag) "
                "VALUES ($1, $2, '', $3)",
                key,
                expires_at,
                token_tag,
            )
            await conn.execute(_PG_KEEP, keep)

    async def session(self, key: str, now: float) -> tuple[float, str, str] | None:
        row = await self._pool().fetchrow(
            "SELECT expires_at, flashes, admin_token_tag FROM console_sessions "
            "WHERE id_hash = $1 AND expires_at > $2",
            key,
            now,
        )
        return None if row is None else (float(row[0]), str(row[1]), str(row[2]))

    async def set_flashes(self, key: str, flashes: str) -> None:
        await self._pool().execute(
            "UPDATE console_sessions SET flashes = $1 WHERE id_hash = $2", flashes, key
        )

    async def end_session(self, key: str) -> None:
        await self._pool().execute("DELETE FROM console_sessions WHERE id_hash = $1", key)

    async def end_all_sessions(self) -> int:
        status = await self._pool().execute("DELETE FROM console_sessions")
        return int(str(status).rsplit(" ", 1)[-1])  # "DELETE <count>"

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]:
        row = await self._pool().fetchrow(
            "SELECT coalesce(sum(failures), 0), min(at) FROM console_signin_failures "
            "WHERE address = $1 AND at > $2",
            address,
            since,
        )
        return int(row[0]), None if row[1] is None else float(row[1])

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None:
        async with self._pool().acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM console_signin_failures WHERE at <= $1", forget_before)
            await conn.execute(_PG_FAILURE, address, at)
            await conn.execute(_PG_KEEP_FAILURES, keep)
