"""``mogateway doctor``: one command an operator runs before calling for help.

It prints the settings it resolved (secrets hidden), then one line per finding (``cli.doctor_checks``):
``ok``, ``warn`` or ``FAIL``, what was found and what to do. Exit code 0 when nothing failed (warnings
included), 1 when something did; ``--json`` prints the same for scripts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mogateway.cli.common import fail, print_json
from mogateway.cli.exit_codes import Exit

if TYPE_CHECKING:
    from mogateway.config import Settings

__all__ = ["register"]

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def _gateway_url(settings: Settings) -> str:
    host = settings.host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def _admin_token(settings: Settings, given: str | None) -> str | None:
    """The admin token: given, configured, or (SQLite) the one the gateway generated into its journal."""
    if given:
        return given
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value()
    from mogateway.edges.journal_hold import sqlite_path

    path = sqlite_path(settings.database)
    if path is None or not os.path.exists(path):
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        try:
            row = conn.execute("SELECT value FROM settings WHERE key='admin_token'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        config: Path | None = typer.Option(None, "--config", "-c", help="TOML settings file."),
        url: str | None = typer.Option(
            None, "--url", help="Where the running gateway's API is (default: from host and port)."
        ),
        token: str | None = typer.Option(
            None, "--token", envvar="MOGATEWAY_DOCTOR_TOKEN", help="Admin token, to read the binds' states."
        ),
        backups: list[str] = typer.Option(
            [],
            "--backups",
            help="A backup file, or a directory of them, whose modes to check (repeat for several).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    ) -> None:
        """Check the settings, journal, queue, binds, limits and clients; one line each, with what to do."""
        import asyncio

        from mogateway.cli.doctor_checks import run_checks, settings_view
        from mogateway.config import ConfigError, load_settings

        try:
            settings = load_settings(config)
        except ConfigError as exc:
            fail(str(exc), Exit.USAGE)
        where = (url or _gateway_url(settings)).rstrip("/")
        findings = asyncio.run(run_checks(settings, where, _admin_token(settings, token), backups))
        failed = any(f.status == "fail" for f in findings)
        if as_json:
            print_json(
                {
                    "ok": not failed,
                    "settings": settings_view(settings),
                    "findings": [f.as_dict() for f in findings],
                }
            )
        else:
            typer.echo(f"settings ({config or 'no config file'}, MOGATEWAY_* variables; secrets hidden):")
            for name, value in settings_view(settings).items():
                shown = json.dumps(value) if isinstance(value, dict | list) else value
                typer.echo(f"  {name} = {shown}")
            typer.echo("")
            for f in findings:
                line = f"{_MARK[f.status]}  {f.check}: {f.detail}"
                typer.echo(line + (f" -> {f.action}" if f.action and f.status != "ok" else ""))
            problems = sum(f.status == "fail" for f in findings)
            warnings = sum(f.status == "warn" for f in findings)
            typer.echo(f"\n{problems} failed, {warnings} warnings, {len(findings)} checks")
        raise typer.Exit(Exit.FAILED if failed else Exit.OK)
