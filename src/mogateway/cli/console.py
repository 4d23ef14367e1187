"""``mogateway console``: the web console's sessions, managed from the command line.

``mogateway console sessions revoke --all`` signs every browser out of the console at once, on every
worker and node (the sessions live in the journal), through the running gateway's admin API
(``POST /v1/console/sessions/revoke``). Rotating the admin token does it too: a session is bound to
the token it was opened with (docs/console.md).
"""

from __future__ import annotations

import typer

from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, console, fail, print_json
from mogateway.cli.exit_codes import Exit

__all__ = ["register"]

console_app = typer.Typer(help="The web console: its sessions.", no_args_is_help=True)
sessions_app = typer.Typer(help="Signed-in console sessions.", no_args_is_help=True)


@sessions_app.command("revoke")
def revoke(
    every: bool = typer.Option(False, "--all", help="End every session (sign out everywhere)."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """End console sessions: with --all, every browser signed in to the console is signed out."""
    if not every:
        fail("say which sessions: --all (sign out everywhere) is the only choice", Exit.USAGE)
    ended = ApiClient(url, token, "admin").call("POST", "/v1/console/sessions/revoke")
    if as_json:
        print_json(ended)
        return
    count = int(ended["revoked"])
    console.print(f"Signed out everywhere: {count} console session{'' if count == 1 else 's'} ended.")


def register(app: typer.Typer) -> None:
    console_app.add_typer(sessions_app, name="sessions")
    app.add_typer(console_app, name="console")
