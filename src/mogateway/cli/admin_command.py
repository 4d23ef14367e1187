"""Commands that are one call to the admin API about one thing, its answer shown: made from a table.

Showing a client, rotating its token, replaying a message...: each takes the thing's id, ``--url``,
``--token`` and ``--json``, makes one call and prints the answer, as JSON or for people. They are made
here, so that their options, errors and output stay one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, print_json

__all__ = ["admin_command"]


def admin_command(
    app: typer.Typer, name: str, doc: str, *, key: str, method: str, path: str, render: Callable[[Any], None]
) -> None:
    """Add ``name`` to ``app``: one admin API call about the thing the argument ``key`` names (its value
    stands for ``{}`` in ``path``), the answer printed as JSON with ``--json``, else by ``render``. The
    argument is shown in the help and in errors as ``key``, as a parameter of that name would be."""

    def command(
        value: str = typer.Argument(..., metavar=key),
        url: str = URL_OPTION,
        token: str | None = TOKEN_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        data = ApiClient(url, token, "admin").call(method, path.format(value))
        print_json(data) if as_json else render(data)

    command.__doc__ = doc
    app.command(name)(command)
