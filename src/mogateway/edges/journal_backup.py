"""A copy of the SQLite journal taken while the gateway serves, and putting one back.

:func:`backup` uses SQLite's online backup API in a single step: the copy is read inside one read
transaction, so it is the journal as it was at one instant (every MO acknowledged before the backup
began is in it), and in WAL mode the gateway's writers go on meanwhile. The copy is written beside its
destination (created 0600 whatever the umask: it holds the generated tokens, numbers and texts),
switched out of WAL mode so that it is one self-contained file, checked with
``PRAGMA integrity_check``, flushed to disk, and only then renamed into place.

:func:`restore` checks a copy the same way, then — holding the journal's lock exclusively
(``edges.journal_hold``), so no gateway runs on it or starts meanwhile — moves the journal it replaces
aside (with its ``-wal``, so that the old file stays whole) and renames the copy into place.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from mogateway.edges.journal_hold import HeldElsewhere, JournalHold, hold_path, open_by
from mogateway.edges.journal_schema import schema_difference
from mogateway.edges.storage.migrations import LATEST as SCHEMA_VERSION
from mogateway.edges.storage.migrations import sqlite_file_version
from mogateway.service.private_files import create_private_file, make_private_directories, open_private

__all__ = ["BackupError", "CopySummary", "backup", "inspect", "restore"]


class BackupError(Exception):
    """The copy cannot be made, or is not a good journal; the text says why."""


@dataclass(frozen=True)
class CopySummary:
    """What a journal copy holds."""

    path: str
    messages: int
    unfinished: int
    schema_version: int
    size_bytes: int
    seconds: float = 0.0


def inspect(path: str, *, exact_schema: bool = False) -> CopySummary:
    """Check a journal file (``PRAGMA integrity_check``) and count what it holds; BackupError if it is
    damaged or not a mogateway journal, or (``exact_schema``) if its schema is not exactly the one its
    version has (``edges.journal_schema``): a table, index, trigger or view more, less or changed."""
    if not os.path.isfile(path):
        raise BackupError(f"{path} does not exist")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise BackupError(f"{path} cannot be opened: {exc}") from None
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)").fetchall()]
        if problems != ["ok"]:
            raise BackupError(f"{path} failed its integrity check: {'; '.join(problems)}")
        found = sqlite_file_version(conn)
        if found is None:
            raise BackupError(f"{path} is not a mogateway journal (no schema version)")
        version = found
        if exact_schema and version <= SCHEMA_VERSION:
            differs = schema_difference(conn, version)
            if differs is not None:
                raise BackupError(f"{path} is refused: its schema is not a mogateway journal's ({differs})")
        messages = int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
        from mogateway.edges.storage.schema import UNFINISHED_SQL

        unfinished = int(
            conn.execute(f"SELECT count(*) FROM message_states WHERE {UNFINISHED_SQL}").fetchone()[0]
        )
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is not a mogateway journal: {exc}") from None
    finally:
        conn.close()
    if version > SCHEMA_VERSION:
        raise BackupError(
            f"{path} has schema version {version}, newer than this mogateway ({SCHEMA_VERSION}): "
            "restore it with the mogateway that made it"
        )
    return CopySummary(path, messages, unfinished, version, os.path.getsize(path))


def backup(journal: str, destination: str, *, overwrite: bool = False) -> CopySummary:
    """Copy the live ``journal`` to ``destination`` and check the copy."""
    started = time.monotonic()
    if not os.path.isfile(journal):
        raise BackupError(f"the journal {journal} does not exist")
    partial = f"{destination}.partial"
    for live, what in _live_files(journal):
        if _same_file(destination, live) or _same_file(partial, live):
            raise BackupError(f"{destination} is {what}: the backup must go to a file of its own")
    if os.path.exists(destination) and not overwrite:
        raise BackupError(f"{destination} already exists (pass --force to replace it)")
    _remove(partial)
    make_private_directories(os.path.dirname(os.path.abspath(destination)))
    create_private_file(partial)  # 0600 whatever the umask: it holds tokens, numbers and texts
    try:
        source = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        _remove(partial)
        raise BackupError(f"cannot open the journal {journal}: {exc}") from None
    try:
        target = sqlite3.connect(partial)
        try:
            source.execute("PRAGMA busy_timeout = 30000")
            # One step (pages=-1): the whole copy comes from one read transaction, one instant of the
            # journal. In steps, every commit of the gateway between two steps would restart it.
            source.backup(target, pages=-1)
            target.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
        finally:
            target.close()
    except sqlite3.Error as exc:
        _remove(partial)
        raise BackupError(f"the copy failed: {exc}") from None
    finally:
        source.close()
    try:
        summary = inspect(partial)
        _fsync_file(partial)
        os.replace(partial, destination)
        _fsync_directory(destination)
    except BaseException:
        _remove(partial)
        raise
    return CopySummary(
        destination,
        summary.messages,
        summary.unfinished,
        summary.schema_version,
        summary.size_bytes,
        time.monotonic() - started,
    )


def restore(copy: str, journal: str) -> tuple[CopySummary, str | None]:
    """Put ``copy`` in place of ``journal`` for a gateway that is stopped. Returns what the copy holds
    and where the journal it replaced was moved (None when there was none).

    Raises :class:`HeldElsewhere` while a gateway (or any other process) has the journal, and
    BackupError when the copy is not a good journal."""
    if _same_file(copy, journal):
        raise BackupError("the copy to restore is the journal itself")
    summary = inspect(copy, exact_schema=True)
    hold = JournalHold(journal)
    hold.take(exclusive=True)
    try:
        pid = open_by(journal)
        if pid is not None:
            raise HeldElsewhere(f"process {pid} has the journal {journal} open", pid)
        incoming = f"{journal}.restoring"
        _remove(incoming)
        _copy_file(copy, incoming)
        kept = None
        if os.path.exists(journal):
            kept = f"{journal}.before-restore-{time.strftime('%Y%m%dT%H%M%S')}"
            os.replace(journal, kept)
            for suffix in ("-wal", "-shm"):
                if os.path.exists(journal + suffix):
                    os.replace(journal + suffix, kept + suffix)
        os.replace(incoming, journal)
        _fsync_directory(journal)
    finally:
        hold.release()
    placed = CopySummary(
        journal, summary.messages, summary.unfinished, summary.schema_version, summary.size_bytes
    )
    return placed, kept


def _live_files(journal: str) -> list[tuple[str, str]]:
    """The files of a live journal, each with what it is: a backup written over any of them loses
    acknowledged MOs."""
    return [
        (journal, f"the journal {journal}"),
        (f"{journal}-wal", f"the journal's write-ahead log ({journal}-wal)"),
        (f"{journal}-shm", f"the journal's shared memory ({journal}-shm)"),
        (f"{journal}-journal", f"the journal's rollback journal ({journal}-journal)"),
        (hold_path(journal), f"the journal's lock file ({hold_path(journal)})"),
    ]


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same path once symbolic links are resolved (real paths), or
    the same file on disk (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False  # either does not exist


def _copy_file(source: str, destination: str) -> None:
    with open(source, "rb") as src, os.fdopen(open_private(destination), "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(str(Path(path).resolve().parent), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
