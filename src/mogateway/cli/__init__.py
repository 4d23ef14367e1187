"""The ``mogateway`` command. Each group of subcommands lives in its own module with ``register(app)``."""

from __future__ import annotations

import typer

from mogateway.cli import (
    backup,
    clients,
    console,
    doctor,
    messages,
    migrate,
    secrets,
    send,
    serve,
    simulate,
    smsc,
    top,
    waba,
)

app = typer.Typer(
    name="mogateway",
    help="Inbound-SMS gateway for Indian shortcodes: run it, manage clients, inspect messages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Inbound-SMS gateway for Indian shortcodes: run it, manage clients, inspect messages."""


for _module in (serve, clients, console, messages, send, simulate, smsc, waba, migrate, secrets, top, backup,
                doctor):
    _module.register(app)


def main() -> None:
    """Entry point of the console script."""
    app()
