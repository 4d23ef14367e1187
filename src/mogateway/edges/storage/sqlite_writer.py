"""The writer of the SQLite journal: commits in groups on the event loop, fsyncs on a thread.

Every write is a job: a callable taking the connection, and the future(s) to resolve with its value.
The jobs submitted while the last group is being synced run, when it is done, in one transaction on
the event loop's own thread: a transaction is a few milliseconds of CPU, and a thread of its own would
spend as long again waiting for the event loop to hand back the GIL after every statement (measured
in docs/benchmarks.md §0.5). The commit writes the write-ahead log without waiting for the disk
(``synchronous = NORMAL``); :class:`_Syncer`, a thread, then fsyncs the log and only then resolves the
callers' futures, on their event loop. One group at a time is with the syncer, so a group holds
everything that arrived during the last fsync: fewer, larger commits, each writing the pages it
changes once (committing every turn of the loop rewrote the same pages in many small commits and cost
more CPU per MO). An fsync of the log makes every commit written to it so far durable; a checkpoint
that has copied the log into the database file synced that file before the log could be started over
(SQLite's rule in WAL mode).

Which groups wait for an fsync (``synchronous``): ``full``, every one; ``stores`` (the default), every
group that holds a *durable* job — storing an MO, whose source is acknowledged once the commit is on
disk, and the rare settings and client writes — and any group when the last fsync is older than
:data:`MAX_SYNC_LAG_S`; the other groups (outcomes, replies, receipts) are resolved without waiting
for the disk and become durable with the next fsync, which syncs the whole log. Either way every write
survives a crash of the process (the log is in the operating system's hands at commit); with
``stores`` a power loss can lose at most the last :data:`MAX_SYNC_LAG_S` of records of what happened
to MOs already stored — never an acknowledged MO. ``normal`` leaves every fsync, and the checkpoints,
to SQLite.

The syncer needs the GIL twice per group (to take it, and to hand the results back to the loop), and
while the event loop runs Python a waiting thread gets it only when the interpreter's switch interval
(5 ms by default) forces the loop to let go: up to twice 5 ms added to every acknowledgement. The
writer sets the process's switch interval to :data:`SWITCH_INTERVAL_S` (docs/benchmarks.md §0.14).

Checkpoints (copying the log into the database so that it can start over) are the syncer's too:
once the log has grown past :data:`CHECKPOINT_BYTES`, the syncer copies the whole log after the
group's fsync, before the writer's next commit, so that the next commit starts the log over.

When several worker processes write one file (``lock_path``), each holds the others off from ``BEGIN``
to ``COMMIT`` with an ``flock`` on that file, and the syncer holds it while it checkpoints; the fsyncs
are outside the lock, so the workers' fsyncs do not queue behind one another's.

Should one job fail, the group is rolled back and each job runs again alone, so one
bad write cannot spoil the others. That is what lets the gateway acknowledge a source only after its MO
is on disk while still storing thousands of MOs a second.

:class:`Coalescer` goes one step further for the calls that dominate (store, apply, receipts): calls of
one kind made before the writer's next group are merged into one job, so a thousand single-message
calls cost about what one batch of a thousand costs.
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
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["Coalescer", "Job", "Writer", "connect"]

log = logging.getLogger("mogateway.edges.storage.sqlite")

_MAX_GROUP = 2000
#: With ``synchronous = stores``, a commit fsyncs when the last fsync is older than this.
MAX_SYNC_LAG_S = 0.1
#: The syncer copies the write-ahead log into the database once it has grown past this (SQLite's own
#: automatic checkpoint: 1,000 pages of 4 KiB).
CHECKPOINT_BYTES = 4 * 1024 * 1024
#: How long the event loop may hold the GIL while the syncer waits for it (Python's default: 5 ms).
SWITCH_INTERVAL_S = 0.0005


def connect(path: str) -> sqlite3.Connection:
    """A connection in WAL mode that waits (rather than fails) while another connection writes."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA busy_timeout=30000")
    # A new file gives pages freed by retention back to the file system, a few at a time
    # (``incremental_vacuum``): set before its first table, and before WAL, which writes the header.
    # On an existing file this changes nothing until a VACUUM (``storage.sqlite._prepare``).
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
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


# flock(2) called without releasing the GIL (ctypes.PyDLL): a lock that is free is taken at once.
_flock_keeping_gil = ctypes.PyDLL(None).flock


@contextlib.contextmanager
def _holding(lock_fd: int) -> Iterator[None]:
    """Hold the workers' lock on ``lock_fd``, waiting for it (no-op for ``-1``: one process)."""
    if lock_fd < 0:
        yield
        return
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)


Target = asyncio.Future[Any] | list[asyncio.Future[Any]]
Job = tuple[Callable[[sqlite3.Connection], Any], Target]
Results = list[tuple[Target, bool, Any]]


