"""The writer of the SQLite journal: one thread owns the write connection and commits in groups.

Every write is a job: a callable taking the connection, and the future(s) to resolve with its value.
The thread takes all the jobs waiting for it, runs them in one transaction and commits once — one
fsync for the whole group — and only then resolves the callers' futures, on their event loop.

Which commits fsync (``synchronous``): ``full``, every one; ``stores`` (the default), every group that
holds a *durable* job — storing an MO, whose source is acknowledged once the commit returns, and the
rare settings and client writes — and any group when the last fsync is older than :data:`MAX_SYNC_LAG_S`;
the other groups (outcomes, replies, receipts) are committed to the write-ahead log without waiting for
the disk and become durable with the next fsync, which syncs the whole log. Either way every write
survives a crash of the process (the log is in the operating system's hands at commit); with
``stores`` a power loss can lose at most the last :data:`MAX_SYNC_LAG_S` of records of what happened
to MOs already stored — never an acknowledged MO. ``normal`` leaves every fsync to SQLite's checkpoints.

When several worker processes write one file (``lock_path``), each holds the others off from ``BEGIN``
to ``COMMIT``, and the fsync is the slowest part of that. So there the commit itself never waits for
the disk (``synchronous = NORMAL``): the writer releases the lock, then fsyncs the write-ahead log
itself, and only then resolves the callers' futures. An fsync of the log makes every commit written
to it so far durable, the other workers' included; a checkpoint that has since copied the log into the
database file synced that file before the log could be reused (SQLite's rule in WAL mode). The
guarantee is the one above, and the workers' fsyncs no longer queue behind one another's lock.

Should one job fail, the group is rolled back and each job runs again alone, so one
bad write cannot spoil the others. That is what lets the gateway acknowledge a source only after its MO
is on disk while still storing thousands of MOs a second.

:class:`Coalescer` goes one step further for the calls that dominate (store, apply, receipts): calls of
one kind made while the writer is busy are merged into one job, so a thousand single-message calls cost
about what one batch of a thousand costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["Coalescer", "Job", "Writer", "connect"]

log = logging.getLogger("mogateway.edges.storage.sqlite")

_MAX_GROUP = 2000
#: With ``synchronous = stores``, a commit fsyncs when the last fsync is older than this.
MAX_SYNC_LAG_S = 0.1


def connect(path: str) -> sqlite3.Connection:
    """A connection in WAL mode that waits (rather than fails) while another connection writes."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA busy_timeout=30000")
    # Switching a new file to WAL needs an exclusive lock, and when two processes open the same
    # new file at once SQLite answers one of them "database is locked" at once, without waiting
    # (two SHARED holders that both want EXCLUSIVE would deadlock). So the switch is retried.
    deadline = time.monotonic() + 30.0
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return conn
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                conn.close()
                raise
            time.sleep(0.01)


# flock(2) called without releasing the GIL (ctypes.PyDLL): a lock that is free is taken at once, and
# the writer does not then sit on it while it waits for the event loop to hand the GIL back.
_flock_keeping_gil = ctypes.PyDLL(None).flock

Target = asyncio.Future[Any] | list[asyncio.Future[Any]]
Job = tuple[Callable[[sqlite3.Connection], Any], Target]


