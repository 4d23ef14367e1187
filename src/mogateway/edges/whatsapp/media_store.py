"""The optional copy of WhatsApp media (``whatsapp_media_store``): media outlive Meta's 7 days.

Off by default. With a directory set, the gateway keeps each media message's bytes there, one file per
message named by its id (ids have the shape of ``core.ids``: no path in them):

* **Taken when the message comes** (:meth:`MediaStore.prefetch`, spawned by the webhook for each newly
  stored media message), and when a fetch streams it from Graph and the store has none yet (the route
  writes the bytes it passes on: :meth:`MediaStore.writer`).
* **Only whole and right**: written to a hidden temporary file, flushed to disk, and renamed to its
  name only when its sha256 is the webhook's (or Graph's, when the webhook had none that reads) and
  its size the announced one; anything else is removed. A file under a message's name is therefore
  the media, whole.
* **Served from the directory** when it is there (:meth:`MediaStore.open`), without asking Graph.
* **Under the journal's retention**: :meth:`MediaStore.sweep` removes the files whose message the
  journal no longer has (retention deleted it), and temporary files older than an hour (a crash in
  the middle of a write); the node runs it where retention runs, every 5 minutes.
* **Private**: the directory (and any parent it creates) is 0700 and each file 0600 whatever the umask
  (``service.private_files``, as the journal, backups and exports): a media is a subscriber's photo,
  voice or document. ``mogateway doctor`` warns about any the group or others may read.
* The directory is the node's own: in a cluster each node keeps what it fetched (a message's media is
  fetched from Graph by another node, and kept there, too). Reads, the flush to disk, the rename and
  the sweep's listing run on a thread; a chunk is written from the event loop (to the page cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from mogateway.core.ids import ID_SHAPE
from mogateway.service.private_files import make_private_directories, open_private

__all__ = ["MediaStore", "StoreWriter"]

log = logging.getLogger("mogateway.whatsapp")
_CHUNK = 64 * 1024
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0


class StoreWriter:
    """One media being written: :meth:`write` each chunk, then :meth:`finish` (kept when its digest
    and size are right) or :meth:`abandon`."""

    def __init__(self, final: Path) -> None:
        self._final = final
        self._tmp = final.with_name(f"{_TMP_PREFIX}{final.name}-{secrets.token_hex(4)}")
        # created 0600 (kept by the rename), closed by finish or abandon
        self._file: IO[bytes] | None = os.fdopen(open_private(self._tmp, exclusive=True), "wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(chunk)
        except OSError as exc:  # a full disk never breaks the fetch itself
            log.warning("WhatsApp media store: cannot write %s: %s", self._final.name, exc)
            self.abandon()
            return
        self._hash.update(chunk)
        self.size += len(chunk)

    async def finish(self, digest: bytes | None, size: int | None) -> bool:
        """Keep the file when it is whole (``digest`` and ``size`` as announced); True when kept."""
        if self._file is None:
            return False
        if (digest is not None and self._hash.digest() != digest) or (size is not None and self.size != size):
            self.abandon()
            return False
        file, self._file = self._file, None
        try:
            await asyncio.to_thread(_flush_and_rename, file, self._tmp, self._final)
        except OSError as exc:
            log.warning("WhatsApp media store: cannot keep %s: %s", self._final.name, exc)
            with contextlib.suppress(OSError):
                self._tmp.unlink()
            return False
        return True

    def abandon(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            self._tmp.unlink()


def _flush_and_rename(file: IO[bytes], tmp: Path, final: Path) -> None:
    try:
        file.flush()
        os.fsync(file.fileno())
    finally:
        file.close()
    os.replace(tmp, final)


class MediaStore:
    """The directory of kept media (module docstring)."""

    def __init__(self, directory: Path, *, prefetch_at_once: int = 2) -> None:
        self.directory = directory
        make_private_directories(directory)
        self._prefetching = asyncio.Semaphore(prefetch_at_once)

    def path_of(self, message_id: str) -> Path | None:
        return self.directory / message_id if ID_SHAPE.match(message_id) else None

    def has(self, message_id: str) -> bool:
        path = self.path_of(message_id)
        return path is not None and path.is_file()

    def writer(self, message_id: str) -> StoreWriter | None:
        """A writer for ``message_id``'s media, or None (kept already, or the directory refuses)."""
        path = self.path_of(message_id)
        if path is None or path.exists():
            return None
        try:
            return StoreWriter(path)
        except OSError as exc:
            log.warning("WhatsApp media store: cannot write in %s: %s", self.directory, exc)
            return None

    async def open(self, message_id: str) -> tuple[int, AsyncIterator[bytes]] | None:
        """(size, chunks) of the kept media, or None when there is none."""
        path = self.path_of(message_id)
        if path is None:
            return None
        try:
            file = await asyncio.to_thread(open, path, "rb")
        except OSError:
            return None
        size = os.fstat(file.fileno()).st_size

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await asyncio.to_thread(file.read, _CHUNK):
                    yield chunk
            finally:
                file.close()

        return size, chunks()

    async def prefetch(self, message_id: str, fetch: Callable[[StoreWriter], Awaitable[Any]]) -> None:
        """Keep ``message_id``'s media now (``fetch`` streams it into the writer and finishes it)."""
        async with self._prefetching:
            writer = self.writer(message_id)
            if writer is None:
                return
            try:
                await fetch(writer)
            except Exception as exc:  # logged, never raised: the message is stored whatever happens here
                log.warning("WhatsApp media store: could not keep the media of %s: %s", message_id, exc)
            finally:
                writer.abandon()  # a no-op once finished

    async def sweep(self, exists: Callable[[str], Awaitable[bool]]) -> int:
        """Remove the files whose message is gone, and stale temporary files; how many were removed."""
        removed = 0
        now = time.time()
        names = await asyncio.to_thread(os.listdir, self.directory)
        for name in names:
            path = self.directory / name
            try:
                if name.startswith(_TMP_PREFIX):
                    if now - path.stat().st_mtime > _STALE_TMP_S:
                        path.unlink()
                        removed += 1
                elif ID_SHAPE.match(name) and not await exists(name):
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
