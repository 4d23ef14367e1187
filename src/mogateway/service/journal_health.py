"""The journal's health as the gateway sees it: its write errors, its free space, and writes that wait.

A journal write that fails — a full disk, an I/O error, PostgreSQL gone — is an outage of the
environment, not a fact about a message: it never changes a message's fate. So:

* :meth:`JournalHealth.retry` runs a journal call again, with backoff (:data:`FIRST_BACKOFF_S` doubling
  to :data:`MAX_BACKOFF_S`), until the journal takes it. The caller keeps what it meant to record (an
  answered callback's outcome, a reply's result) in memory meanwhile and goes on once it is recorded;
  the first write that works again wakes every waiting one at once. Should the process die before,
  the message is still unfinished in the journal and is picked up again at the next start
  (``service.recovery``): at-least-once, as for any crash — its callback may be made a second time.
* :func:`journal_error_kind` tells such an error (``disk_full``, ``io_error``, ``unavailable``,
  ``other``) from a bug (None: not retried, the caller's own handling applies).
* Each kind is logged in one line when it starts, then at most once a minute with a count, and so is
  writes working again — no traceback: these are expected failures of the environment.
  ``mogateway_journal_write_errors_total{kind}`` counts every one.
* The free-space guard (SQLite only): while the journal's file system has less free than the smaller
  of ``journal_min_free_bytes`` and ``journal_min_free_percent`` of its size, intake refuses new MOs
  (:meth:`refusing`; 503 on ingest, a temporary error on deliver_sm) so that the space left is the
  reserve that work already accepted needs to finish. Once refusing, it accepts again when the free
  space is back above the reserve by :data:`RESUME_MARGIN_BYTES` (or the reserve, if smaller), so the
  write-ahead log's growing and emptying does not make it flap.

The journal "cannot write" (a readiness reason, ``service.readiness``) while writes wait here, or the
last write failed less than :data:`FAILING_FOR_S` ago and none worked since.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mogateway.service.metrics import Metrics
from mogateway.service.throttle import Throttle

__all__ = [
    "FAILING_FOR_S",
    "FIRST_BACKOFF_S",
    "KINDS",
    "MAX_BACKOFF_S",
    "RESUME_MARGIN_BYTES",
    "JournalHealth",
    "JournalUnavailable",
    "journal_error_kind",
]

log = logging.getLogger("mogateway.journal")

T = TypeVar("T")

KINDS = ("disk_full", "io_error", "unavailable", "other")
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0
#: The journal counts as failing this long after a failed write, unless a write worked since.
FAILING_FOR_S = 10.0
#: Free space is read at most this often (a statvfs is cheap, but intake asks for every batch).
_FREE_EVERY_S = 0.25
#: Once the guard refuses, it accepts again only with this much (or the reserve, if smaller) more free.
RESUME_MARGIN_BYTES = 8 << 20
#: A kind's line is repeated at most this often while it lasts.
_LOG_EVERY_S = 60.0

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 5, 6, 8, 10
_SQLITE_FULL, _SQLITE_CANTOPEN = 13, 14
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_IO_ERRNOS = frozenset({errno.EIO, errno.EROFS})


class JournalUnavailable(Exception):
    """Intake did not store the MOs: the journal cannot take them now (nothing was accepted; the
    source should deliver them again). The reason is logged already, rate-limited."""


def journal_error_kind(exc: BaseException) -> str | None:
    """The kind of a journal call's failure, or None when it is not the journal's (a bug)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(exc).lower()
        if primary == _SQLITE_FULL or "disk is full" in text:
            return "disk_full"
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_READONLY) or "i/o error" in text:
            return "io_error"
        if primary in (_SQLITE_BUSY, _SQLITE_LOCKED) or "database is locked" in text:
            return "unavailable"
        return "other"
    if isinstance(exc, OSError):  # ConnectionError and TimeoutError are OSErrors
        if exc.errno in _DISK_FULL_ERRNOS:
            return "disk_full"
        if exc.errno in _IO_ERRNOS:
            return "io_error"
        return "unavailable"
    # asyncpg is loaded only where the journal is PostgreSQL (node.open_journal): where it is not, no
    # failure can be one of its exceptions.
    asyncpg: Any = sys.modules.get("asyncpg")
    if asyncpg is None:
        return None
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        if state == "53100":
            return "disk_full"
        if state == "58030":
            return "io_error"
        if state[:2] in ("08", "57", "53") or isinstance(exc, asyncpg.PostgresConnectionError):
            return "unavailable"
        return "other"
    if isinstance(exc, asyncpg.InterfaceError | asyncpg.exceptions.InternalClientError):
        return "unavailable"  # a connection closed under a call, a pool closing
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