class Writer(threading.Thread):
    """The one thread that writes. A job is a callable taking the connection, and what to resolve
    with its value: one future, or a list of futures and then the value is a list of the same length."""

    def __init__(
        self,
        path: str,
        synchronous: str,
        schema: Callable[[sqlite3.Connection], None],
        loop: asyncio.AbstractEventLoop,
        lock_path: str | None = None,
    ) -> None:
        super().__init__(name="journal-writer", daemon=True)
        self._path = path
        self._sync = synchronous
        self._mode = ""  # the synchronous mode the connection is in now
        self._synced_at = 0.0
        self._schema = schema
        self._loop = loop
        self._lock_path = lock_path
        self._lock_fd = -1
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = connect(self._path)
            self._mode = "FULL" if self._sync == "STORES" else self._sync
            if self._sync_after_unlock:
                self._mode = "NORMAL"  # the fsync is the writer's own, after the lock (module docstring)
            conn.execute(f"PRAGMA synchronous={self._mode}")
            if self._lock_path is not None:
                self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            with self._locked():
                self._schema(conn)
        except BaseException as exc:  # reported to open()
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        stop = False
        while not stop:
            first = self.jobs.get()
            if first is None:
                break
            group = [first]
            while len(group) < _MAX_GROUP:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                group.append(job)
            durable = self._choose_sync(conn, group)
            with self._locked():
                results = self._run_group(conn, group)
            if durable and self._sync_after_unlock:
                self._sync_log(results)
            self._loop.call_soon_threadsafe(_resolve_all, results)
        conn.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the other processes' writers off for one transaction (no-op without ``lock_path``)."""
        if self._lock_fd < 0:
            yield
            return
        if _flock_keeping_gil(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB) != 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)  # held by another worker: wait, GIL released
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    @property
    def _sync_after_unlock(self) -> bool:
        """Whether this writer fsyncs the log itself, after the workers' lock (module docstring)."""
        return self._lock_path is not None and self._sync in ("FULL", "STORES")

    def _choose_sync(self, conn: sqlite3.Connection, group: list[Job]) -> bool:
        """Whether the group must be on disk before its futures are resolved; sets the commit's
        synchronous mode to match when the commit does its own fsync (see the module docstring)."""
        if self._sync != "STORES":
            return self._sync == "FULL"
        now = time.monotonic()
        durable = any(getattr(fn, "durable", True) for fn, _ in group)
        full = durable or now - self._synced_at >= MAX_SYNC_LAG_S
        if full:
            self._synced_at = now
        if self._sync_after_unlock:
            return full
        wanted = "FULL" if full else "NORMAL"
        if wanted != self._mode:
            conn.execute(f"PRAGMA synchronous={wanted}")
            self._mode = wanted
        return full

    def _sync_log(self, results: list[tuple[Target, bool, Any]]) -> None:
        """fsync the write-ahead log (or, when a checkpoint has emptied and removed it, the database
        file); should that fail, the group's callers get the error instead of their values: nothing
        they wrote may be acknowledged as durable."""
        try:
            for path in (self._path + "-wal", self._path):
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                return
        except OSError as exc:
            log.error("journal fsync failed: %s", exc)
            results[:] = [(target, False, exc) for target, _, _ in results]

    def _run_group(self, conn: sqlite3.Connection, group: list[Job]) -> list[tuple[Target, bool, Any]]:
        # Fast path: the whole group in one transaction, one commit. Jobs are written not to fail; if
        # one does, the group is rolled back and every job runs again in a transaction of its own, so
        # the failure stays with the job that caused it.
        try:
            conn.execute("BEGIN IMMEDIATE")
            values = [fn(conn) for fn, _ in group]
            conn.execute("COMMIT")
        except Exception:
            self._rollback(conn)
            results = [self._run_alone(conn, fn, target) for fn, target in group]
        else:
            results = [(target, True, value) for (_, target), value in zip(group, values, strict=True)]
        return results

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _run_alone(
        self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any], target: Target
    ) -> tuple[Target, bool, Any]:
        try:
            conn.execute("BEGIN IMMEDIATE")
            value = fn(conn)
            conn.execute("COMMIT")
        except Exception as exc:
            log.warning("journal write failed: %s: %s", type(exc).__name__, exc)
            self._rollback(conn)
            return target, False, exc
        return target, True, value


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def _resolve_all(results: list[tuple[Target, bool, Any]]) -> None:
    for target, ok, value in results:
        if isinstance(target, list):
            for index, fut in enumerate(target):
                _settle(fut, ok, value[index] if ok else value)
        else:
            _settle(target, ok, value)


class Coalescer:
    """Merges calls of one kind (store, apply) made while the writer was busy into one job.

    The event loop adds calls; the first call of a round puts one job in the writer's queue; when that
    job runs it takes every call made so far and executes them as one batch (a few multi-row
    statements), so a thousand single-message calls cost about what one batch of a thousand costs.
    """

    def __init__(
        self, run_batch: Callable[[sqlite3.Connection, list[Any]], list[Any]], *, durable: bool = True
    ) -> None:
        self._run_batch = run_batch
        self.durable = durable
        self._lock = threading.Lock()
        self._calls: list[tuple[Sequence[Any], asyncio.Future[list[Any]]]] = []

    def add(self, writer: Writer, items: Sequence[Any], fut: asyncio.Future[list[Any]]) -> None:
        with self._lock:
            first = not self._calls
            self._calls.append((items, fut))
        if first:
            job = _CoalescedJob(self)
            writer.jobs.put((job, job.futures))

    def take(self) -> list[tuple[Sequence[Any], asyncio.Future[list[Any]]]]:
        with self._lock:
            calls, self._calls = self._calls, []
        return calls


class _CoalescedJob:
    """One round of a coalescer; re-runnable (the writer retries a failed group job by job)."""

    def __init__(self, owner: Coalescer) -> None:
        self._owner = owner
        self.durable = owner.durable
        self._calls: list[tuple[Sequence[Any], asyncio.Future[list[Any]]]] | None = None
        self.futures: list[asyncio.Future[Any]] = []

    def __call__(self, conn: sqlite3.Connection) -> list[list[Any]]:
        if self._calls is None:
            self._calls = self._owner.take()
            self.futures.extend(fut for _, fut in self._calls)
        flat = [item for items, _ in self._calls for item in items]
        results = self._owner._run_batch(conn, flat)
        out: list[list[Any]] = []
        start = 0
        for items, _ in self._calls:
            out.append(results[start : start + len(items)])
            start += len(items)
        return out
