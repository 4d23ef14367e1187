"""Versioned schema migrations of the journal, one mechanism for both engines (SQLite, PostgreSQL).

Each ``NNNN_name.sql`` file in this package is one migration, applied once, in order, and recorded in
the table ``schema_migrations`` (version, name, when). A file's statements are both engines', except
where a line ``-- engine: sqlite`` or ``-- engine: postgres`` starts statements for one of them, up to
the next such line (``-- engine: both`` goes back to both): a new migration is one file, and where the
engines spell it differently the two spellings stand side by side.

PostgreSQL: ``mogateway migrate`` applies them (:func:`migrate`), each in its own transaction, and a
transaction-level advisory lock makes concurrent runs wait for each other; a gateway only checks at
start that the database is at :data:`LATEST` (:func:`check`), so no two nodes race to change a schema
under live traffic. SQLite: the journal applies them itself when it opens the file
(:func:`migrate_sqlite`), in one transaction, while its workers' lock holds the other workers off.

A SQLite journal written before these files were SQLite's too kept its own version number in
``meta.schema_version`` (1 to 4); it is taken over as the migrations that version had
(:data:`_SQLITE_VERSIONS`) and upgraded from there, in place.
"""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from typing import Any, Final

from mogateway.core.immutable import immutable

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "Migration",
    "SchemaBehind",
    "applied_version",
    "check",
    "create_sqlite_at",
    "migrate",
    "migrate_sqlite",
    "sqlite_file_version",
]

_NAME = re.compile(r"\A(\d{4})_([a-z0-9_]+)\.sql\Z")
_ENGINE = re.compile(r"\A--\s*engine:\s*(\w+)\s*\Z")
_ENGINES: Final = ("sqlite", "postgres")
# Any constant will do; it only has to be the same for every mogateway (it spells "mogw").
_LOCK_KEY = 0x6D6F6777

# The same text for both engines (SQLite keeps the time as text).
_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
)
"""

#: meta.schema_version of a SQLite journal from before the migrations were SQLite's -> the migrations
#: that version had. (Version 1 is taken as none: 0001 creates, "IF NOT EXISTS", what it lacks.)
_SQLITE_VERSIONS: Final = {1: 0, 2: 3, 3: 5, 4: 7}


@immutable
class Migration:
    """One versioned SQL file."""

    version: int
    name: str
    sql: str

    def statements_for(self, engine: str) -> str:
        """The part of :attr:`sql` that ``engine`` (``"sqlite"`` or ``"postgres"``) runs."""
        kept: list[str] = []
        current = "both"
        for line in self.sql.splitlines():
            marker = _ENGINE.match(line.strip())
            if marker is not None:
                current = marker[1]
            elif current in ("both", engine):
                kept.append(line)
        return "\n".join(kept) + "\n"


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
    # Unique and from 1; a gap is a number held by a migration of a branch not merged yet (each
    # migration is applied and recorded by its own version, so one that lands later is still applied).
    if not versions or versions[0] != 1 or len(set(versions)) != len(versions):
        raise RuntimeError(f"migration versions must be unique and start at 1, found {versions}")
    for migration in found:
        for line in migration.sql.splitlines():
            marker = _ENGINE.match(line.strip())
            if marker is not None and marker[1] not in (*_ENGINES, "both"):
                raise RuntimeError(f"migration {migration.version}: unknown engine {marker[1]!r}")
    return tuple(found)


#: Every migration shipped with this mogateway, oldest first.
MIGRATIONS: tuple[Migration, ...] = _load()
#: The schema version this mogateway needs.
LATEST: int = MIGRATIONS[-1].version


def _newer(version: int, where: str) -> str:
    return (
        f"the journal {where} has schema version {version}, newer than this mogateway ({LATEST}): "
        "upgrade mogateway"
    )


# ------------------------------------------------------------------------------------------ PostgreSQL


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
            await conn.execute(migration.statements_for("postgres"))
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
        raise SchemaBehind(_newer(version, f"database {where}") + " on this node")
    return version


# ------------------------------------------------------------------------------------------ SQLite


def migrate_sqlite(conn: sqlite3.Connection) -> list[Migration]:
    """Bring the SQLite journal on ``conn`` (autocommit) to :data:`LATEST` in one transaction; returns
    the migrations applied. The caller holds off the other writers of the file (the workers' lock)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        present = _sqlite_versions(conn)
        if present and max(present) > LATEST:
            raise SchemaBehind(_newer(max(present), "file"))
        done = [m for m in MIGRATIONS if m.version not in present]
        for migration in done:
            for statement in _split(migration.statements_for("sqlite")):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                (migration.version, migration.name),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return done


def create_sqlite_at(conn: sqlite3.Connection, version: int) -> None:
    """Create on the empty database ``conn`` (autocommit) the schema that migrations 1..``version``
    give a SQLite journal: what a journal of that version is, to compare a file with
    (``edges.journal_schema``)."""
    conn.execute(_BOOKKEEPING)
    for migration in MIGRATIONS[:version]:
        for statement in _split(migration.statements_for("sqlite")):
            conn.execute(statement)


def sqlite_file_version(conn: sqlite3.Connection) -> int | None:
    """The migration a SQLite journal is at, read without changing it (a file from before the migration
    files: the migration its own version maps to); None: not a mogateway journal."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_migrations" in tables:
        return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        old = int(row[0]) if row is not None else 1
        if old in _SQLITE_VERSIONS:
            return MIGRATIONS[_SQLITE_VERSIONS[old] - 1].version if _SQLITE_VERSIONS[old] else 0
        return LATEST + old  # newer than anything this mogateway knows
    return None


def _sqlite_versions(conn: sqlite3.Connection) -> set[int]:
    """The migrations the file has, after taking over a version from before them (module docstring)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.execute(_BOOKKEEPING)
    if "schema_migrations" in tables or "meta" not in tables:
        return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    old = int(row[0]) if row is not None else 1
    if old not in _SQLITE_VERSIONS:
        raise SchemaBehind(_newer(old, "file") if old > max(_SQLITE_VERSIONS) else f"unknown version {old}")
    had = MIGRATIONS[: _SQLITE_VERSIONS[old]]
    conn.executemany(
        "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
        [(m.version, f"{m.name} (journal version {old})") for m in had],
    )
    conn.execute("DROP TABLE meta")
    return {m.version for m in had}


def _split(sql: str) -> list[str]:
    """SQLite runs one statement at a time: ``sql`` cut into its statements (each ending with ``;``)."""
    statements: list[str] = []
    current = ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current)
            current = ""
    if re.sub(r"--[^\n]*", "", current).strip():
        raise ValueError(f"a migration statement does not end with ';': {current.strip()[:80]!r}")
    return statements
