"""The ``mogateway`` command. Each group of subcommands lives in its own module with ``register(app)``.

Every command answers in well under a second (``bench/cli_startup.py``, docs/benchmarks.md), so listing
the commands must not load the server they drive. The rules:

* A command module imports at its top only what defining its options and help needs: typer, rich,
  ``cli.common``, ``cli.exit_codes`` and light constants. Whatever does the work — the settings
  (pydantic), the gateway, the API, aiohttp, httpx, asyncpg, NATS, the migration — is imported inside
  the command's function (or in a ``*_run`` module the command imports, as ``simulate`` does), and types
  only used in annotations under ``if TYPE_CHECKING:``.
* ``tests/cli/test_cli_startup.py`` fails when ``import mogateway.cli``, or ``mogateway --help``, loads
  any of the server's packages.

Adding a command module is one line: its name in :data:`COMMAND_MODULES` (the order is the order of
``mogateway --help``).
"""

from __future__ import annotations

import importlib

import typer

#: The modules of ``mogateway.cli`` that add commands, each with ``register(app)``, in help order.
COMMAND_MODULES = (
    "serve",
    "clients",
    "console",
    "messages",
    "send",
    "simulate",
    "smsc",
    "waba",
    "migrate",
    "secrets",
    "top",
    "backup",
    "doctor",
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


for _name in COMMAND_MODULES:
    importlib.import_module(f"mogateway.cli.{_name}").register(app)


def main() -> None:
    """Entry point of the console script."""
    app()
