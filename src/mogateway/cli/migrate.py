"""``mogateway migrate``: bring a PostgreSQL journal's schema up to this mogateway's version."""

from __future__ import annotations

import os

import typer

from mogateway.cli.common import console, fail
from mogateway.cli.exit_codes import Exit

__all__ = ["register"]


async def _run(url: str, check_only: bool) -> tuple[int, list[str]]:
    import asyncpg

    from mogateway.edges.storage import migrations
    from mogateway.edges.storage.postgres import redact_url

    where = redact_url(url)
    try:
        conn = await asyncpg.connect(url, timeout=10)
    except (TimeoutError, OSError) as exc:
        fail(f"cannot connect to {where}: {exc}", Exit.UNREACHABLE)
    except asyncpg.PostgresError as exc:
        fail(f"{where} refused the connection: {exc}", Exit.UNREACHABLE)
    try:
        if check_only:
            version = await migrations.applied_version(conn)
            return version, []
        try:
            done = await migrations.migrate(conn)
        except asyncpg.PostgresError as exc:
            fail(f"migration failed on {where} (nothing of the failed step was kept): {exc}", Exit.FAILED)
        return migrations.LATEST, [f"{m.version:04d}_{m.name}" for m in done]
    finally:
        await conn.close()


def register(app: typer.Typer) -> None:
    @app.command()
    def migrate(
        database: str | None = typer.Option(
            None,
            "--database",
            help="The journal: a postgresql:// URL (default: MOGATEWAY_DATABASE).",
            show_default=False,
        ),
        check: bool = typer.Option(
            False, "--check", help="Only report; exit 6 when the schema is behind this mogateway."
        ),
    ) -> None:
        """Apply the journal's schema migrations (PostgreSQL). Safe to run again and from several nodes."""
        import asyncio

        from mogateway.edges.storage import migrations

        url = database or os.environ.get("MOGATEWAY_DATABASE", "")
        if not url:
            fail("no database: pass --database postgresql://... or set MOGATEWAY_DATABASE", Exit.USAGE)
        if not url.startswith(("postgresql://", "postgres://")):
            # The embedded SQLite journal creates and upgrades its own schema when it opens.
            console.print("SQLite journal: its schema is created and upgraded on start; nothing to do.")
            raise typer.Exit(Exit.OK)
        version, applied = asyncio.run(_run(url, check))
        if check:
            if version < migrations.LATEST:
                fail(
                    f"schema version {version}, this mogateway needs {migrations.LATEST}: "
                    "run `mogateway migrate`",
                    Exit.NOT_YET,
                )
            if version > migrations.LATEST:
                newer = f"schema version {version} is newer than this mogateway ({migrations.LATEST})"
                fail(newer, Exit.FAILED)
            console.print(f"schema is up to date (version {version})")
            return
        for name in applied:
            console.print(f"applied {name}")
        console.print(
            f"schema is at version {version}" + ("" if applied else " (already up to date)"),
            highlight=False,
        )
