"""Generated tokens: where they are written and how, so that only the gateway's owner can read them.

A service manager keeps stderr as the log, and tokens must never reach a log. So tokens the gateway
generates on its first start go to a file created with mode 0600 (under a temporary name, renamed into
place: never readable by others, not even for an instant, and never half written), and only its path is
logged. The lines are ``MOGATEWAY_<NAME>_TOKEN=value``, so a shell can source the file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["tokens_file", "write_tokens_file"]


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
