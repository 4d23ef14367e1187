"""``mogateway secrets``: the key that encrypts client secrets at rest, and re-encrypting under a new one.

Keys are read from the settings only (``MOGATEWAY_SECRET_KEY`` / ``MOGATEWAY_OLD_SECRET_KEY`` or the
config file), never from the command line: a process's arguments are readable by every user of the
machine (``ps``), its environment only by its owner.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
from pathlib import Path

import typer

from mogateway.cli.common import fail
from mogateway.cli.exit_codes import Exit
from mogateway.config import ConfigError, Settings, load_settings
from mogateway.edges.storage.sealing import (
    KEY_SETTING,
    OLD_KEY_SETTING,
    Sealer,
    SecretKeyError,
    new_key,
    parse_key,
)

__all__ = ["register"]

secrets_app = typer.Typer(help="Encryption of client secrets at rest.", no_args_is_help=True)


@secrets_app.command("new-key")
def new_key_command() -> None:
    """Print a new key for secret_key (32 random bytes, url-safe base64). Keep it out of shell history:
    `umask 077; mogateway secrets new-key > secret.key`."""
    typer.echo(new_key())


def _sqlite_path(settings: Settings) -> Path | None:
    database = settings.database
    if database.startswith(("postgresql://", "postgres://")):
        return None
    return Path(database.removeprefix("sqlite://"))


def _truncate_wal(path: Path) -> bool:
    """Empty the SQLite write-ahead log, where earlier versions of the rewritten documents may still be.
    False when a reader kept it from completing (a running gateway in the middle of a read)."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        busy = int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
    finally:
        conn.close()
    return busy == 0


async def _rewrite(settings: Settings, sealer: Sealer) -> int:
    from mogateway.node import open_journal

    journal = open_journal(settings, sealer)
    try:
        await journal.open()
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        fail(f"cannot open the journal: {exc}", Exit.FAILED)
    try:
        clients = await journal.list_clients()
        for client in clients:
            # Same document, same updated_at: only how its secrets are stored changes, so other nodes
            # have nothing to reload.
            await journal.put_client(client)
        return len(clients)
    except SecretKeyError as exc:
        fail(str(exc), Exit.USAGE)
    finally:
        await journal.close()


def _describe(opened: collections.Counter[str]) -> str:
    parts = [
        f"{n} in plain text" if kind == "plaintext" else f"{n} under key id {kind}"
        for kind, n in sorted(opened.items())
        if kind != "empty"
    ]
    return ", ".join(parts) or "none"


@secrets_app.command("reencrypt")
def reencrypt(
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML settings file."),
    plaintext: bool = typer.Option(
        False, "--plaintext", help="Store the secrets in plain text again (turning encryption off)."
    ),
) -> None:
    """Rewrite every client's token and signing secrets under secret_key (MOGATEWAY_SECRET_KEY).

    Secrets in plain text are encrypted; secrets under another key are opened with old_secret_key
    (MOGATEWAY_OLD_SECRET_KEY). Safe to run again; make no client changes while it runs.
    """
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        fail(str(exc), Exit.USAGE)
    key = settings.secret_key.get_secret_value() if settings.secret_key else None
    old = settings.old_secret_key.get_secret_value() if settings.old_secret_key else None
    if key is None and not plaintext:
        fail(
            f"set {KEY_SETTING} to the key to encrypt with, and the key it replaces (if any) as "
            f"{OLD_KEY_SETTING}; or pass --plaintext to store the secrets unencrypted",
            2,
        )
    known = [parse_key(k) for k in (key, old) if k]
    sealer = Sealer(None, known) if plaintext else Sealer(known[0], known[1:])

    count = asyncio.run(_rewrite(settings, sealer))
    where = "in plain text" if sealer.key_id is None else f"under key id {sealer.key_id}"
    # One unwrapped line (scripts read it), whatever the terminal's width.
    typer.echo(
        f"rewrote the secrets of {count} client{'s' if count != 1 else ''} {where} "
        f"(they were: {_describe(sealer.opened)})"
    )
    path = _sqlite_path(settings)
    if path is not None and path.is_file() and not _truncate_wal(path):
        typer.echo(
            "note: the journal's write-ahead log could not be emptied now (a reader was busy) and may "
            "still hold the documents as they were; run this again while the gateway is stopped"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")
