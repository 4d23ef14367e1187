"""The journal the settings name, and the admin and ingest tokens kept in it: what every process of a
gateway opens first.

A gateway's node (``mogateway.node``), the supervisor of its worker processes (which opens the journal
once before they start: schema, tokens) and the commands that work on the journal (``mogateway
secrets``) open it the same way. Here rather than in ``node.py`` so that the supervisor opens it without
loading what a node runs (the dispatcher, the binds, the HTTP clients): it holds only this, the settings
and its workers.
"""

from __future__ import annotations

from mogateway.config import Settings
from mogateway.core.ports import Journal
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.edges.tokens import ensure_tokens, tokens_file

__all__ = ["load_tokens", "open_journal", "sealer_for"]


def open_journal(
    settings: Settings, sealer: Sealer | None = None, *, lock_path: str | None = None
) -> Journal:
    """The journal the ``database`` setting names: a SQLite path, or a PostgreSQL URL; client secrets
    sealed with ``secret_key`` when it is set (or by ``sealer``). ``lock_path``: the lock the worker
    processes of one gateway take turns on to write a SQLite file."""
    url = settings.database
    sealer = sealer or sealer_for(settings)
    if url.startswith(("postgresql://", "postgres://")):
        from mogateway.edges.storage.postgres import PostgresJournal  # asyncpg: only when configured

        return PostgresJournal(url, sealer=sealer)
    if url.startswith("sqlite://"):
        url = url.removeprefix("sqlite://")
    return SqliteJournal(url, synchronous=settings.journal_sync, sealer=sealer, lock_path=lock_path)


def sealer_for(settings: Settings) -> Sealer:
    """The sealer of client secrets the ``secret_key`` and ``old_secret_key`` settings make."""
    key, old = settings.secret_key, settings.old_secret_key
    return Sealer.from_settings_values(
        key.get_secret_value() if key else None, old.get_secret_value() if old else None
    )


async def load_tokens(settings: Settings, journal: Journal) -> tuple[str, str]:
    """The admin and ingest tokens (``edges.tokens``): configured ones win; otherwise generated once and
    kept in the journal, and written to the tokens file."""
    configured = {
        "admin": settings.admin_token.get_secret_value() if settings.admin_token else None,
        "ingest": settings.ingest_token.get_secret_value() if settings.ingest_token else None,
    }
    admin, ingest = await ensure_tokens(
        journal, configured, tokens_file(settings.tokens_file, settings.database)
    )
    return admin, ingest