class Writer:
    """Runs the write jobs on the event loop's own thread, in groups, and hands each commit to
    :class:`_Syncer`, which fsyncs and resolves the callers' futures; the next group waits until the
    syncer is done with the last (module docstring).

    A job is a callable taking the connection, and what to resolve with its value: one future, or a
    list of futures and then the value is a list of the same length.
    """

    def __init__(
        self,
        path: str,
        synchronous: str,
        schema: Callable[[sqlite3.Connection], None],
        loop: asyncio.AbstractEventLoop,
        lock_path: str | None = None,
    ) -> None:
        self._path = path
        self._sync = synchronous
        self._schema = schema
        self.loop = self._loop = loop  # the journal makes its callers' futures on it (no getpid)
        self._lock_path = lock_path
        self._lock_fd = -1
        self._conn: sqlite3.Connection | None = None
        self._pending: list[Job] = []
        self._scheduled = False
        self._syncing = False  # a commit is with the syncer: the next one waits for it (docstring)
        self._waiting_for_lock = False  # a thread waits for the workers' lock on the loop's behalf
        self._lock_held = False  # that thread got it: the loop holds it now
        self._lock_wait: asyncio.Future[None] | None = None
        self._synced_at = 0.0
        self._syncer: _Syncer | None = None

    @property
    def fsyncs(self) -> int:
        """How many times the write-ahead log was fsynced so far."""
        return self._syncer.fsyncs if self._syncer is not None else 0

    async def open(self) -> None:
        """Connect, take the schema to this version (in a thread: an upgrade may take a while) and start
        the syncer."""
        await asyncio.to_thread(self._connect)
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._syncer = _Syncer(self._path, self._loop, self._lock_path, self._synced)
        self._syncer.start()

    def _connect(self) -> None:
        conn = connect(self._path)
        try:
            if self._sync != "NORMAL":
                # A commit writes the log without waiting for the disk, nor does it copy the log into
                # the database (a checkpoint): the syncer does both, off the event loop.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA wal_autocheckpoint=0")
                # and starts it over from an empty file, so that its size says how much it holds
                conn.execute("PRAGMA journal_size_limit=0")
            if self._lock_path is not None:
                self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            with _holding(self._lock_fd):
                self._schema(conn)
        except BaseException:
            conn.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1
            raise
        self._conn = conn

    async def close(self) -> None:
        """Let the syncer finish, write what is still pending, and close."""
        syncer, self._syncer = self._syncer, None
        if syncer is not None:
            syncer.jobs.put(None)
            await asyncio.to_thread(syncer.join)
        if self._lock_wait is not None and not self._lock_wait.done():
            await asyncio.wait([self._lock_wait])  # the lock is then released by _lock_taken
        group, self._pending = self._pending, []
        if group and self._conn is not None:
            with _holding(self._lock_fd):
                results = self._run_group(self._conn, group)
            if syncer is not None and self._sync != "NORMAL":
                syncer.sync_log(results)
            _resolve_all(results)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def submit(self, job: Job) -> None:
        """Queue a job: it runs in the next group, at the next turn of the event loop or once the
        syncer is done with the last group."""
        self._pending.append(job)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run_pending)

    def _run_pending(self) -> None:
        self._scheduled = False
        syncer = self._syncer
        if self._syncing or self._waiting_for_lock:
            return  # _synced or _lock_taken take the jobs
        if syncer is None or not self._pending or self._conn is None:
            self._release_lock()  # closing (close takes the jobs), or nothing to write
            return
        if (
            self._lock_fd >= 0
            and not self._lock_held
            and _flock_keeping_gil(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB) != 0
        ):
            # Another worker is writing: a thread waits for the lock, and the loop goes on meanwhile.
            self._waiting_for_lock = True
            self._lock_wait = self._loop.run_in_executor(None, fcntl.flock, self._lock_fd, fcntl.LOCK_EX)
            self._lock_wait.add_done_callback(self._lock_taken)
            return
        group, self._pending = self._pending, []
        durable = self._must_sync(group)
        try:
            results = self._run_group(self._conn, group)
        finally:
            self._release_lock()
        if self._sync == "NORMAL":
            _resolve_all(results)
            return
        self._syncing = True
        syncer.jobs.put((durable, results, syncer.log_size >= CHECKPOINT_BYTES))

    def _lock_taken(self, waited: asyncio.Future[None]) -> None:
        """The thread took the workers' lock; the loop holds it now (an flock is the open file's, not
        a thread's), and writes at once."""
        self._waiting_for_lock = False
        error = None if waited.cancelled() else waited.exception()
        if waited.cancelled() or error is not None:
            log.error("journal lock failed, trying again: %s", error or "cancelled")
            self._loop.call_later(0.1, self._run_pending)
            return
        self._lock_held = True
        self._run_pending()

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        self._lock_held = False

    def _synced(self) -> None:
        """The syncer is done with the last commit: the next group may be written."""
        self._syncing = False
        if self._pending and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run_pending)

    def _must_sync(self, group: list[Job]) -> bool:
        """Whether the group must be on disk before its futures are resolved (module docstring)."""
        if self._sync != "STORES":
            return self._sync == "FULL"
        now = time.monotonic()
        if any(getattr(fn, "durable", True) for fn, _ in group) or now - self._synced_at >= MAX_SYNC_LAG_S:
            self._synced_at = now
            return True
        return False

    def _run_group(self, conn: sqlite3.Connection, group: list[Job]) -> Results:
        # Fast path: the whole group in one transaction, one commit. Jobs are written not to fail; if
        # one does, the group is rolled back and every job runs again in a transaction of its own, so
        # the failure stays with the job that caused it.
        try:
            conn.execute("BEGIN IMMEDIATE")
            values = [fn(conn) for fn, _ in group]
            conn.execute("COMMIT")
        except Exception:
            self._rollback(conn)
            return [self._run_alone(conn, fn, target) for fn, target in group]
        return [(target, True, value) for (_, target), value in zip(group, values, strict=True)]

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
            _log_failure("write", exc)
            self._rollback(conn)
            return target, False, exc
        return target, True, value


