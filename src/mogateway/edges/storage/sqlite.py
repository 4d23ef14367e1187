"""The embedded journal: SQLite in WAL mode, group commits on the event loop, readers in threads.

What the journal does is written once for both engines (``storage.sql_journal``, ``storage.batches``);
here is how it runs on SQLite. Writes go through :mod:`~mogateway.edges.storage.sqlite_writer` (a group
per turn of the event loop, fsynced by a thread of its own), and the store/apply/receipt calls of one
turn are merged into one batch each (:class:`Coalescer`). Reads use their own read-only connections in
worker threads, so an admin listing never waits for the writer.

The schema is the migrations' (``storage.migrations``), which the journal applies itself when it opens
the file: a new file is created, an older one (also one of SQLite's own versions before the migrations
were SQLite's) upgraded in place.

Several worker processes may write one file: with ``lock_path`` each group commit holds an exclusive
lock on that file (``flock``) from ``BEGIN`` to ``COMMIT``, so the workers take turns in the kernel's
order instead of SQLite's sleep-and-retry on a busy database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mogateway.core.clients import ClientRecord
from mogateway.edges.storage import batches, migrations
from mogateway.edges.storage.client_documents import client_document
from mogateway.edges.storage.console_sessions import SqliteConsoleSessions
from mogateway.edges.storage.dialect import SQLITE, Program, run_sync
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sql_journal import Batch, SqlJournal, write_client
from mogateway.edges.storage.sqlite_writer import Coalescer, Writer, connect
from mogateway.service.private_files import ensure_private_file, make_private_directories

__all__ = ["SqliteJournal"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_SYNC_MODES = {"full": "FULL", "stores": "STORES", "normal": "NORMAL"}


def _prepare(conn: sqlite3.Connection) -> None:
    """Create or upgrade the schema (run by the writer, in a thread, before it takes any job)."""
    done = migrations.migrate_sqlite(conn)
    if done:
        log.info("journal schema migrated to version %d (%d migrations)", migrations.LATEST, len(done))
    _make_incremental(conn)


#: A file made before incremental vacuum is converted when it is opened (one VACUUM, which rewrites the
#: whole file) if it is at most this big; a bigger one is left for a maintenance window.
CONVERT_MAX_BYTES = 1 << 30
_INCREMENTAL = 2  # PRAGMA auto_vacuum


def _make_incremental(conn: sqlite3.Connection) -> None:
    """Give a file created before incremental vacuum that mode (docs/operations.md, Retention): a new
    file has it from its first table (``sqlite_writer.connect``); an older one needs one VACUUM, which
    copies the whole file (several seconds per GiB) and needs as much free space again."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == _INCREMENTAL:
        return
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if not path:
        return  # in memory
    size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = 0
    if size > CONVERT_MAX_BYTES or free < 2 * size + (64 << 20):
        log.warning(
            "journal %s (%d MiB) was made before incremental vacuum: space freed by retention is reused "
            "but the file does not shrink; to convert it, stop the gateway and run sqlite3 %s "
            "'PRAGMA auto_vacuum=INCREMENTAL; VACUUM;' (needs %d MiB free; docs/operations.md, Retention)",
            path,
            size >> 20,
            path,
            (size >> 20) + 64,
        )
        return
    started = time.monotonic()
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    log.info(
        "journal %s converted to incremental vacuum (once; %d MiB in %.1f s)",
        path,
        size >> 20,
        time.monotonic() - started,
    )


# Values of PRAGMA secure_delete, to put back the build's own setting after a client write.
_SECURE_DELETE = {0: "OFF", 1: "ON", 2: "FAST"}


class SqliteJournal(SqlJournal):
    """The journal on one SQLite file (see the module docstring)."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        synchronous: str = "stores",
        *,
        sealer: Sealer | None = None,
        lock_path: str | None = None,
    ) -> None:
        self.path = str(path)
        self._lock_path = lock_path
        self.sealer = sealer or Sealer()
        self._sync = _SYNC_MODES[synchronous]
        self._writer: Writer | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        # Storing an MO must be on disk before its source is acknowledged; what happens to it afterwards
        # rides on the next fsync (sqlite_writer: synchronous = stores).
        self._coalescers = {
            batches.store: Coalescer(_on_sqlite(batches.store)),
            batches.apply: Coalescer(_on_sqlite(batches.apply), durable=False),
            batches.deliveries: Coalescer(_on_sqlite(batches.deliveries), durable=False),
        }

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self.path != ":memory:":
            # Private whatever the umask: SQLite gives the -wal and -shm the journal's own mode.
            make_private_directories(Path(self.path).parent)
            ensure_private_file(self.path)
        writer = Writer(self.path, self._sync, _prepare, asyncio.get_running_loop(), self._lock_path)
        await writer.open()
        self._writer = writer

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.close()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        self._local = threading.local()

    def console_sessions(self) -> SqliteConsoleSessions:
        """The console's sessions and sign-in throttle, in this journal (storage/console_sessions.py)."""
        return SqliteConsoleSessions(self._write, self._read)

    # ------------------------------------------------------------------ plumbing

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        if self._writer is None:
            raise RuntimeError("journal is not open")
        fut: asyncio.Future[T] = self._writer.loop.create_future()
        self._writer.submit((fn, fut))
        return fut

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(lambda: fn(self._reader()))

    async def _batch(self, batch: Batch, items: Sequence[Any]) -> list[Any]:
        if self._writer is None:
            raise RuntimeError("journal is not open")
        fut: asyncio.Future[list[Any]] = self._writer.loop.create_future()
        self._coalescers[batch].add(self._writer, items, fut)
        return await fut

    async def _writing(self, program: Callable[..., Program[T]], *args: Any) -> T:
        return await self._write(lambda conn: run_sync(conn, program(SQLITE, *args)))

    async def _reading(self, program: Callable[..., Program[T]], *args: Any, snapshot: bool = False) -> T:
        def read(conn: sqlite3.Connection) -> T:
            if not snapshot:
                return run_sync(conn, program(SQLITE, *args))
            conn.execute("BEGIN")  # one snapshot for every statement (WAL: readers never wait)
            try:
                return run_sync(conn, program(SQLITE, *args))
            finally:
                conn.execute("COMMIT")

        return await self._read(read)

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        doc = client_document(client, self.sealer)

        def job(conn: sqlite3.Connection) -> None:
            # The document replaced may hold secrets (in plain text, or under a retired key): they must
            # not linger in the file's free space, whatever this SQLite build's default is. Only around
            # this write, so the message tables keep the build's own trade-off.
            before = _SECURE_DELETE.get(conn.execute("PRAGMA secure_delete").fetchone()[0], "OFF")
            conn.execute("PRAGMA secure_delete=ON")
            try:
                run_sync(conn, write_client(SQLITE, client.id, doc, client.updated_at))
            finally:
                conn.execute(f"PRAGMA secure_delete={before}")

        await self._write(job)


def _on_sqlite(batch: Batch) -> Callable[[sqlite3.Connection, list[Any]], list[Any]]:
    """``batch`` as the writer's coalescer runs it: on its connection, in its group transaction."""
    return lambda conn, items: run_sync(conn, batch(SQLITE, items, time.time()))
