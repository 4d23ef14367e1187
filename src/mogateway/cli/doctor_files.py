"""``mogateway doctor``'s look at who may read the files that hold secrets and personal data.

The journal (with its ``-wal`` and ``-shm``), backups and retention exports hold the generated tokens in
clear, numbers and texts; the WhatsApp media store (``whatsapp_media_store``) subscribers' photos, voice
and documents. The gateway creates them 0600 and their directories 0700 whatever the umask
(``service.private_files``); a file made otherwise (by an older mogateway, copied by hand, or chmodded)
is a warning naming it and its mode.

What is looked at: a SQLite journal and its ``-wal``/``-shm``; every SQLite file beside the journal
(backups are commonly kept there, and ``restore`` leaves the replaced journal there as
``<journal>.before-restore-<time>``); ``retention_export_dir`` and the files in it;
``whatsapp_media_store`` and the files in it; and each path
given with ``--backups`` (a file, or a directory and the files in it). The journal's own directory is
not judged: it may be a shared one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from mogateway.cli.doctor_findings import Finding
from mogateway.config import Settings
from mogateway.edges.journal_hold import sqlite_path
from mogateway.service.private_files import readable_by_others

__all__ = ["check_file_modes"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SHOWN = 10


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _files_in(directory: str) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_file(follow_symlinks=False):
            yield entry.path


def _looked_at(settings: Settings, backups: Sequence[str]) -> Iterator[str]:
    journal = sqlite_path(settings.database)
    if journal is not None and os.path.exists(journal):
        yield from (p for p in (journal, f"{journal}-wal", f"{journal}-shm") if os.path.exists(p))
        own = {os.path.realpath(journal + s) for s in ("", "-wal", "-shm")}
        for path in _files_in(os.path.dirname(os.path.abspath(journal))):
            if os.path.realpath(path) not in own and _is_sqlite(path):
                yield path  # a backup, or a journal put aside by restore
    places = [str(p) for p in (settings.retention_export_dir, settings.whatsapp_media_store) if p]
    for place in [*places, *backups]:
        if os.path.isdir(place):
            yield place
            yield from _files_in(place)
        elif os.path.exists(place):
            yield place


def check_file_modes(settings: Settings, backups: Sequence[str] = ()) -> Finding:
    """A warning naming every journal, backup, export or kept media file (or directory) that the group
    or others may read, write or enter; ok otherwise."""
    seen: dict[str, None] = {}
    for path in _looked_at(settings, backups):
        seen.setdefault(path)
    exposed = [(path, mode) for path in seen if (mode := readable_by_others(path)) is not None]
    if not exposed:
        kinds = "journal, backup and export"
        if settings.whatsapp_media_store:
            kinds = "journal, backup, export and media"
        return Finding("file-modes", "ok", f"{len(seen)} {kinds} files are private")
    listed = ", ".join(f"{path} ({mode:04o})" for path, mode in exposed[:_SHOWN])
    more = f" and {len(exposed) - _SHOWN} more" if len(exposed) > _SHOWN else ""
    return Finding(
        "file-modes",
        "warn",
        f"readable by the group or others: {listed}{more}",
        "chmod 600 the files and 700 the directories: they hold tokens, numbers and texts "
        "(docs/operations.md, 'Files and their modes')",
    )
