"""Client secrets encrypted at rest: the sealing rule, and both journals storing nothing readable.

The journal tests run against SQLite (the file's bytes are searched, write-ahead log included) and
PostgreSQL (the stored rows are read back as text)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from mogateway.core.clients import ClientRecord
from mogateway.core.ports import Journal
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sealing import Sealer, SecretKeyError, key_id, new_key, parse_key
from mogateway.edges.storage.sqlite import SqliteJournal
from postgres_databases import truncate_all

KEY = parse_key(new_key())
OTHER_KEY = parse_key(new_key())
TOKEN = "token-plain-0123456789-abcdefghijklmnopq"
SECRET = "signing-plain-0123456789-abcdefghijklmno"
PREVIOUS = "previous-plain-0123456789-abcdefghijklm"


def client(client_id: str = "cl_one", **kw: object) -> ClientRecord:
    values: dict[str, object] = {
        "id": client_id,
        "name": "bank",
        "shortcodes": ["56767"],
        "keywords": [],
        "callback_url": "https://app.example/sms",
        "token": TOKEN,
        "signing_secret": SECRET,
        "previous_signing_secret": PREVIOUS,
        "previous_signing_until": 2e9,
        "updated_at": 1.0,
    }
    values.update(kw)
    return ClientRecord(**values)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ the rule


def test_a_sealed_value_opens_with_its_key_and_context_only() -> None:
    sealer = Sealer(KEY)
    stored = sealer.seal(SECRET, "client/cl_one/signing_secret")
    assert isinstance(stored, dict) and stored["alg"] == "A256GCM" and stored["kid"] == key_id(KEY)
    assert SECRET not in repr(stored)
    assert sealer.open(stored, "client/cl_one/signing_secret") == SECRET
    assert sealer.seal(SECRET, "x") != sealer.seal(SECRET, "x")  # a fresh nonce each time
    # Moved to another client or field, a sealed value does not open.
    for context in ("client/cl_two/signing_secret", "client/cl_one/token"):
        with pytest.raises(SecretKeyError, match="altered or moved"):
            sealer.open(stored, context)
    tampered = dict(stored, v=stored["v"][:-2] + ("AA" if stored["v"][-2:] != "AA" else "BB"))
    with pytest.raises(SecretKeyError, match="altered"):
        sealer.open(tampered, "client/cl_one/signing_secret")


def test_without_the_key_the_error_is_one_line_naming_the_setting() -> None:
    stored = Sealer(KEY).seal(TOKEN, "client/c/token")
    with pytest.raises(SecretKeyError) as missing:
        Sealer().open(stored, "client/c/token")
    with pytest.raises(SecretKeyError) as wrong:
        Sealer(OTHER_KEY).open(stored, "client/c/token")
    for error in (missing.value, wrong.value):
        text = str(error)
        assert "MOGATEWAY_SECRET_KEY" in text and "\n" not in text and key_id(KEY) in text
        assert TOKEN not in text
    assert "not set" in str(missing.value)
    assert "MOGATEWAY_OLD_SECRET_KEY" in str(wrong.value)
    # While replacing the key: the new one seals, the old one still opens.
    replacing = Sealer(OTHER_KEY, [KEY])
    assert replacing.open(stored, "client/c/token") == TOKEN
    assert replacing.seal(TOKEN, "client/c/token")["kid"] == key_id(OTHER_KEY)  # type: ignore[index]
    with pytest.raises(SecretKeyError, match="cannot read"):
        Sealer(KEY).open({"alg": "rot13", "v": "x"}, "client/c/token")


def test_plain_text_is_read_whatever_the_key_and_a_key_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    assert Sealer().seal(TOKEN, "c") == TOKEN
    assert Sealer(KEY).seal("", "c") == ""  # nothing to hide: "not signing"
    sealer = Sealer(KEY)
    with caplog.at_level(logging.WARNING):
        assert sealer.open(TOKEN, "c") == TOKEN
        assert sealer.open(SECRET, "c") == SECRET
    warnings = [r for r in caplog.records if "plain text" in r.getMessage()]
    assert len(warnings) == 1 and "mogateway secrets reencrypt" in warnings[0].getMessage()
    assert TOKEN not in caplog.text and SECRET not in caplog.text
    assert sealer.opened["plaintext"] == 2


@pytest.mark.parametrize(
    "text",
    ["", "abc", "x" * 44, new_key()[:-4], new_key() + "AAAA", new_key()[:-1] + "+", "a b" * 15],
    # Named, not shown: a random key in a test's id differs between two collections (pytest-xdist's
    # workers must collect the same ids).
    ids=["empty", "short", "not-base64", "key-cut-short", "key-too-long", "key-bad-char", "spaces"],
)
def test_a_key_must_be_32_bytes_of_urlsafe_base64(text: str) -> None:
    with pytest.raises(ValueError, match="32 random bytes") as caught:
        parse_key(text)
    assert text not in str(caught.value) or not text


def test_keys_parse_with_or_without_padding_and_never_show() -> None:
    key = new_key()
    assert len(key) == 44 and parse_key(key) == parse_key(key.rstrip("=")) == parse_key(f" {key}\n")
    assert key not in repr(Sealer(parse_key(key)))
    assert key_id(parse_key(key)) in repr(Sealer(parse_key(key)))


# ------------------------------------------------------------------------------------ the journals

JournalMaker = Callable[[Sealer], Journal]


@pytest.fixture
def make(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> JournalMaker:
    """A function making an (unopened) journal over this test's storage with a given sealer."""
    if backend == "sqlite":
        path = tmp_path / "journal.db"
        return lambda sealer: SqliteJournal(path, sealer=sealer)
    url: str = request.getfixturevalue("pg_url")
    asyncio.run(truncate_all(url))
    return lambda sealer: PostgresJournal(url, sealer=sealer)


