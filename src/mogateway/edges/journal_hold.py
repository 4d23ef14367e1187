"""Who holds a SQLite journal: a running gateway, or a restore that is replacing it.

``mogateway serve`` (the single process, or the supervisor of the workers) holds a shared ``flock``
on ``<journal>-serve.lock`` for as long as it lives; ``mogateway restore`` takes it exclusively while it
puts a copy in place. So a restore never replaces the file under a gateway, and a gateway does not start
on a file being replaced. The kernel lets go of the lock however the process ends (SIGKILL, power cut).

The lock file's only content is the pid of the gateway that took it last, for the message.

A process that has the journal open without taking that lock (an older mogateway, the ``sqlite3`` shell)
is seen too: every connection to a database in WAL mode holds a shared POSIX lock on one byte of its
``-shm`` file (SQLite's "DMS" byte, 128) while it is open; :func:`open_by` asks the kernel who holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from dataclasses import dataclass

__all__ = ["HeldElsewhere", "JournalHold", "hold_path", "open_by", "sqlite_path"]

#: The byte of the ``-shm`` file every open connection holds a shared lock on (SQLite's os_unix.c:
#: UNIX_SHM_BASE 120 + SQLITE_SHM_NLOCK 8).
_SHM_DMS_BYTE = 128


class HeldElsewhere(Exception):
    """The journal is held by another process; the text says which and what to do."""

    def __init__(self, text: str, pid: int | None) -> None:
        super().__init__(text)
        self.pid = pid


def sqlite_path(database: str) -> str | None:
    """The file of a SQLite ``database`` setting; None for PostgreSQL and an in-memory database."""
    if database.startswith(("postgresql://", "postgres://")):
        return None
    path = database.removeprefix("sqlite://")
    return None if path in (":memory:", "") else path


def hold_path(journal: str) -> str:
    return f"{journal}-serve.lock"


@dataclass
class JournalHold:
    """An ``flock`` on the journal's lock file: shared (a gateway) or exclusive (a restore)."""

    journal: str
    fd: int = -1

    def take(self, *, exclusive: bool) -> None:
        """Take the lock now or raise :class:`HeldElsewhere` (never waits)."""
        directory = os.path.dirname(os.path.abspath(self.journal))
        os.makedirs(directory, exist_ok=True)
        fd = os.open(hold_path(self.journal), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            if exclusive:
                who = f"a running gateway (pid {holder})" if holder else "a running gateway"
                raise HeldElsewhere(f"{who} holds the journal {self.journal}", holder) from None
            raise HeldElsewhere(
                f"the journal {self.journal} is being replaced by `mogateway restore`; start again when "
                "it has finished",
                holder,
            ) from None
        if not exclusive:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing lets go of the flock
            self.fd = -1


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def open_by(journal: str) -> int | None:
    """The pid of another process that has the SQLite ``journal`` open (WAL mode), or None.

    Asks the kernel (``F_GETLK``) whether a write lock on the ``-shm`` file's DMS byte would conflict:
    it does while any other process has a connection open, and the kernel names one of them."""
    try:
        fd = os.open(f"{journal}-shm", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # no -shm: nobody has it open in WAL mode
    try:
        # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid.
        request = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, _SHM_DMS_BYTE, 1, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, request + b"\0" * 4)
        kind, _whence, _start, _length, pid = struct.unpack("hhqqi", answer[: struct.calcsize("hhqqi")])
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if kind == fcntl.F_UNLCK else pid
