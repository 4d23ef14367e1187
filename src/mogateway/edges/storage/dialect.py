"""What the journal's two SQL engines spell differently, and the two ways of running its statements.

The journal's logic is written once (``storage.batches``: store, apply, receipts; ``storage.sql_journal``:
reads, clients, settings, stats) as *programs*: generators that yield a list of statements, receive the
rows those statements returned (concatenated), and finally return their result. They never touch a
connection; an engine runs them with :func:`run_sync` (SQLite: inside its writer's transaction or on a
reader thread) or :func:`run_async` (PostgreSQL: on a pooled connection). A program writes ``?`` for
every parameter and asks its :class:`Dialect` for the few things the engines spell differently:

* placeholders: ``?`` (SQLite) or ``$1, $2, …`` (PostgreSQL) — :meth:`Dialect.sql`;
* many rows as one statement's input — :meth:`Dialect.many`: SQLite takes multi-row ``VALUES`` cut in
  chunks of fixed sizes (so that each chunk's statement text is prepared once and then comes from the
  connection's statement cache, and one sqlite3 step — one GIL hand-off — writes many rows: executemany
  re-takes the GIL at every row); PostgreSQL takes one array per column, spread by ``unnest``, in one
  statement whatever the count (one round trip);
* a list of keys — :meth:`Dialect.keyed`: ``IN (?, ?, …)`` in chunks, or ``= ANY(?::text[])``;
* what keeps two writers from storing one MO twice: SQLite's writers take turns for the whole
  transaction (the workers' lock, ``BEGIN IMMEDIATE``); PostgreSQL's nodes take a lock per number
  (:attr:`Dialect.number_locks`);
* an index hint (SQLite) and byte order for a range of source ids (PostgreSQL's collations);
* giving free pages back to the file system (SQLite's incremental vacuum; PostgreSQL's autovacuum
  needs no statement) — :attr:`Dialect.reclaim_page`.

Everything else — the SQL, upserts (``ON CONFLICT``, which both engines spell alike), row values — is
the same text for both.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Sequence
from functools import lru_cache
from typing import Any, Final, TypeVar

__all__ = ["POSTGRES", "SQLITE", "Dialect", "Program", "Statement", "run_async", "run_sync"]

T = TypeVar("T")

#: One statement: its text (in the engine's placeholders) and its parameters.
Statement = tuple[str, Sequence[Any]]
#: A journal operation written once for both engines (module docstring).
Program = Generator[list[Statement], list[Any], T]

_CHUNK_SIZES: Final = (256, 64, 16, 4, 1)
_MARK = re.compile(r"\?")


class Dialect:
    """The engine-specific spelling the shared journal code asks for (module docstring).

    ``arrays``: rows travel as one array per column (PostgreSQL) rather than as multi-row ``VALUES``
    in fixed-size chunks (SQLite).
    """

    def __init__(
        self, name: str, *, arrays: bool, number_locks: str | None = None, reclaim_page: str | None = None
    ) -> None:
        self.name = name
        self.arrays = arrays
        #: A statement giving one free page back to the file system; None where the engine does it.
        self.reclaim_page = reclaim_page
        #: A statement taking the numbers a store looks up earlier MOs of (an array), which holds every
        #: other writer storing an MO of those numbers off until this transaction ends; None where the
        #: writers already take turns for whole transactions.
        self.number_locks = None if number_locks is None else self.sql(number_locks)

    def __repr__(self) -> str:
        return f"Dialect({self.name})"

    def sql(self, text: str) -> str:
        """``text`` with this engine's placeholders for its ``?``."""
        return _numbered(text) if self.arrays else text

    def indexed_by(self, index: str) -> str:
        """A hint to use ``index`` for the table named just before (SQLite's planner needs it where a
        join's outer rows come from ``VALUES``); nothing for PostgreSQL."""
        return "" if self.arrays else f" INDEXED BY {index}"

    def bytewise(self, expr: str) -> str:
        """``expr`` compared byte by byte, whatever the database's collation (SQLite always does)."""
        return f'{expr} COLLATE "C"' if self.arrays else expr

    def many(
        self,
        template: str,
        types: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *first: Any,
        ordered: bool = False,
    ) -> list[Statement]:
        """``template`` run over ``rows`` (each of ``len(types)`` values): ``{rows}`` in it stands for
        an INSERT's source of those rows, ``{table}`` for a FROM item ``v`` whose columns are
        ``column1``, ``column2``…; ``first`` are parameters that come before the rows'. ``types``
        are PostgreSQL's names of the columns' types (its arrays need them). ``ordered``: the rows are
        inserted in the order given (an identity column numbers them so)."""
        if not rows:
            return []
        shape = tuple(types)
        if self.arrays:
            text = _array_text(template, shape, ordered)
            return [(text, [*first, *(list(column) for column in zip(*rows, strict=True))])]
        return [
            (_values_text(template, len(shape), len(chunk)), [*first, *(v for row in chunk for v in row)])
            for chunk in self.chunks(rows)
        ]

    def keyed(self, template: str, keys: Sequence[Any], *first: Any) -> list[Statement]:
        """``template`` run over ``keys`` (each once): ``{keys}`` in it stands for ``IN`` those keys
        (of type text); ``first`` are parameters that come before them."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return []
        if self.arrays:
            return [(_numbered(template.format(keys="= ANY(?::text[])")), [*first, unique])]
        return [(_in_text(template, len(chunk)), [*first, *chunk]) for chunk in self.chunks(unique)]

    def chunks(self, items: Sequence[T]) -> Iterator[Sequence[T]]:
        """``items`` in the pieces one statement takes: all at once (arrays), or cut greedily into
        chunks whose sizes are all in a few fixed sizes (``VALUES``)."""
        if self.arrays:
            yield items
            return
        start = 0
        while start < len(items):
            left = len(items) - start
            size = next(n for n in _CHUNK_SIZES if n <= left)
            yield items[start : start + size]
            start += size


@lru_cache(maxsize=1024)
def _numbered(text: str) -> str:
    count = iter(range(1, text.count("?") + 1))
    return _MARK.sub(lambda _: f"${next(count)}", text)


@lru_cache(maxsize=256)
def _values_text(template: str, width: int, count: int) -> str:
    values = ",".join(["(" + ",".join("?" * width) + ")"] * count)
    return template.format(rows=f"VALUES {values}", table=f"(VALUES {values}) AS v")


@lru_cache(maxsize=256)
def _in_text(template: str, count: int) -> str:
    return template.format(keys="IN (" + ",".join("?" * count) + ")")


@lru_cache(maxsize=256)
def _array_text(template: str, types: tuple[str, ...], ordered: bool) -> str:
    arrays = ", ".join(f"?::{t}[]" for t in types)
    names = ", ".join(f"column{n}" for n in range(1, len(types) + 1))
    rows = (
        f"SELECT {names} FROM unnest({arrays}) WITH ORDINALITY AS v({names}, n) ORDER BY n"
        if ordered
        else f"SELECT * FROM unnest({arrays})"
    )
    return _numbered(template.format(rows=rows, table=f"unnest({arrays}) AS v({names})"))


def run_sync(conn: Any, program: Program[T]) -> T:
    """Run ``program`` on a sqlite3 connection (in whatever transaction the caller holds)."""
    try:
        statements = next(program)
        while True:
            rows: list[Any] = []
            for sql, params in statements:
                rows += conn.execute(sql, params).fetchall()
            statements = program.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


async def run_async(conn: Any, program: Program[T]) -> T:
    """Run ``program`` on an asyncpg connection (in whatever transaction the caller holds)."""
    try:
        statements = next(program)
        while True:
            rows: list[Any] = []
            for sql, params in statements:
                rows += await conn.fetch(sql, *params)
            statements = program.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


SQLITE: Final = Dialect(
    "sqlite",
    arrays=False,
    # One page per statement: Python's sqlite3 steps a statement that returns no columns once, and each
    # step of incremental_vacuum moves one page (N in "incremental_vacuum(N)" would be ignored).
    reclaim_page="PRAGMA incremental_vacuum",
)
POSTGRES: Final = Dialect(
    "postgres",
    arrays=True,
    # Transaction-scoped advisory locks, taken in one order (no deadlock between two stores), released
    # at commit: of two nodes storing MOs of one number, the second reads the first one's.
    number_locks=(
        "SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT DISTINCT hashtextextended(n, 20261126) AS k "
        "FROM unnest(?::text[]) AS n ORDER BY k) AS keys"
    ),
)
