"""The ``mogateway`` command. Each group of subcommands lives in its own module with ``register(app)``.

Every command answers within 0.3 s (``bench/cli_startup.py``, docs/benchmarks.md §0.17), so running one
command must load neither the server it drives nor the other commands. The rules:

* The root group is lazy (:class:`LazyGroup`): it knows each command's name, module and one-line summary
  from :data:`COMMANDS`, and imports a command's module only when that command is run or asked for its
  help. ``mogateway --help`` imports no command module at all: it prints the summaries.
  ``tests/cli/test_cli_startup.py`` checks that :data:`COMMANDS` names exactly what the modules register,
  with the summaries their help starts with.
* Help is typer's plain (click) rendering, not rich's panels: rich's help renderer (rich.markdown,
  rich.traceback, pygments) took longer to import than the rest of a command's start.
* A command module imports at its top only what defining its options and help needs: typer,
  ``cli.common``, ``cli.exit_codes`` and light constants. Whatever does the work — the settings
  (pydantic), the gateway, the API, aiohttp, httpx, asyncpg, NATS, the migration — is imported inside
  the command's function (or in a ``*_run`` module the command imports, as ``simulate`` does), and types
  only used in annotations under ``if TYPE_CHECKING:``.
* ``tests/cli/test_cli_startup.py`` fails when ``import mogateway.cli``, or any command's ``--help``,
  loads any of the server's packages, or when a command's help loads another command's module.

Adding a command is one line in :data:`COMMANDS` (the order is the order of ``mogateway --help``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import typer
from typer.core import TyperGroup

#: Every top-level command, in help order: its name, the module of ``mogateway.cli`` whose ``register(app)``
#: adds it, and the summary ``mogateway --help`` shows (its short help; a test keeps them equal).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "serve",
        "serve",
        "Run the gateway on its embedded default (SQLite journal, in-process queue) or as configured.",
    ),
    ("send", "send", "Push one MO to the gateway's ingest API (and optionally wait for its outcome)."),
    (
        "simulate",
        "simulate",
        "Send a contract-exact MO to URL and report how the gateway would judge the answer.",
    ),
    (
        "smsc-sim",
        "smsc",
        "Run an SMSC simulator: accepts binds, prints submit_sm, sends receipts, injects MOs you type.",
    ),
    ("migrate", "migrate", "Apply the journal's schema migrations (PostgreSQL)."),
    ("top", "top", "The Overview in the terminal: live MO/s and replies/s, outcomes, clients, binds."),
    (
        "backup",
        "backup",
        "Copy the SQLite journal while the gateway serves, check the copy, say what it holds.",
    ),
    ("restore", "backup", "Put a copy in place of the SQLite journal, for a gateway that is stopped."),
    (
        "doctor",
        "doctor",
        "Check the settings, journal, queue, binds, limits and clients; one line each, with what to do.",
    ),
    ("clients", "clients", "Register and manage client applications."),
    ("console", "console", "The web console: its sessions."),
    ("messages", "messages", "Find messages, read their timelines, replay them."),
    (
        "waba",
        "waba",
        "Move a WhatsApp business number to Meta's Cloud API (and rehearse it against a fake Graph API).",
    ),
    ("secrets", "secrets", "Encryption of client secrets at rest."),
)

#: The modules of ``mogateway.cli`` that add commands, each with ``register(app)``.
COMMAND_MODULES = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))


def load_commands(module: str) -> dict[str, Any]:
    """The click commands that ``mogateway.cli.<module>`` registers, by name, rendered as the root renders
    them (plain help, no pretty exceptions)."""
    holder = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False)
    holder.callback()(_root)  # a callback: typer makes a group even of a module with one command
    importlib.import_module(f"mogateway.cli.{module}").register(holder)
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup)
    return dict(group.commands)


class _LazyCommands(Mapping[str, Any]):
    """The root's commands: names known up front, each module imported on first lookup."""

    def __init__(self) -> None:
        self._modules = {name: module for name, module, _ in COMMANDS}
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            module = self._modules[name]  # KeyError: no such command
            self._loaded.update(load_commands(module))
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


class LazyGroup(TyperGroup):
    """The root group: imports a command's module only when the command is looked up (module docstring),
    and lists the commands from :data:`COMMANDS` without importing any."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()  # type: ignore[assignment]  # read-only: commands come from COMMANDS

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        limit = formatter.width - 6 - max(len(name) for name, _, _ in COMMANDS)
        rows = [(name, _shorten(summary, limit)) for name, _, summary in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _shorten(text: str, limit: int) -> str:
    """What click's ``get_short_help_str`` makes of a one-line help: cut at a word, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 3, 1)].rsplit(" ", 1)[0]
    return cut.rstrip(" .,;:") + "..."


app = typer.Typer(
    name="mogateway",
    cls=LazyGroup,
    help="Inbound-SMS gateway for Indian shortcodes: run it, manage clients, inspect messages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},  # plain help is 80 columns at most otherwise
)


@app.callback()
def _root() -> None:
    """Inbound-SMS gateway for Indian shortcodes: run it, manage clients, inspect messages."""


def main() -> None:
    """Entry point of the console script."""
    app()
