"""Migrate a WhatsApp business number to Meta's Cloud API: Graph client, steps, errors, state.

The CLI (``mogateway waba migrate``) is a thin layer over :class:`Migration`; scripts can call the
step functions in :mod:`mogateway.waba.steps` directly.
"""

from mogateway.waba.errors import Classification, ExitCode, GraphError, Kind, Retry, TransportError, classify
from mogateway.waba.graph import BackoffPolicy, GraphClient, GraphRequest
from mogateway.waba.migrate import Mark, Migration, MigrationOptions, MigrationStopped, MigrationUI, plan
from mogateway.waba.phone import PhoneError, PhoneNumber, parse_phone
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
