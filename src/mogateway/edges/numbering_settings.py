"""The sender resolver the ``series_csv`` and ``ported_csv`` settings make, a bad file refused as a
setting.

A node makes it when it is built (``mogateway.node``); the supervisor of the worker processes makes it
once before it starts them, so that a bad file is said once, in one line, and the gateway does not start.
Here so that the supervisor checks the files without loading the node.
"""

from __future__ import annotations

from mogateway.config import ConfigError, Settings
from mogateway.core.numbering import NumberingDataError, SenderResolver
from mogateway.edges.numbering_files import sender_resolver

__all__ = ["sender_resolver_for"]


def sender_resolver_for(settings: Settings) -> SenderResolver:
    """Operator/circle resolution with the operator's own tables, if configured.

    A bad file raises ConfigError naming the setting and the file's line.
    """
    try:
        return sender_resolver(settings.series_csv, settings.ported_csv)
    except NumberingDataError as exc:
        text = str(exc)
        setting = "series_csv" if settings.series_csv and str(settings.series_csv) in text else "ported_csv"
        raise ConfigError(f"invalid setting {setting} (MOGATEWAY_{setting.upper()}): {text}") from None
