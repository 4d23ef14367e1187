"""Console sessions and the sign-in throttle in the journal, on both engines: what one journal (one
worker, one node) writes, another journal on the same data honours; expiry, sign-out, bounds, and the
journal never holding a session id or a flash in the clear."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from mogateway.api.console import sessions as console_sessions
from mogateway.api.console.sessions import SessionStore, SignInThrottle, same_secret, session_key, token_tag
from mogateway.core.ports import Journal
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import throwaway_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with throwaway_database("mogw_console") as url:
        yield url


Raw = Callable[[], Awaitable[str]]
ADMIN = "admin-token-of-these-tests-0123456789"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the journal is: a SQLite file, or a migrated PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def two_journals(database: str) -> AsyncIterator[tuple[Journal, Journal, Raw]]:
    """Two open journals on the same data (two workers, or two nodes), and the sessions table's raw
    rows as text."""
    conn: asyncpg.Connection | None = None
    if not database.startswith("postgresql://"):
        path = database
        made: list[Journal] = [SqliteJournal(path), SqliteJournal(path)]

        async def raw() -> str:
            with sqlite3.connect(path) as db:
                return repr(db.execute("SELECT * FROM console_sessions").fetchall())

    else:
        url = database
        conn = await asyncpg.connect(url)
        await conn.execute("TRUNCATE console_sessions, console_signin_failures")
        made = [PostgresJournal(url), PostgresJournal(url)]

        async def raw() -> str:
            assert conn is not None
            return repr([tuple(r) for r in await conn.fetch("SELECT * FROM console_sessions")])

    for journal in made:
        await journal.open()
    try:
        yield made[0], made[1], raw
    finally:
        for journal in made:
            await journal.close()
        if conn is not None:
            await conn.close()


async def test_a_session_made_through_one_journal_is_honoured_by_another_and_ends_everywhere(
    two_journals: tuple[Journal, Journal, Raw],
) -> None:
    first, second, raw_rows = two_journals
    here = SessionStore(first.console_sessions(), 60, lambda: ADMIN)
    there = SessionStore(second.console_sessions(), 60, lambda: ADMIN)
    session = await here.create()
    seen = await there.get(session.id)
    assert seen is not None and seen.csrf == session.csrf and seen.expires_at == session.expires_at
    assert await there.get(session.id + "x") is None and await there.get(None) is None

    await here.flash(session, "token", "Client added.", token="the-new-token-0123456789")
    raw = await raw_rows()
    assert session.id not in raw and session.csrf not in raw  # only a hash of the id is kept...
    assert session_key(session.id) in raw
    assert "the-new-token" not in raw and "Client added" not in raw  # ...and the flash sealed
    assert ADMIN not in raw and token_tag(session.id, ADMIN) in raw  # a keyed hash of the admin token
    shown = await there.get(session.id)
    assert shown is not None
    assert [f["token"] for f in await there.take_flashes(shown)] == ["the-new-token-0123456789"]
    again = await here.get(session.id)
    assert again is not None and again.flashes == []  # shown once, whichever worker showed it

    await there.end(session.id)
    assert await here.get(session.id) is None and await there.get(session.id) is None


async def test_sessions_expire_and_are_deleted_and_the_table_is_bounded(
    two_journals: tuple[Journal, Journal, Raw],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, _, raw_rows = two_journals
    now = [1000.0]
    store = SessionStore(first.console_sessions(), 60, lambda: ADMIN, clock=lambda: now[0])
    old = await store.create()
    now[0] += 61
    assert await store.get(old.id) is None  # expired
    monkeypatch.setattr(console_sessions, "MAX_SESSIONS", 3)
    made = []
    for _ in range(5):  # each sign-in deletes what expired, and the oldest beyond the bound
        now[0] += 1
        made.append(await store.create())
    raw = await raw_rows()
    assert session_key(old.id) not in raw
    assert [await store.get(s.id) is not None for s in made] == [False, False, True, True, True]


async def test_failed_sign_ins_count_over_every_journal_and_age_out(
    two_journals: tuple[Journal, Journal, Raw],
) -> None:
    first, second, _ = two_journals
    now = [0.0]
    here = SignInThrottle(first.console_sessions(), per_address=3, window_s=10, clock=lambda: now[0])
    there = SignInThrottle(second.console_sessions(), per_address=3, window_s=10, clock=lambda: now[0])
    await here.failed("a")
    await there.failed("a")
    assert await here.wait_s("a") == 0
    now[0] = 1.0
    await here.failed("a")  # the third, over two workers
    assert await there.wait_s("a") == 9  # until the first two age out (at 10)
    assert await there.wait_s("b") == 0  # others are not locked out
    now[0] = 10.5
    assert await here.wait_s("a") == 0  # the two at 0.0 aged out
    assert same_secret("x" * 20, "x" * 20) and not same_secret("x", "x" * 20)


async def test_a_session_opened_with_another_admin_token_is_refused_and_deleted_everywhere(
    two_journals: tuple[Journal, Journal, Raw],
) -> None:
    first, second, raw_rows = two_journals
    before = SessionStore(first.console_sessions(), 60, lambda: ADMIN)
    after = SessionStore(second.console_sessions(), 60, lambda: ADMIN + "-rotated")
    session, other = await before.create(), await before.create()
    assert await after.get(session.id) is None  # the admin token changed: refused...
    assert session_key(session.id) not in await raw_rows()  # ...and deleted
    assert await before.get(session.id) is None
    assert await before.get(other.id) is not None  # the others wait for their own request

    third = await before.create()
    assert await before.end_all() == 2  # sign out everywhere
    assert await before.get(other.id) is None and await before.get(third.id) is None
    assert await raw_rows() == "[]"