async def stored_bytes(journal: Journal, backend: str) -> bytes:
    """Everything the journal keeps, as bytes: the SQLite files, or the PostgreSQL rows as text."""
    if backend == "sqlite":
        assert isinstance(journal, SqliteJournal)
        files = [Path(journal.path + suffix) for suffix in ("", "-wal")]
        return b"".join(f.read_bytes() for f in files if f.exists())
    assert isinstance(journal, PostgresJournal)
    conn = await asyncpg.connect(journal.url)
    try:
        rows = await conn.fetch("SELECT id, doc::text, updated_at::text FROM clients")
        settings = await conn.fetch("SELECT key, value FROM settings")
    finally:
        await conn.close()
    return repr([tuple(r) for r in rows] + [tuple(r) for r in settings]).encode()


async def test_with_a_key_no_secret_is_stored_readable(backend: str, make: JournalMaker) -> None:
    journal = make(Sealer(KEY))
    await journal.open()
    try:
        await journal.put_client(client())
        await journal.put_client(client("cl_two", token=TOKEN + "2", signing_secret=""))
        assert await journal.get_client("cl_one") == client()
        data = await stored_bytes(journal, backend)
        assert b"cl_one" in data and b"https://app.example/sms" in data  # the rest stays readable
        for secret in (TOKEN, SECRET, PREVIOUS):
            assert secret.encode() not in data
    finally:
        await journal.close()
    data = await stored_bytes(journal, backend)
    assert not any(s.encode() in data for s in (TOKEN, SECRET, PREVIOUS))

    reopened = make(Sealer(KEY))
    await reopened.open()
    try:
        assert [c.id for c in await reopened.list_clients()] == ["cl_one", "cl_two"]
        assert (await reopened.get_client("cl_one")) == client()
        assert (await reopened.get_client("cl_two")).token == TOKEN + "2"  # type: ignore[union-attr]
    finally:
        await reopened.close()


@pytest.mark.parametrize("sealer", [Sealer(), Sealer(OTHER_KEY)], ids=["no-key", "wrong-key"])
async def test_without_the_right_key_reading_clients_fails_clearly(
    make: JournalMaker, sealer: Sealer
) -> None:
    journal = make(Sealer(KEY))
    await journal.open()
    await journal.put_client(client())
    await journal.close()

    other = make(sealer)
    await other.open()
    try:
        with pytest.raises(SecretKeyError, match="MOGATEWAY_SECRET_KEY"):
            await other.list_clients()
        with pytest.raises(SecretKeyError):
            await other.get_client("cl_one")
    finally:
        await other.close()


async def test_rewriting_moves_plain_text_and_old_keys_to_the_new_key(
    backend: str, make: JournalMaker
) -> None:
    plain = make(Sealer())
    await plain.open()
    await plain.put_client(client())
    assert TOKEN.encode() in await stored_bytes(plain, backend)  # without a key: as it always was
    await plain.close()

    # The key is set: plain text is still read, and every write seals.
    sealed = make(Sealer(KEY))
    await sealed.open()
    for record in await sealed.list_clients():
        await sealed.put_client(record)
    await sealed.close()
    assert TOKEN.encode() not in await stored_bytes(sealed, backend)
    assert sealed.sealer.opened["plaintext"] == 3  # type: ignore[attr-defined]

    # A new key replaces it: the old one opens, the new one seals; then the old one alone fails.
    replacing = make(Sealer(OTHER_KEY, [KEY]))
    await replacing.open()
    for record in await replacing.list_clients():
        await replacing.put_client(record)
    await replacing.close()
    old_only = make(Sealer(KEY))
    await old_only.open()
    try:
        with pytest.raises(SecretKeyError, match=key_id(OTHER_KEY)):
            await old_only.list_clients()
    finally:
        await old_only.close()
    new_only = make(Sealer(OTHER_KEY))
    await new_only.open()
    try:
        assert await new_only.list_clients() == [client()]
    finally:
        await new_only.close()


async def test_sqlite_overwrites_a_replaced_secret_even_where_secure_delete_is_off(tmp_path: Path) -> None:
    # Debian's SQLite is built with secure_delete on; others are not. Turn it off on the writer
    # connection, as such a build would have it, and check the journal still leaves nothing behind.
    # Several clients share a page; the one rewritten sits between the others, so its old cell becomes a
    # free block in the middle of the page rather than being reused by the (larger) sealed document.
    path = tmp_path / "journal.db"
    names = ("cl_a", "cl_b", "cl_c")
    plain = SqliteJournal(path)
    await plain.open()
    for name in names:
        await plain.put_client(client(name, token=f"{name}-{TOKEN}", signing_secret=f"{name}-{SECRET}"))
    await plain.close()

    journal = SqliteJournal(path, sealer=Sealer(KEY))
    await journal.open()
    try:
        await journal._write(lambda conn: conn.execute("PRAGMA secure_delete=OFF"))
        await journal.put_client(client("cl_b", token=f"cl_b-{TOKEN}", signing_secret=f"cl_b-{SECRET}"))
        after = await journal._write(lambda conn: conn.execute("PRAGMA secure_delete").fetchone()[0])
        assert after == 0  # the build's own setting is put back for everything else
    finally:
        await journal.close()
    data = path.read_bytes()
    assert f"cl_a-{TOKEN}".encode() in data  # not rewritten: still plain text, as expected
    assert f"cl_b-{TOKEN}".encode() not in data and f"cl_b-{SECRET}".encode() not in data
