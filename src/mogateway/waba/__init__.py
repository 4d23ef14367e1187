"""Migrate a WhatsApp business number to Meta's Cloud API: Graph client, steps, errors, state.

The CLI (``mogateway waba migrate``) is a thin layer over :class:`Migration`, which walks the steps
listed once in :data:`mogateway.waba.flow.FLOW` (the dry run's :func:`plan` lists the same steps'
calls); scripts can call the Graph call functions in :mod:`mogateway.waba.calls` directly.
"""

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
