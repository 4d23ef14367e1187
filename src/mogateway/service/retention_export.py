"""Retention's export: each day's finished messages in one JSON Lines file, written atomically.

A day (UTC, of the time a message was received) is the file ``messages-YYYY-MM-DD.jsonl`` in
``retention_export_dir``, one message a line, ordered by (received time, id). What a line holds is
:func:`export_line`: what the journal's record offers, for reconciling billing with operators and
clients — id, received and stored time, channel and origin, shortcode, number, text, state, client,
outcome, reply text and references, and the whole timeline.

A file is created 0600 (its directory, when retention creates it, 0700) whatever the umask: it holds
numbers and texts (``service.private_files``). A file is only ever replaced whole: it is written under
a temporary name in the same directory, fsynced, renamed over the day's name, and the directory
fsynced (:class:`DayFile`). Should the day's
file exist already (a sweep that stopped between its export and its deletes, or messages of that day
finished since), the new file is the old one merged with what the journal holds now, on the same
order: no line twice, none lost (the journal's version of a message replaces the file's). Only then
are the day's messages deleted, and only those the file holds (:func:`exported_ids`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any, Final

import orjson

from mogateway.core.ports import FinishedMessage
from mogateway.core.timeline import EventKind
from mogateway.service.private_files import make_private_directories, open_private

__all__ = ["DayFile", "day_name", "export_line", "exported_ids", "remove_leftovers"]

_PREFIX: Final = "messages-"
_SUFFIX: Final = ".jsonl"
_TEMP: Final = ".tmp"

#: A line's place in its file: (received time, id).
Key = tuple[float, str]


def day_name(day_start: float) -> str:
    """The file of the UTC day starting at ``day_start``."""
    return _PREFIX + time.strftime("%Y-%m-%d", time.gmtime(day_start)) + _SUFFIX


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"


def export_line(item: FinishedMessage) -> tuple[Key, bytes]:
    """One message as its line of the day's file (with the line's key)."""
    r = item.record
    m = r.message
    outcome: str | None = None
    for event in item.events:
        if event.kind is EventKind.OUTCOME:
            outcome = event.data.get("outcome")
    doc: dict[str, Any] = {
        "id": m.id,
        "received_at": m.received_at,
        "received": _iso(m.received_at),
        "stored_at": r.stored_at,
        "updated_at": r.updated_at,
        "channel": m.origin.split(":", 1)[0],
        "origin": m.origin,
        "source_id": m.source_id,
        "shortcode": m.shortcode,
        "msisdn": m.msisdn,
        "operator": m.sender.operator if m.sender is not None else "",
        "circle": m.sender.circle if m.sender is not None else "",
        "text": m.text,
        "state": r.state.value,
        "client_id": r.client_id,
        "outcome": outcome,
        "reply_text": r.reply_text,
        "reply_refs": list(item.reply_refs),
        "rejection": None
        if m.rejection is None
        else {"field": m.rejection.field, "reason": m.rejection.reason},
        "events": [{"kind": e.kind.value, "at": e.at, "data": e.data} for e in item.events],
    }
    return (m.received_at, m.id), orjson.dumps(doc) + b"\n"


def _key_of(line: bytes) -> Key:
    doc = orjson.loads(line)
    return float(doc["received_at"]), str(doc["id"])


def remove_leftovers(directory: Path) -> int:
    """Delete the temporary files of writes that never finished (a crash); how many."""
    removed = 0
    for path in directory.glob(f".{_PREFIX}*{_TEMP}"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


class DayFile:
    """The day's file being written: lines added in key order (:meth:`add`), merged with the lines of
    the file it replaces, then :meth:`commit` (or :meth:`abort`). Blocking: run it in a thread."""

    def __init__(self, directory: Path, day_start: float) -> None:
        make_private_directories(directory)  # 0700 for what is created, whatever the umask
        self.path = directory / day_name(day_start)
        self._temp = directory / f".{self.path.name}.{os.getpid()}{_TEMP}"
        # 0600 whatever the umask: numbers and texts (service/private_files.py)
        self._out: IO[bytes] = os.fdopen(open_private(self._temp), "wb")
        self._old: IO[bytes] | None = None
        self._head: tuple[Key, bytes] | None = None
        try:
            self._old = open(self.path, "rb")  # noqa: SIM115 (closed by commit or abort)
        except FileNotFoundError:
            pass
        self._advance()
        self.lines = 0

    def _advance(self) -> None:
        self._head = None
        while self._old is not None:
            line = self._old.readline()
            if not line:
                self._old.close()
                self._old = None
            elif line.strip():
                self._head = (_key_of(line), line if line.endswith(b"\n") else line + b"\n")
                return

    def _write(self, line: bytes) -> None:
        self._out.write(line)
        self.lines += 1

    def add(self, lines: list[tuple[Key, bytes]]) -> None:
        """Lines of the journal, in key order after every line added before."""
        for key, line in lines:
            while self._head is not None and self._head[0] < key:
                self._write(self._head[1])
                self._advance()
            if self._head is not None and self._head[0] == key:
                self._advance()  # the journal's version of the message replaces the file's
            self._write(line)

    def commit(self) -> None:
        """The rest of the old file, then the new file in the day's name, durably."""
        while self._head is not None:
            self._write(self._head[1])
            self._advance()
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        os.replace(self._temp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def abort(self) -> None:
        if self._old is not None:
            self._old.close()
        self._out.close()
        with contextlib.suppress(FileNotFoundError):
            self._temp.unlink()


def exported_ids(path: Path, batch: int) -> Generator[list[str], None, None]:
    """The ids in a day's file, ``batch`` at a time (blocking: each ``next`` in a thread)."""
    with open(path, "rb") as lines:
        ids: list[str] = []
        for line in lines:
            if line.strip():
                ids.append(str(orjson.loads(line)["id"]))
                if len(ids) == batch:
                    yield ids
                    ids = []
        if ids:
            yield ids
