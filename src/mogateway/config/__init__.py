"""Settings: a TOML file, overridden by ``MOGATEWAY_*`` environment variables, overridden by flags.

Every setting is documented in ``docs/configuration.md``. An invalid setting stops start-up with one
line naming it (see :func:`describe_error`).

The settings are plain data: this package imports no adapter (``edges`` reads its models from here —
``config.smpp`` for the binds, ``config.nats`` for JetStream, ``config.secret_key`` for the key's
shape — never the other way round).

This package's root imports nothing heavy itself: ``ConfigError``, ``Settings``, ``load_settings`` and
``describe_error`` live in ``config.settings`` (pydantic), loaded on first use, so that a CLI command
that never reads the settings (``mogateway --help``, ``mogateway messages list``) starts without
pydantic, and ``config.sealed`` is read without it (cli/__init__.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mogateway.config.settings import ConfigError, Settings, describe_error, load_settings

__all__ = ["ConfigError", "Settings", "describe_error", "load_settings"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mogateway.config import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
