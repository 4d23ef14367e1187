"""Fixtures of the retention tests: a journal on each engine (PostgreSQL in a throwaway database), and
the gateway tests' harness for a real ``mogateway serve``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mogateway.core.ports import Journal
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import throwaway_database, truncate_all

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with throwaway_database("mogw_retention") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the test's journal is: a SQLite file, or the session's PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def journal(database: str) -> AsyncIterator[Journal]:
    """An open, empty journal on each engine."""
    j: Journal
    if database.startswith("postgresql://"):
        await truncate_all(database)
        j = PostgresJournal(database)
    else:
        j = SqliteJournal(database)
    await j.open()
    try:
        yield j
    finally:
        await j.close()
