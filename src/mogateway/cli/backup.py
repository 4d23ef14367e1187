"""``mogateway backup FILE`` and ``mogateway restore FILE``: a copy of the SQLite journal, and putting one
back (``edges.journal_backup``). A PostgreSQL journal is backed up with PostgreSQL's own tools
(``docs/operations.md``)."""

from __future__ import annotations

from pathlib import Path

import typer

from mogateway.cli.common import fail, print_json
from mogateway.cli.doctor_findings import size
from mogateway.cli.exit_codes import Exit

__all__ = ["register"]

_POSTGRES = (
    "the journal is PostgreSQL: back it up with PostgreSQL's own tools (pg_dump, or continuous "
    'archiving for point-in-time recovery) as docs/operations.md ("Backup and restore") shows'
)


def _journal(config: Path | None, database: str | None) -> str:
    """The SQLite file the settings name; fails for PostgreSQL and an in-memory database."""
    from mogateway.config import ConfigError, load_settings
    from mogateway.edges.journal_hold import sqlite_path

    try:
        settings = load_settings(config, database=database)
    except ConfigError as exc:
        fail(str(exc), Exit.USAGE)
    if settings.database.startswith(("postgresql://", "postgres://")):
        fail(_POSTGRES, Exit.USAGE)
    path = sqlite_path(settings.database)
    if path is None:
        fail("the journal is in memory: there is nothing to back up or restore", Exit.USAGE)
    return path


CONFIG_OPTION = typer.Option(None, "--config", "-c", help="TOML settings file (names the journal).")
DATABASE_OPTION = typer.Option(
    None, "--database", help="The journal's file (default: the database setting, mogateway.db)."
)


def register(app: typer.Typer) -> None:
    @app.command()
    def backup(
        file: Path = typer.Argument(..., help="Where to write the copy."),
        config: Path | None = CONFIG_OPTION,
        database: str | None = DATABASE_OPTION,
        force: bool = typer.Option(False, "--force", help="Replace FILE if it exists."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    ) -> None:
        """Copy the SQLite journal while the gateway serves, check the copy, say what it holds."""
        from mogateway.edges.journal_backup import BackupError
        from mogateway.edges.journal_backup import backup as take_backup

        journal = _journal(config, database)
        try:
            copy = take_backup(journal, str(file), overwrite=force)
        except BackupError as exc:
            fail(str(exc), Exit.FAILED)
        except OSError as exc:
            fail(f"cannot write {file}: {exc.strerror or exc}", Exit.FAILED)
        if as_json:
            print_json(
                {
                    "file": copy.path,
                    "messages": copy.messages,
                    "unfinished": copy.unfinished,
                    "schema_version": copy.schema_version,
                    "bytes": copy.size_bytes,
                    "seconds": round(copy.seconds, 3),
                    "integrity": "ok",
                }
            )
            return
        typer.echo(
            f"backup {copy.path}: {copy.messages} messages ({copy.unfinished} unfinished), "
            f"{size(copy.size_bytes)}, schema version {copy.schema_version}, integrity ok, "
            f"in {copy.seconds:.1f} s"
        )

    @app.command()
    def restore(
        file: Path = typer.Argument(..., help="The copy to put in place (made by `mogateway backup`)."),
        config: Path | None = CONFIG_OPTION,
        database: str | None = DATABASE_OPTION,
    ) -> None:
        """Put a copy in place of the SQLite journal, for a gateway that is stopped."""
        from mogateway.edges.journal_backup import BackupError
        from mogateway.edges.journal_backup import restore as put_back
        from mogateway.edges.journal_hold import HeldElsewhere

        journal = _journal(config, database)
        try:
            placed, kept = put_back(str(file), journal)
        except HeldElsewhere as exc:
            fail(f"{exc}: stop the gateway first (nothing was changed)", Exit.FAILED)
        except BackupError as exc:
            fail(f"{exc} (nothing was changed)", Exit.FAILED)
        except OSError as exc:
            fail(f"cannot restore into {journal}: {exc.strerror or exc}", Exit.FAILED)
        typer.echo(
            f"restored {placed.messages} messages ({placed.unfinished} unfinished) into {journal}"
            + (f"; the journal it replaced is kept as {kept}" if kept else "")
        )
