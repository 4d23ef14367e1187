"""PostgreSQL-only: the journal refuses to start on a schema it was not migrated to, and says what to do."""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import pytest

from mogateway.edges.storage import migrations
from mogateway.edges.storage.postgres import PostgresJournal, redact_url
from postgres_databases import throwaway_database


@pytest.fixture
def unmigrated_url() -> Iterator[str]:
    with throwaway_database("mogw_schema", migrate=False) as url:
        yield url


async def test_an_unmigrated_database_is_refused_with_the_command_to_run(unmigrated_url: str) -> None:
    url = unmigrated_url
    journal = PostgresJournal(url)
    with pytest.raises(migrations.SchemaBehind, match="run `mogateway migrate"):
        await journal.open()
    conn = await asyncpg.connect(url)
    try:
        applied = [m.version for m in await migrations.migrate(conn)]
        assert applied == [m.version for m in migrations.MIGRATIONS]
        assert await migrations.migrate(conn) == []  # running it again changes nothing
        assert await migrations.applied_version(conn) == migrations.LATEST
        await conn.execute("DELETE FROM schema_migrations WHERE version=$1", migrations.LATEST)
    finally:
        await conn.close()
    with pytest.raises(migrations.SchemaBehind, match=f"needs {migrations.LATEST}"):
        await journal.open()


async def test_an_unreachable_database_is_one_clear_error_without_the_password() -> None:
    journal = PostgresJournal("postgresql://gw:s3cret@127.0.0.1:1/none", connect_timeout_s=2)
    with pytest.raises(RuntimeError, match="cannot connect") as info:
        await journal.open()
    assert "s3cret" not in str(info.value)
    assert redact_url("postgresql://gw:s3cret@db:5433/j") == "postgresql://gw:***@db:5433/j"