#: A failed write (or checkpoint) is logged at most once per this many seconds: a full disk fails every
#: one, and the gateway's service layer says what it does about it (service.journal_health).
_FAILURE_LOG_EVERY_S = 60.0
_failure_log: dict[str, list[float]] = {}  # what -> [last logged (monotonic), lines held back since]


def _log_failure(what: str, exc: Exception) -> None:
    now = time.monotonic()
    last = _failure_log.setdefault(what, [-_FAILURE_LOG_EVERY_S, 0])
    if now - last[0] < _FAILURE_LOG_EVERY_S:
        last[1] += 1
        return
    held = int(last[1])
    last[0], last[1] = now, 0
    more = f" ({held} more in the last {_FAILURE_LOG_EVERY_S:g} s)" if held else ""
    log.warning("journal %s failed: %s: %s%s", what, type(exc).__name__, exc, more)


class _Syncer(threading.Thread):
    """For each group the writer commits: fsyncs the write-ahead log when the group must be on disk,
    resolves the group's futures on the event loop, copies the log into the database when the writer
    asks for it, and tells the writer it may commit the next group."""

    def __init__(
        self,
        path: str,
        loop: asyncio.AbstractEventLoop,
        lock_path: str | None,
        synced: Callable[[], None],
    ) -> None:
        super().__init__(name="journal-syncer", daemon=True)
        self._path = path
        self._loop = loop
        self._lock_path = lock_path
        self._synced = synced
        self.jobs: queue.SimpleQueue[tuple[bool, Results, bool] | None] = queue.SimpleQueue()
        self.fsyncs = 0
        self.checkpoints = 0
        self.log_size = 0  # of the write-ahead log, at the last fsync
        self._checkpointer: sqlite3.Connection | None = None
        self._lock_fd = -1  # its own open file: an flock excludes other open files, not other threads

    def run(self) -> None:
        while (job := self.jobs.get()) is not None:
            durable, results, checkpoint = job
            if durable:
                self.sync_log(results)
            self._loop.call_soon_threadsafe(_resolve_all, results)
            if checkpoint:
                self._checkpoint()
            self._loop.call_soon_threadsafe(self._synced)
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)

    def _checkpoint(self) -> None:
        """Copy the whole log into the database file while no worker writes (the writer holds its
        commits until this is done, and the workers' lock holds the others off), so that the next
        commit starts the log over instead of making it longer."""
        try:
            if self._checkpointer is None:
                self._checkpointer = connect(self._path)
                if self._lock_path is not None:
                    self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            with _holding(self._lock_fd):
                self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as exc:
            _log_failure("checkpoint", exc)
        self.log_size = 0

    def sync_log(self, results: Results) -> None:
        """fsync the write-ahead log (or, when a checkpoint has emptied and removed it, the database
        file); should that fail, the callers get the error instead of their values: nothing they
        wrote may be acknowledged as durable."""
        try:
            for path in (self._path + "-wal", self._path):
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                    if path.endswith("-wal"):
                        self.log_size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
                self.fsyncs += 1
                return
        except OSError as exc:
            log.error("journal fsync failed: %s", exc)
            results[:] = [(target, False, exc) for target, _, _ in results]


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
    """Merges calls of one kind (store, apply) made before the writer runs its next group into one job.

    The event loop adds calls; the first call of a round submits one job to the writer; when that
    job runs it takes every call made so far and executes them as one batch (a few multi-row
    statements), so a thousand single-message calls cost about what one batch of a thousand costs.
    """

    def __init__(
        self, run_batch: Callable[[sqlite3.Connection, list[Any]], list[Any]], *, durable: bool = True
    ) -> None:
        self._run_batch = run_batch
        self.durable = durable
        self._calls: list[tuple[Sequence[Any], asyncio.Future[list[Any]]]] = []

    def add(self, writer: Writer, items: Sequence[Any], fut: asyncio.Future[list[Any]]) -> None:
        first = not self._calls
        self._calls.append((items, fut))
        if first:
            job = _CoalescedJob(self)
            writer.submit((job, job.futures))

    def take(self) -> list[tuple[Sequence[Any], asyncio.Future[list[Any]]]]:
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
