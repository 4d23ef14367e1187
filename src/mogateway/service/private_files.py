"""Files that hold secrets and personal data are the gateway's user's alone, whatever the umask.

The journal (and SQLite's ``-wal`` and ``-shm`` beside it, which SQLite creates with the journal's own
permissions), backups, restored journals and retention exports hold the generated tokens in clear,
numbers and texts. Each is created :data:`FILE_MODE` (0600) and each directory the gateway creates for
them :data:`DIRECTORY_MODE` (0700): the mode is given when the file is created and set again with
``fchmod``/``chmod``, so neither a permissive umask (022 gives 0644) nor a stricter one changes it.
A file or directory that already exists keeps the mode it has (``mogateway doctor`` warns when it is
readable by the group or others); only what the gateway creates is made private.

``mogateway serve`` also runs with the umask 077 (:func:`serve_umask`), as the deploy/ systemd unit
does (``UMask=0077``), so that whatever else the gateway writes is private too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "create_private_file",
    "ensure_private_file",
    "make_private_directories",
    "open_private",
    "readable_by_others",
    "serve_umask",
]

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
#: The umask of ``mogateway serve``: nothing it creates is readable by the group or others.
SERVE_UMASK = 0o077


def serve_umask() -> int:
    """Set the process's umask to :data:`SERVE_UMASK`; returns the one it had."""
    return os.umask(SERVE_UMASK)


def make_private_directories(directory: str | os.PathLike[str]) -> None:
    """Create ``directory`` and its missing parents, each one created :data:`DIRECTORY_MODE`; those
    that exist are left as they are."""
    path = Path(os.path.abspath(directory))
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode is its own
        os.chmod(created, DIRECTORY_MODE)


def open_private(path: str | os.PathLike[str], *, exclusive: bool = False) -> int:
    """A descriptor for writing ``path``, created (or truncated) with mode :data:`FILE_MODE`;
    ``exclusive``: fail if it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | (os.O_EXCL if exclusive else 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode :data:`FILE_MODE` (it must not exist)."""
    os.close(open_private(path, exclusive=True))


def ensure_private_file(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` empty and private unless it exists (then it is left as it is); True if created."""
    try:
        create_private_file(path)
    except FileExistsError:
        return False
    return True


def readable_by_others(path: str | os.PathLike[str]) -> int | None:
    """The permission bits of ``path`` when its group or others may read, write or enter it; None when
    they may not (or it does not exist)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    return mode if mode & 0o077 else None
