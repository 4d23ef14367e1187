"""Fixtures of the journal suite: the same tests run against every Journal implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mogateway.core.ports import Journal
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import throwaway_database, truncate_all


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """One migrated throwaway PostgreSQL database for the whole session."""
    with throwaway_database("mogw_journal") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the journal implementation under test."""
    return str(request.param)


@pytest.fixture
def journal_factory(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> object:
    """A callable making a new (unopened) journal on this test's storage; all share the same data."""
    if backend == "sqlite":
        path = tmp_path / "journal.db"
        return lambda: SqliteJournal(path)
    url: str = request.getfixturevalue("pg_url")
    return lambda: PostgresJournal(url)


@pytest.fixture
async def journal(
    backend: str, journal_factory: object, request: pytest.FixtureRequest
) -> AsyncIterator[Journal]:
    """An open, empty journal."""
    if backend == "postgres":
        await truncate_all(request.getfixturevalue("pg_url"))
    j: Journal = journal_factory()  # type: ignore[operator]
    await j.open()
    try:
        yield j
    finally:
        await j.close()
