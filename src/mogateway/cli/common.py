"""What the CLI commands that talk to a running gateway share: where it is, tokens, output, errors."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from mogateway.cli.exit_codes import Exit

__all__ = ["ApiClient", "console", "fail", "print_json"]

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

#: Exit codes of the CLI (cli/exit_codes.py), under the names the commands use.
EXIT_USAGE = Exit.USAGE
EXIT_UNREACHABLE = Exit.UNREACHABLE
EXIT_API_ERROR = Exit.REFUSED
EXIT_NOT_FOUND = Exit.NOT_FOUND


def fail(message: str, code: int = Exit.FAILED) -> NoReturn:
    """Print one clear line to stderr and exit with ``code``."""
    err_console.print(f"[red]mogateway:[/red] {message}", highlight=False, markup=True)
    raise typer.Exit(code)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _token_from_journal(name: str) -> str | None:
    """On the gateway's own machine, read a generated token from the journal (SQLite only)."""
    database = os.environ.get("MOGATEWAY_DATABASE", "mogateway.db")
    if "://" in database or not Path(database).is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=2)
        try:
            row = conn.execute("SELECT value FROM settings WHERE key=?", (f"{name}_token",)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])


class ApiClient:
    """A small HTTP client for the gateway's API with CLI-friendly errors."""

    def __init__(self, url: str, token: str | None, token_name: str) -> None:
        self.url = url.rstrip("/")
        token = (
            token
            or os.environ.get(f"MOGATEWAY_{token_name.upper()}_TOKEN")
            or _token_from_journal(token_name)
        )
        if not token:
            fail(
                f"no {token_name} token: pass --token, set MOGATEWAY_{token_name.upper()}_TOKEN, "
                "or run this where the gateway's mogateway.db is",
                EXIT_USAGE,
            )
        self._headers = {"authorization": f"Bearer {token}"}

    @property
    def headers(self) -> dict[str, str]:
        """The authorization header, for commands that poll with their own client (``top``)."""
        return dict(self._headers)

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
        content_type: str | None = None,
    ) -> Any:
        import httpx  # here: the CLI starts without the HTTP stack (cli/__init__.py)

        headers = self._headers if content_type is None else {**self._headers, "content-type": content_type}
        try:
            resp = httpx.request(
                method,
                self.url + path,
                json=json_body,
                content=content,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers=headers,
                timeout=30.0,
            )
        except httpx.HTTPError as exc:
            fail(
                f"cannot reach the gateway at {self.url} ({exc}); is `mogateway serve` running?",
                EXIT_UNREACHABLE,
            )
        if resp.status_code == 204:
            return None
        try:
            data = resp.json()
        except ValueError:
            data = {"detail": resp.text[:200]}
        if resp.status_code >= 400:
            detail = data.get("detail") if isinstance(data, dict) else None
            code = EXIT_NOT_FOUND if resp.status_code == 404 else EXIT_API_ERROR
            fail(f"{resp.status_code}: {detail or resp.reason_phrase}", code)
        return data


URL_OPTION = typer.Option(
    "http://127.0.0.1:8080", "--url", envvar="MOGATEWAY_URL", help="Where the gateway's API is."
)
TOKEN_OPTION = typer.Option(
    None,
    "--token",
    help="Bearer token (default: MOGATEWAY_ADMIN_TOKEN / _INGEST_TOKEN, or the local journal).",
)
JSON_OPTION = typer.Option(False, "--json", help="Print JSON for scripts.")
