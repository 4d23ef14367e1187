"""The admin and ingest tokens: configured ones win; otherwise generated once, kept in the journal, and
written where only the gateway's owner can read them.

A service manager keeps stderr as the log, and tokens must never reach a log. So tokens the gateway
generates on its first start go to a file created with mode 0600 (under a temporary name, renamed into
place: never readable by others, not even for an instant, and never half written), and only its path is
logged; on an interactive terminal they are printed as well, for the person who just started the
gateway. The lines are ``MOGATEWAY_<NAME>_TOKEN=value``, so a shell can source the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

from mogateway.core.ports import SettingStore

__all__ = ["NAMES", "ensure_tokens", "tokens_file", "write_tokens_file"]

log = logging.getLogger("mogateway")

#: The tokens a gateway has, in the order :func:`ensure_tokens` answers them.
NAMES = ("admin", "ingest")


async def ensure_tokens(store: SettingStore, configured: Mapping[str, str | None], path: Path) -> list[str]:
    """The value of each token of :data:`NAMES`: ``configured[name]`` when set; else the one kept in
    ``store`` as ``<name>_token``; else a new one, kept there (the first of several processes to
    generate one wins) and written to ``path``."""
    generated: list[tuple[str, str]] = []
    values: list[str] = []
    for name in NAMES:
        value = configured.get(name)
        if value is None:
            value = await store.get_setting(f"{name}_token")
        if value is None:
            value = await store.set_setting_if_absent(f"{name}_token", secrets.token_urlsafe(32))
            generated.append((name, value))
        values.append(value)
    if generated:
        _tell(path, generated)
    return values


def _tell(path: Path, generated: list[tuple[str, str]]) -> None:
    what = " and ".join(name for name, _ in generated) + (" tokens" if len(generated) > 1 else " token")
    try:
        write_tokens_file(path, generated)
    except OSError as exc:
        log.warning("generated the %s (kept in the journal); could not write %s: %s", what, path, exc)
    else:
        log.warning("generated the %s: written to %s (readable by its owner only)", what, path.resolve())
    if sys.stderr.isatty():
        for name, value in generated:
            print(f"  {name} token: {value}", file=sys.stderr)
        sys.stderr.flush()


def tokens_file(configured: Path | None, database: str) -> Path:
    """``configured`` (the ``tokens_file`` setting); else next to a SQLite journal (``database``
    ``mogateway.db`` → ``mogateway.tokens``); else, for PostgreSQL, ``mogateway.tokens`` in the working
    directory."""
    if configured is not None:
        return configured
    if database.startswith(("postgresql://", "postgres://")):
        return Path("mogateway.tokens")
    return Path(database.removeprefix("sqlite://")).with_suffix(".tokens")


def write_tokens_file(path: Path, tokens: list[tuple[str, str]]) -> None:
    """Write ``(name, value)`` pairs to ``path``, mode 0600, replacing what was there. Raises OSError."""
    text = "# mogateway: tokens generated on first start (also kept in the journal)\n" + "".join(
        f"MOGATEWAY_{name.upper()}_TOKEN={value}\n" for name, value in tokens
    )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            os.fchmod(fh.fileno(), 0o600)  # O_CREAT's mode passes through the umask; be exact
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
