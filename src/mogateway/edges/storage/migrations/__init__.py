"""Versioned schema migrations of the PostgreSQL journal.

Each ``NNNN_name.sql`` file in this package is one migration, applied once, in order, each in its own
transaction, and recorded in ``schema_migrations``. ``mogateway migrate`` applies them; a gateway only
checks at start that the database is at :data:`LATEST` (so no two nodes race to change a schema under
live traffic). A transaction-level advisory lock makes concurrent ``migrate`` runs wait for each other.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from mogateway.core.immutable import immutable

__all__ = ["LATEST", "MIGRATIONS", "Migration", "SchemaBehind", "applied_version", "check", "migrate"]

_NAME = re.compile(r"\A(\d{4})_([a-z0-9_]+)\.sql\Z")
# Any constant will do; it only has to be the same for every mogateway (it spells "mogw").
_LOCK_KEY = 0x6D6F6777

_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@immutable
class Migration:
    """One versioned SQL file."""

    version: int
    name: str
    sql: str


class SchemaBehind(RuntimeError):
    """The database's schema is older (or newer) than this mogateway's; the message says what to do."""


def _load() -> tuple[Migration, ...]:
    found: list[Migration] = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions must be 1..n without gaps, found {versions}")
    return tuple(found)


#: Every migration shipped with this mogateway, oldest first.
MIGRATIONS: tuple[Migration, ...] = _load()
#: The schema version this mogateway needs.
LATEST: int = MIGRATIONS[-1].version


async def applied_version(conn: Any) -> int:
    """The highest migration applied to the database ``conn`` (an asyncpg connection); 0 for none."""
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return 0
    return int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))


async def migrate(conn: Any) -> list[Migration]:
    """Apply every migration the database lacks; returns those applied (empty when up to date)."""
    done: list[Migration] = []
    for migration in MIGRATIONS:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            await conn.execute(_BOOKKEEPING)
            present = await conn.fetchval(
                "SELECT 1 FROM schema_migrations WHERE version=$1", migration.version
            )
            if present:
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
            done.append(migration)
    return done


async def check(conn: Any, where: str) -> int:
    """Raise :class:`SchemaBehind` unless the database is exactly at :data:`LATEST`; returns the version."""
    version = await applied_version(conn)
    if version < LATEST:
        raise SchemaBehind(
            f"the journal database {where} has schema version {version}, this mogateway needs {LATEST}: "
            f"run `mogateway migrate --database <url>` (or with MOGATEWAY_DATABASE set) first"
        )
    if version > LATEST:
        raise SchemaBehind(
            f"the journal database {where} has schema version {version}, newer than this mogateway "
            f"({LATEST}): upgrade mogateway on this node"
        )
    return version
