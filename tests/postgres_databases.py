"""Throwaway PostgreSQL databases for tests: created with a random name, migrated, dropped afterwards.

Tests never touch the shared ``test`` database's public schema. When PostgreSQL is not reachable the
tests fail (never skip) and say how to start it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
import pytest

from mogateway.edges.storage import migrations

#: Where the test PostgreSQL is; override with MOGATEWAY_TEST_POSTGRES (a URL of an admin database).
ADMIN_URL = os.environ.get("MOGATEWAY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


async def _admin(sql: str) -> None:
    try:
        conn = await asyncpg.connect(ADMIN_URL, timeout=10)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {ADMIN_URL} ({exc}); run `bash scripts/ensure-services.sh`",
            pytrace=False,
        )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _migrate(url: str) -> None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await migrations.migrate(conn)
    finally:
        await conn.close()


@contextmanager
def throwaway_database(prefix: str = "mogw_test", *, migrate: bool = True) -> Iterator[str]:
    """A fresh database's URL for the duration of the block (migrated unless ``migrate`` is false)."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = _with_database(ADMIN_URL, name)
    try:
        if migrate:
            asyncio.run(_migrate(url))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def truncate_all(url: str) -> None:
    """Empty every journal table (between tests sharing one session database)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(
            "TRUNCATE messages, message_states, events, reply_refs, clients, settings, stats, whatsapp_seen, "
            "portal_users, portal_recovery_codes, portal_invites, portal_sessions, portal_signin_failures, "
            "portal_audit"
        )
    finally:
        await conn.close()
