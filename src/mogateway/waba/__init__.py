"""Migrate a WhatsApp business number to Meta's Cloud API: Graph client, steps, errors, state.

The CLI (``mogateway waba migrate``) is a thin layer over :class:`Migration`, which walks the steps
listed once in :data:`mogateway.waba.flow.FLOW` (the dry run's :func:`plan` lists the same steps'
calls); scripts can call the Graph call functions in :mod:`mogateway.waba.calls` directly.

The names below are loaded on first use (``mogateway.waba.GraphClient`` imports ``waba.graph`` then), so
that the CLI lists ``mogateway waba`` without loading the migration (cli/__init__.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mogateway.waba.errors import (
        Classification,
        ExitCode,
        GraphError,
        Kind,
        MigrationStopped,
        Retry,
        TransportError,
        classify,
    )
    from mogateway.waba.flow.dry_run import plan
    from mogateway.waba.flow.migration import Migration
    from mogateway.waba.graph import BackoffPolicy, GraphClient, GraphRequest
    from mogateway.waba.options import MigrationOptions
    from mogateway.waba.phone import PhoneError, PhoneNumber, parse_phone
    from mogateway.waba.prompts import Mark, MigrationUI
    from mogateway.waba.state import MigrationState, StateFile, StateFileError, Step

__all__ = [
    "BackoffPolicy",
    "Classification",
    "ExitCode",
    "GraphClient",
    "GraphError",
    "GraphRequest",
    "Kind",
    "Mark",
    "Migration",
    "MigrationOptions",
    "MigrationState",
    "MigrationStopped",
    "MigrationUI",
    "PhoneError",
    "PhoneNumber",
    "Retry",
    "StateFile",
    "StateFileError",
    "Step",
    "TransportError",
    "classify",
    "parse_phone",
    "plan",
]

#: Where each name of ``__all__`` is defined.
_HOME = {
    "BackoffPolicy": "mogateway.waba.graph",
    "Classification": "mogateway.waba.errors",
    "ExitCode": "mogateway.waba.errors",
    "GraphClient": "mogateway.waba.graph",
    "GraphError": "mogateway.waba.errors",
    "GraphRequest": "mogateway.waba.graph",
    "Kind": "mogateway.waba.errors",
    "Mark": "mogateway.waba.prompts",
    "Migration": "mogateway.waba.flow.migration",
    "MigrationOptions": "mogateway.waba.options",
    "MigrationState": "mogateway.waba.state",
    "MigrationStopped": "mogateway.waba.errors",
    "MigrationUI": "mogateway.waba.prompts",
    "PhoneError": "mogateway.waba.phone",
    "PhoneNumber": "mogateway.waba.phone",
    "Retry": "mogateway.waba.errors",
    "StateFile": "mogateway.waba.state",
    "StateFileError": "mogateway.waba.state",
    "Step": "mogateway.waba.state",
    "TransportError": "mogateway.waba.errors",
    "classify": "mogateway.waba.errors",
    "parse_phone": "mogateway.waba.phone",
    "plan": "mogateway.waba.flow.dry_run",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
