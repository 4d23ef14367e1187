"""Whether a SQLite file's schema is exactly one a known journal version has: what ``restore`` checks
before a copy becomes the journal.

A journal copy is data the gateway then trusts: a trigger added to it runs inside the gateway's own
writes (it could copy every message into a hidden table, or re-point a client's callback URL), and a
view or a table the gateway never reads would sit there unseen. So a copy is refused unless its
schema — every table, index, trigger and view in ``sqlite_master``, each with its SQL — is the one the
shipped migrations produce for the copy's version. The expected schema is computed, never kept: the
migrations up to that version are applied to an in-memory database (``migrations.create_sqlite_at``),
so a new migration needs nothing here.

A journal from before the migration files (version kept in ``meta.schema_version``, and one upgraded
since, whose ``schema_migrations`` says "journal version N") was created by other code, whose SQL text
differs: its objects are compared by kind and name only (its ``meta`` table is its own). SQLite's
statistics tables (``sqlite_stat*``, written by ``ANALYZE``) are not schema.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache

from mogateway.edges.storage.migrations import create_sqlite_at

__all__ = ["SchemaObject", "schema_difference", "schema_of", "schema_at"]

#: (type, name, table, SQL with its blanks collapsed; None for SQLite's automatic indexes)
SchemaObject = tuple[str, str, str, str | None]

_BLANKS = re.compile(r"\s+")


def schema_of(conn: sqlite3.Connection) -> frozenset[SchemaObject]:
    """Every table, index, trigger and view of the database on ``conn``."""
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return frozenset(
        (str(kind), str(name), str(table), None if sql is None else _BLANKS.sub(" ", str(sql)).strip())
        for kind, name, table, sql in rows
        if not str(name).startswith("sqlite_stat")
    )


@cache
def schema_at(version: int) -> frozenset[SchemaObject]:
    """The schema of a SQLite journal at ``version``, from the shipped migrations."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        create_sqlite_at(conn, version)
        return schema_of(conn)
    finally:
        conn.close()


def _created_before_the_migration_files(conn: sqlite3.Connection) -> bool:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_migrations" not in tables:
        return True
    taken_over = "SELECT 1 FROM schema_migrations WHERE name LIKE '%(journal version %' LIMIT 1"
    return conn.execute(taken_over).fetchone() is not None


def schema_difference(conn: sqlite3.Connection, version: int) -> str | None:
    """What in the schema on ``conn`` is not version ``version``'s (the first difference, naming the
    object), or None when it is exactly that version's."""
    found = schema_of(conn)
    expected = schema_at(version)
    if _created_before_the_migration_files(conn):
        found = frozenset((k, n, t, None) for k, n, t, _ in found if t != "meta")
        expected = frozenset((k, n, t, None) for k, n, t, _ in expected if n != "schema_migrations")
    names_found = {(k, n): (t, sql) for k, n, t, sql in found}
    names_expected = {(k, n): (t, sql) for k, n, t, sql in expected}
    for kind, name in sorted(names_found.keys() - names_expected.keys()):
        table = names_found[(kind, name)][0]
        on = "" if kind in ("table", "view") or table == name else f" on {table}"
        return f"{kind} {name}{on} is not part of schema version {version}"
    for kind, name in sorted(names_expected.keys() - names_found.keys()):
        return f"{kind} {name} of schema version {version} is missing"
    for key in sorted(names_found):
        if names_found[key] != names_expected[key]:
            return f"{key[0]} {key[1]} differs from schema version {version}'s"
    return None