class JournalHealth:
    """See the module docstring. ``path``: the SQLite journal's file (None: PostgreSQL, no guard)."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        path: str | None,
        min_free_bytes: int = 1 << 30,
        min_free_percent: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        statvfs: Callable[[str], Any] = os.statvfs,
    ) -> None:
        self._metrics = metrics
        self._dir = os.path.dirname(os.path.abspath(path)) if path is not None else None
        # SQLite's write-ahead log: until a checkpoint has copied its pages into the database file, that
        # copy may need as many bytes again, so the guard counts them as already spent.
        self._wal = os.path.abspath(path) + "-wal" if path is not None else None
        self.min_free_bytes = min_free_bytes
        self.min_free_percent = min_free_percent
        self._clock = clock
        self._statvfs = statvfs
        self._free: tuple[int, int] | None = None  # (free, total) bytes
        self._free_at = -math.inf
        self._failed_at = -math.inf
        self._worked_at = -math.inf
        self._last_error: dict[str, str] = {}  # kind -> the last error of that kind
        self._since_failure = 0  # failed writes since writes last worked
        self.waiting = 0  # journal calls waiting to be tried again
        self._recovered = asyncio.Event()
        self._log = Throttle(_LOG_EVERY_S, clock)
        self._counters = {kind: metrics.journal_write_errors.labels(kind) for kind in KINDS}
        self._refusing = False
        self._wal_bytes = 0
        if self._dir is None:
            metrics.journal_free_bytes.set(math.nan)

    # ------------------------------------------------------------------ write errors

    def failed(self, exc: BaseException, then: str) -> str | None:
        """Note that a journal call failed with ``exc`` (``then``: what happens now, for the log); its
        kind (None: not the journal's)."""
        kind = journal_error_kind(exc)
        if kind is None:
            return None
        self._counters[kind].inc()
        self._failed_at = self._clock()
        self._since_failure += 1
        self._last_error[kind] = _short(exc)
        held = self._log.ready(kind)
        if held is not None:
            log.error(
                "journal write failed (%s): %s; %s%s",
                kind,
                _short(exc),
                then,
                self._log.more(held),
            )
        return kind

    def worked(self) -> None:
        """Note that a journal write worked."""
        self._worked_at = self._clock()
        if self._since_failure:
            failures, self._since_failure = self._since_failure, 0
            self._last_error.clear()
            # Rate-limited as the failures are (a disk that flaps between full and not says so once a
            # minute, not at every turn).
            held = self._log.ready("worked")
            if held is not None:
                log.warning(
                    "journal writes work again (after %d failed writes)%s", failures, self._log.more(held)
                )
            self._recovered.set()
            self._recovered = asyncio.Event()

    @property
    def writable(self) -> bool:
        """False while journal calls wait here, or the last write failed recently and none worked since."""
        if self.waiting:
            return False
        return not (self._failed_at > self._worked_at and self._clock() - self._failed_at < FAILING_FOR_S)

    def last_errors(self) -> dict[str, str]:
        """The last error of each kind since writes last worked."""
        return dict(self._last_error)

    async def retry(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """``call()``, again with backoff while it fails with a journal error (see the module docstring).
        ``what`` names what is kept meanwhile, for the log. A bug's exception is raised at once."""
        backoff = FIRST_BACKOFF_S
        waiting = False
        try:
            while True:
                try:
                    value = await call()
                except Exception as exc:
                    if self.failed(exc, f"{what} is kept and tried again until the journal takes it") is None:
                        raise
                else:
                    self.worked()
                    return value
                if not waiting:
                    waiting = True
                    self.waiting += 1
                recovered = self._recovered
                try:
                    await asyncio.wait_for(recovered.wait(), backoff)
                except TimeoutError:
                    pass
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        finally:
            if waiting:
                self.waiting -= 1

    # ------------------------------------------------------------------ free space

    def free_space(self) -> tuple[int, int] | None:
        """(free, total) bytes of the journal's file system, read at most every few hundred ms; None on
        PostgreSQL or when it cannot be read."""
        if self._dir is None:
            return None
        now = self._clock()
        if now - self._free_at >= _FREE_EVERY_S:
            self._free_at = now
            try:
                st = self._statvfs(self._dir)
            except OSError:
                self._free = None
            else:
                self._free = (st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize)
                self._metrics.journal_free_bytes.set(self._free[0])
            try:
                self._wal_bytes = os.stat(self._wal).st_size if self._wal is not None else 0
            except OSError:  # no log yet (or not SQLite's): nothing owed
                self._wal_bytes = 0
        return self._free

    def threshold(self, total: int) -> int:
        """The bytes the guard keeps free on a file system of ``total`` bytes: the smaller of the two."""
        return int(min(self.min_free_bytes, total * self.min_free_percent / 100.0))

    def refusing(self) -> str | None:
        """Why intake refuses new MOs now (the free-space guard), or None."""
        free = self.free_space()
        if free is None:
            return None
        free_bytes, total = free
        available = free_bytes - self._wal_bytes  # what a checkpoint may still take (see __init__)
        keep = self.threshold(total)
        # Once refusing, it takes a margin more to accept again: SQLite's write-ahead log grows to its
        # checkpoint size and is emptied, and the guard must not flap with it.
        above = keep + min(keep, RESUME_MARGIN_BYTES) if self._refusing else keep
        if available >= above or keep <= 0:
            if self._refusing:
                self._refusing = False
                held = self._log.ready("accepting")
                if held is not None:
                    log.warning(
                        "journal free space is back to %d bytes: new MOs are accepted again%s",
                        available,
                        self._log.more(held),
                    )
            return None
        reason = (
            f"the journal's file system has {free_bytes} bytes free ({available} once the write-ahead log "
            f"is checkpointed), less than the {keep} kept for the work already accepted "
            "(journal_min_free_bytes / journal_min_free_percent)"
        )
        if not self._refusing:
            # Free space moves both ways as the journal's write-ahead log grows and is emptied: the
            # guard may start and stop refusing several times a minute, said once a minute.
            self._refusing = True
            held = self._log.ready("refusing")
            if held is not None:
                log.error("refusing new MOs: %s%s", reason, self._log.more(held))
        return reason
