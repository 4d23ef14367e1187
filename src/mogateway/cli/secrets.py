"""``mogateway secrets``: the key that encrypts client secrets at rest, and re-encrypting under a new one;
sealing the secrets of the settings (``config.sealed``) with the same key.

Keys are read from the settings only (``MOGATEWAY_SECRET_KEY`` / ``MOGATEWAY_OLD_SECRET_KEY`` or the
config file), and a value to seal from standard input, never from the command line: a process's
arguments are readable by every user of the machine (``ps``), its environment only by its owner.
"""

from __future__ import annotations

import collections
import getpass
import re
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mogateway.cli.common import fail
from mogateway.cli.exit_codes import Exit
from mogateway.config.sealed import BOUND, CONTEXTS, SealedValueError, is_sealed, open_value, seal_value

if TYPE_CHECKING:  # the settings and the journal's sealing are imported when a command runs
    from mogateway.config import Settings
    from mogateway.edges.storage.sealing import Sealer

__all__ = ["register"]

secrets_app = typer.Typer(help="Encryption of client secrets at rest.", no_args_is_help=True)


@secrets_app.command("new-key")
def new_key_command() -> None:
    """Print a new key for secret_key (32 random bytes, url-safe base64). Keep it out of shell history:
    `umask 077; mogateway secrets new-key > secret.key`."""
    from mogateway.edges.storage.sealing import new_key

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
    from mogateway.edges.storage.sealing import SecretKeyError
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
    import asyncio

    from mogateway.config import ConfigError, load_settings
    from mogateway.edges.storage.sealing import KEY_SETTING, OLD_KEY_SETTING, Sealer, parse_key

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
    _say_what_to_seal_again(settings, sealer.key_id)


#: The most a value to seal may be (an access token is a few hundred characters).
MAX_VALUE_BYTES = 16 * 1024


def _read_value() -> str:
    """The value to seal: typed without echo at a terminal, else standard input less its last newline."""
    if sys.stdin.isatty():
        return getpass.getpass("value to seal (not shown): ")
    data = sys.stdin.buffer.read(MAX_VALUE_BYTES + 1)
    if len(data) > MAX_VALUE_BYTES:
        fail(f"the value on standard input is longer than {MAX_VALUE_BYTES} bytes", Exit.USAGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        fail("the value on standard input is not UTF-8", Exit.USAGE)
    return text.removesuffix("\n").removesuffix("\r")


@secrets_app.command("seal")
def seal(
    context: str = typer.Option(
        ..., "--context", help=f"The setting the value is for: {', '.join(CONTEXTS)}."
    ),
    number: str = typer.Option(
        "",
        "--number",
        help="whatsapp.access_token only: the phone_number_id the token is for (it opens for it only).",
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML settings file."),
) -> None:
    """Seal a secret of the settings under secret_key (MOGATEWAY_SECRET_KEY) and print the sealed form.

    The value is read from standard input, never the command line:
    `mogateway secrets seal --context whatsapp.access_token --number 106540352242922 < token.txt`. An
    access token is sealed bound to its number. A value already sealed (under secret_key or
    old_secret_key, also an access token sealed before the binding) is sealed again under secret_key:
    the way to move the config file's sealed values to a new key. Write the printed `sealed:v1:…` in
    place of the secret.
    """
    from mogateway.config import ConfigError, load_settings
    from mogateway.edges.storage.sealing import KEY_SETTING, parse_key

    if context not in CONTEXTS:
        fail(f"--context must be one of {', '.join(CONTEXTS)} (got {context!r})", Exit.USAGE)
    if context in BOUND and not re.fullmatch(r"[0-9]{1,32}", number):
        fail(f"--number: {context} is sealed for one number: give its {BOUND[context]} (digits)", Exit.USAGE)
    if context not in BOUND and number:
        fail(f"--number is for {', '.join(BOUND)} only", Exit.USAGE)
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        fail(str(exc), Exit.USAGE)
    if settings.secret_key is None:
        fail(f"set {KEY_SETTING} to the key to seal with (`mogateway secrets new-key` makes one)", Exit.USAGE)
    key = parse_key(settings.secret_key.get_secret_value())
    old = [parse_key(settings.old_secret_key.get_secret_value())] if settings.old_secret_key else []
    value = _read_value()
    if is_sealed(value):
        try:
            value = open_value(
                value,
                context,
                [key, *old],
                setting="the sealed value on standard input",
                bound_to=number,
                accept_unbound=True,  # sealed before the binding: this is how it gets bound
            )
        except SealedValueError as exc:
            fail(str(exc), Exit.USAGE)
    if not value:
        fail("nothing to seal: the value on standard input is empty", Exit.USAGE)
    typer.echo(seal_value(key, value, context, bound_to=number))


def _settings_to_seal_again(settings: Settings, key_id: str | None) -> list[str]:
    """The settings' secrets not stored as ``key_id`` would store them (sealed under it; in clear
    without a key), each as a line saying how it is stored and the command that seals it again."""
    if settings.whatsapp is None:
        return []
    wanted = key_id or "clear"
    lines = []
    for name, (context, how) in settings.whatsapp.stored.items():
        if how == wanted:
            continue
        stored = "in clear" if how == "clear" else f"sealed under key id {how}"
        again = "" if key_id is None else f": mogateway secrets seal --context {context}"
        bound = re.search(r"access_token of ([0-9]+)", name)
        if again and context in BOUND and bound:
            again += f" --number {bound[1]}"
        lines.append(f"  {name}, {stored}{again}")
    return lines


def _say_what_to_seal_again(settings: Settings, key_id: str | None) -> None:
    """Settings live in the operator's file and environment, which this cannot rewrite: say what to do."""
    stale = _settings_to_seal_again(settings, key_id)
    if not stale:
        return
    if key_id is None:
        typer.echo("note: write these secrets of the settings in clear before removing the key:")
    else:
        typer.echo(
            "note: these secrets of the settings are not sealed under the new key, and this command does "
            "not rewrite your config file or environment; seal each (its value, clear or sealed, on "
            "standard input) and put the output in its place before removing old_secret_key:"
        )
    for line in stale:
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")
