"""What the CLI commands that talk to a running gateway share: where it is, tokens, output, errors."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import typer

from mogateway.cli.exit_codes import Exit

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ApiClient", "console", "fail", "print_json"]


class _LazyConsole:
    """A rich ``Console`` made at its first use, so that a command that prints nothing through rich (every
    ``--help``, most errors never raised) starts without importing rich's console (cli/__init__.py).
    Attributes are read from and set on the console itself (tests set its ``_width``)."""

    __slots__ = ("_lazy_console", "_lazy_options")

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_lazy_options", options)
        object.__setattr__(self, "_lazy_console", None)

    def _made(self) -> Console:
        made: Console | None = object.__getattribute__(self, "_lazy_console")
        if made is None:
            from rich.console import Console

            options = object.__getattribute__(self, "_lazy_options")
            made = Console(**options)
            # As a console made at import: the terminal's size (COLUMNS, LINES) read when printing, not
            # frozen at the first print (a test's CliRunner sets COLUMNS for one invocation).
            if "width" not in options:
                made._width = None
            if "height" not in options:
                made._height = None
            object.__setattr__(self, "_lazy_console", made)
        return made

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._made(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._made(), name)


console = cast("Console", _LazyConsole())
err_console = cast("Console", _LazyConsole(stderr=True, soft_wrap=True))

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
        import http.client

        headers = self._headers if content_type is None else {**self._headers, "content-type": content_type}
        try:
            status, reason, body = _request(
                method,
                self.url + path,
                headers=headers,
                params={k: v for k, v in (params or {}).items() if v is not None},
                json_body=json_body,
                content=content,
            )
        except (OSError, http.client.HTTPException) as exc:
            fail(
                f"cannot reach the gateway at {self.url} ({exc}); is `mogateway serve` running?",
                EXIT_UNREACHABLE,
            )
        if status == 204:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            data = {"detail": body[:200].decode("utf-8", "replace")}
        if status >= 400:
            detail = data.get("detail") if isinstance(data, dict) else None
            code = EXIT_NOT_FOUND if status == 404 else EXIT_API_ERROR
            fail(f"{status}: {detail or reason}", code)
        return data


#: The most of an answer the CLI reads (a page of messages is well under it).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: Seconds to connect, and between two reads of an answer.
TIMEOUT_S = 30.0


def _request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    params: dict[str, Any],
    json_body: Any,
    content: bytes | None,
) -> tuple[int, str, bytes]:
    """One request with the standard library's HTTP client (importing httpx took a quarter of a command's
    start: docs/benchmarks.md §0.17): the status, its reason and the body. Raises OSError or
    ``http.client.HTTPException`` when the gateway cannot be reached."""
    import http.client
    from urllib.parse import quote, urlencode, urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--url must be an http:// or https:// URL, not {url!r}", EXIT_USAGE)
    target = quote(parts.path or "/", safe="/:@!$&'()*+,;=-._~%")
    query = urlencode({k: _query_value(v) for k, v in params.items()})
    if parts.query or query:
        target += "?" + "&".join(q for q in (parts.query, query) if q)
    headers = {"accept": "application/json", **headers}
    if json_body is not None:
        content = json.dumps(json_body, ensure_ascii=False).encode()
        headers.setdefault("content-type", "application/json")
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        port = parts.port
    except ValueError as exc:
        fail(f"--url {url!r}: {exc}", EXIT_USAGE)
    conn = conn_class(parts.hostname, port, timeout=TIMEOUT_S)
    try:
        conn.request(method, target, body=content, headers=headers)
        resp = conn.getresponse()
        body = resp.read(MAX_ANSWER_BYTES + 1)
    finally:
        conn.close()
    if len(body) > MAX_ANSWER_BYTES:
        fail(f"the gateway's answer is larger than {MAX_ANSWER_BYTES} bytes", EXIT_API_ERROR)
    return resp.status, resp.reason, body


def _query_value(value: Any) -> str:
    """A query value as httpx wrote it: booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


URL_OPTION = typer.Option(
    "http://127.0.0.1:8080", "--url", envvar="MOGATEWAY_URL", help="Where the gateway's API is."
)
TOKEN_OPTION = typer.Option(
    None,
    "--token",
    help="Bearer token (default: MOGATEWAY_ADMIN_TOKEN / _INGEST_TOKEN, or the local journal).",
)
JSON_OPTION = typer.Option(False, "--json", help="Print JSON for scripts.")
