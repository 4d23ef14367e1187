"""Client secrets encrypted at rest, as an operator lives it: ``mogateway serve`` with a key, what the
journal then holds, starting without or with the wrong key, and ``mogateway secrets reencrypt``, on
SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    INGEST_TOKEN,
    GatewayClient,
    clean_env,
    free_port,
    run_cli,
    serve_gateway,
    start_serve,
    wait_until,
)

from mogateway.client import verify_signature
from mogateway.edges.storage.sealing import key_id, new_key, parse_key
from mogateway.testing.recorder import CallbackRecorder
from postgres_databases import throwaway_database

pytestmark = pytest.mark.slow
SC = "56767"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The ``database`` setting of a fresh journal: a SQLite file, or a migrated PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "journal.db")
        return
    with throwaway_database("mogw_secrets") as url:
        yield url


def stored(database: str) -> bytes:
    """Everything the journal keeps, as bytes: the SQLite files, or every PostgreSQL row as text."""
    if not database.startswith("postgresql://"):
        files = [Path(database + suffix) for suffix in ("", "-wal")]
        return b"".join(f.read_bytes() for f in files if f.exists())

    async def rows() -> bytes:
        conn = await asyncpg.connect(database)
        try:
            found = []
            for table in ("clients", "settings", "messages", "events"):
                found += [r[0] for r in await conn.fetch(f"SELECT t::text FROM {table} t")]
            return repr(found).encode()
        finally:
            await conn.close()

    return asyncio.run(rows())


def env_for(database: str, **extra: str) -> dict[str, str]:
    return clean_env(
        MOGATEWAY_DATABASE=database,
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        **extra,
    )


def assert_callback_uses(
    workdir: Path, env: dict[str, str], app: CallbackRecorder, token: str, secret: str, text: str
) -> None:
    """Start the gateway, push one MO, check its callback carries ``token`` and verifies with ``secret``."""
    serving = start_serve(workdir, env, log_name=f"serve-{text.lower()}")
    try:
        gw = GatewayClient(serving.url)
        accepted = gw.push(SC, text)
        assert gw.wait_state(accepted["id"])["state"] == "replied"
        (call,) = [c for c in app.calls if c.headers["x-mogateway-message-id"] == accepted["id"]]
        assert call.headers["authorization"] == f"Bearer {token}"
        assert verify_signature(call.body, call.headers, secret)
        gw.close()
    finally:
        serving.stop()
    for value in (token, secret):
        assert value not in serving.stderr()


def register_signing_client(
    workdir: Path, env: dict[str, str], app: CallbackRecorder, log_name: str
) -> dict[str, Any]:
    """Start the gateway, add a client of ``app`` that signs its callbacks, stop; the client's answer
    (with its token and signing secret, which the journal keeps as ``env`` says)."""
    serving = start_serve(workdir, env, log_name=log_name)
    try:
        gw = GatewayClient(serving.url)
        client = gw.add_client(shortcodes=[SC], callback_url=app.url, sign_callbacks=True)
        gw.close()
    finally:
        serving.stop()
    return client


def refused_start(workdir: Path, env: dict[str, str]) -> str:
    """Start ``mogateway serve`` expecting it to refuse; returns its one line."""
    done = run_cli(workdir, env, "serve", "--port", str(free_port()))
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_with_a_key_secrets_are_sealed_and_a_new_key_replaces_the_old(
    tmp_path: Path, database: str, app: CallbackRecorder
) -> None:
    first_key, second_key = new_key(), new_key()
    with_first = env_for(database, MOGATEWAY_SECRET_KEY=first_key)

    client = register_signing_client(tmp_path, with_first, app, log_name="register")
    token, secret = client["token"], client["signing_secret"]
    data = stored(database)
    assert client["id"].encode() in data
    assert token.encode() not in data and secret.encode() not in data

    # Restarted with the key: the same token and secret reach the application.
    assert_callback_uses(tmp_path, with_first, app, token, secret, "FIRST")

    # Without the key, or with another one: one line naming the setting, exit 2, nothing served.
    missing = refused_start(tmp_path, env_for(database))
    assert "MOGATEWAY_SECRET_KEY" in missing and "not set" in missing
    wrong = refused_start(tmp_path, env_for(database, MOGATEWAY_SECRET_KEY=second_key))
    assert "MOGATEWAY_SECRET_KEY" in wrong and key_id(parse_key(first_key)) in wrong
    assert first_key not in wrong and second_key not in wrong

    # Re-encrypt under the second key (keys from the environment, never the command line).
    replacing = env_for(database, MOGATEWAY_SECRET_KEY=second_key, MOGATEWAY_OLD_SECRET_KEY=first_key)
    done = run_cli(tmp_path, replacing, "secrets", "reencrypt")
    assert done.returncode == 0, done.stderr
    assert f"under key id {key_id(parse_key(second_key))}" in done.stdout
    assert f"(they were: 2 under key id {key_id(parse_key(first_key))})" in done.stdout  # token + secret
    assert first_key not in done.stdout + done.stderr and second_key not in done.stdout + done.stderr
    data = stored(database)
    assert token.encode() not in data and secret.encode() not in data

    old_only = refused_start(tmp_path, with_first)
    assert key_id(parse_key(second_key)) in old_only
    assert_callback_uses(
        tmp_path, env_for(database, MOGATEWAY_SECRET_KEY=second_key), app, token, secret, "SECOND"
    )


def test_plain_text_secrets_are_encrypted_when_a_key_is_first_set(
    tmp_path: Path, database: str, app: CallbackRecorder
) -> None:
    plain = env_for(database)
    client = register_signing_client(tmp_path, plain, app, log_name="plain")
    token, secret = client["token"], client["signing_secret"]
    assert token.encode() in stored(database)  # without a key: plain text, as documented

    no_key = run_cli(tmp_path, plain, "secrets", "reencrypt")
    assert no_key.returncode == 2 and "MOGATEWAY_SECRET_KEY" in no_key.stderr
    assert len(no_key.stderr.strip().splitlines()) == 1

    key = new_key()
    keyed = env_for(database, MOGATEWAY_SECRET_KEY=key)
    done = run_cli(tmp_path, keyed, "secrets", "reencrypt")
    assert done.returncode == 0, done.stderr
    assert "rewrote the secrets of 1 client" in done.stdout and "2 in plain text" in done.stdout
    data = stored(database)
    assert token.encode() not in data and secret.encode() not in data
    assert_callback_uses(tmp_path, keyed, app, token, secret, "KEYED")

    # And back: --plaintext stores them unencrypted again (encryption turned off).
    back = run_cli(tmp_path, keyed, "secrets", "reencrypt", "--plaintext")
    assert back.returncode == 0, back.stderr
    assert token.encode() in stored(database)
    assert_callback_uses(tmp_path, plain, app, token, secret, "PLAIN")


def test_a_bad_key_setting_is_named_and_never_echoed(tmp_path: Path) -> None:
    line = refused_start(tmp_path, env_for(str(tmp_path / "j.db"), MOGATEWAY_SECRET_KEY="not-a-key-at-all"))
    assert "secret_key (MOGATEWAY_SECRET_KEY)" in line and "not-a-key-at-all" not in line
    assert "mogateway secrets new-key" in line


def test_a_node_without_the_key_another_wrote_with_answers_a_problem_and_logs_one_line(
    tmp_path: Path, app: CallbackRecorder
) -> None:
    """Two ``mogateway serve`` (default workers) on one journal, started with different keys: what one
    seals, the other cannot open — it answers a problem and its log says so in one line a refresh."""
    journal = str(tmp_path / "shared.db")
    first_key, second_key = new_key(), new_key()
    with (
        serve_gateway(tmp_path, log_name="stale", database=journal, secret_key=second_key) as stale_node,
        serve_gateway(tmp_path, log_name="node", database=journal, secret_key=first_key) as node,
    ):
        node.add_client(shortcodes=[SC], callback_url=app.url, sign_callbacks=True)
        refused = stale_node.admin("GET", "/v1/clients")
        assert refused.status_code == 503
        assert refused.headers["content-type"] == "application/problem+json"
        assert "MOGATEWAY_SECRET_KEY" in refused.json()["detail"]
        wait_until(
            lambda: "registry refresh failed" in stale_node.stderr(), "a registry refresh that failed", 10
        )
    log = stale_node.stderr()
    refreshes = [line for line in log.splitlines() if "registry refresh failed" in line]
    assert refreshes and "Traceback" not in log  # one line each, no traceback
    for text in (log, node.stderr()):
        assert first_key not in text and second_key not in text
