"""Talk between the worker processes of one gateway (``mogateway serve --workers N``), over Unix sockets.

Every worker listens on its own socket in the workers' directory (``w<i>.sock``) and keeps one
connection to each other worker, opened at start and again after a loss. On a connection go frames: a
4-byte big-endian length, then one JSON document —

* ``{"op": name, "args": ...}`` — a **notification**: handled, never answered (a dispatch hint);
* ``{"op": name, "args": ..., "id": n}`` — a **request**, answered by
* ``{"re": n, "value": ...}`` or ``{"re": n, "error": text}``.

What a lost frame means is the caller's business: a notification that could not be written is dropped
(``notify`` says so), a request either was never sent (:class:`PeerUnreachable`: safe to try again) or
went out and got no answer (:class:`PeerLost`, or ``TimeoutError``: the peer may have acted on it).
``on_lost`` is called with a peer's index whenever a connection to or from it ends, which is how a
worker learns that a sibling died (it then looks for MOs the sibling may have stored for it without
telling it, see ``service.orphans``).

The peers are the same program on the same machine, so documents are trusted; frames are bounded all
the same (:data:`MAX_FRAME`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import struct
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import orjson

from mogateway.service.deadline import deadline

__all__ = [
    "MAX_FRAME",
    "IpcError",
    "IpcServer",
    "Peer",
    "PeerLost",
    "PeerUnreachable",
    "RemoteError",
    "socket_path",
]

log = logging.getLogger(__name__)

#: The largest frame read or written (a batch of dispatch hints stays far below it).
MAX_FRAME = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")
_RECONNECT_S = 0.2

#: What a worker does with a request or a notification: called with its args, returns the answer.
Handler = Callable[[Any], Awaitable[Any]]


def socket_path(directory: str | Path, worker: int) -> str:
    """Where worker ``worker`` listens."""
    return str(Path(directory) / f"w{worker}.sock")


class IpcError(Exception):
    """A request to another worker did not get its answer."""


class PeerUnreachable(IpcError):
    """No connection to the peer: the request was not sent."""


class PeerLost(IpcError):
    """The connection ended after the request was sent: the peer may have acted on it."""


class RemoteError(IpcError):
    """The peer's handler raised; its text."""


class _Connection(asyncio.Protocol):
    """One socket, either end: reads frames, answers requests with ``handlers``, resolves answers."""

    def __init__(self, handlers: Mapping[str, Handler], on_close: Callable[[_Connection], None]) -> None:
        self._handlers = handlers
        self._on_close = on_close
        self._buffer = bytearray()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset = 0
        end = len(buffer)
        while end - offset >= 4:
            (size,) = _LENGTH.unpack_from(buffer, offset)
            if size > MAX_FRAME:
                log.error("worker connection: frame of %d bytes refused; closing", size)
                self._abort()
                return
            if end - offset - 4 < size:
                break
            doc = orjson.loads(memoryview(buffer)[offset + 4 : offset + 4 + size])
            offset += 4 + size
            self._handle(doc)
        if offset:
            del buffer[:offset]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(PeerLost("the connection to the worker ended"))
        self._waiting.clear()
        self.closed.set()
        self._on_close(self)

    # ------------------------------------------------------------------ frames

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def write(self, doc: Any) -> bool:
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        body = orjson.dumps(doc)
        if len(body) > MAX_FRAME:
            raise ValueError(f"an IPC frame of {len(body)} bytes is over the limit")
        transport.write(_LENGTH.pack(len(body)) + body)
        return True

    async def request(self, op: str, args: Any, timeout: float) -> Any:
        number = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        try:
            if not self.write({"op": op, "args": args, "id": number}):
                raise PeerUnreachable("not connected")
            async with deadline(timeout):  # a timer per request cost more than the request's own work
                return await future
        finally:
            self._waiting.pop(number, None)

    def _handle(self, doc: dict[str, Any]) -> None:
        if "re" in doc:
            future = self._waiting.get(doc["re"])
            if future is not None and not future.done():
                if "error" in doc:
                    future.set_exception(RemoteError(str(doc["error"])))
                else:
                    future.set_result(doc.get("value"))
            return
        handler = self._handlers.get(doc.get("op", ""))
        number = doc.get("id")
        if handler is None:
            if number is not None:
                self.write({"re": number, "error": f"unknown operation {doc.get('op')!r}"})
            return
        task = asyncio.get_running_loop().create_task(self._run(handler, doc.get("args"), number))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, handler: Handler, args: Any, number: int | None) -> None:
        try:
            value = await handler(args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("worker request failed")
            if number is not None:
                self.write({"re": number, "error": f"{type(exc).__name__}: {exc}"})
            return
        if number is not None:
            self.write({"re": number, "value": value})

    async def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class IpcServer:
    """A worker's socket: answers the other workers' requests with ``handlers``."""

    def __init__(
        self,
        path: str,
        handlers: Mapping[str, Handler],
        *,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self._handlers = handlers
        self._on_lost = on_lost
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a previous run of this worker
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(self._connection, self.path)
        os.chmod(self.path, 0o600)

    def _connection(self) -> _Connection:
        connection = _Connection(self._handlers, self._closed)
        self._connections.add(connection)
        return connection

    def _closed(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        if self._on_lost is not None:
            self._on_lost()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            await connection.cancel_tasks()
            connection._abort()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class Peer:
    """This worker's connection to another worker's socket, opened on first use and after a loss.

    ``on_lost`` is called when an open connection ends (the peer stopped or died)."""

    def __init__(self, index: int, path: str, *, on_lost: Callable[[int], None] | None = None) -> None:
        self.index = index
        self.path = path
        self._on_lost = on_lost
        self._connection: _Connection | None = None
        self._connecting: asyncio.Task[_Connection | None] | None = None
        self._pending: list[Any] = []  # notifications written once a connection opens
        self._stopped = False

    @property
    def connected(self) -> bool:
        c = self._connection
        return c is not None and c.transport is not None

    async def connect(self) -> bool:
        """Open the connection now if it is not open; whether it is."""
        if self.connected:
            return True
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._open())
        return await asyncio.shield(self._connecting) is not None

    async def _open(self) -> _Connection | None:
        if self._stopped:
            return None
        loop = asyncio.get_running_loop()
        try:
            _transport, connection = await loop.create_unix_connection(
                lambda: _Connection({}, self._closed), self.path
            )
        except OSError:
            self._pending.clear()  # the peer is not listening: what it was told is in its recovery
            return None
        self._connection = connection
        pending, self._pending = self._pending, []
        for doc in pending:
            connection.write(doc)
        return connection

    def _closed(self, connection: _Connection) -> None:
        if self._connection is connection:
            self._connection = None
            if self._on_lost is not None and not self._stopped:
                self._on_lost(self.index)

    def notify(self, op: str, args: Any) -> None:
        """Send a notification; dropped when the peer cannot be reached (it then finds the work in the
        journal when it starts again)."""
        doc = {"op": op, "args": args}
        connection = self._connection
        if connection is not None and connection.write(doc):
            return
        self._pending.append(doc)
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._open())

    async def request(self, op: str, args: Any, *, timeout: float) -> Any:
        """The peer's answer to ``op``. Raises :class:`PeerUnreachable` (not sent), :class:`PeerLost`
        or ``TimeoutError`` (sent, no answer) or :class:`RemoteError`."""
        if not await self.connect():
            raise PeerUnreachable(f"worker {self.index} is not listening")
        connection = self._connection
        if connection is None:
            raise PeerUnreachable(f"worker {self.index} is not listening")
        return await connection.request(op, args, timeout)

    async def close(self) -> None:
        self._stopped = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._connection is not None:
            self._connection._abort()
            await self._connection.closed.wait()


async def keep_connected(peers: list[Peer], stop: asyncio.Event) -> None:
    """Reopen lost connections to the peers (a restarted worker is known again within a moment)."""
    while not stop.is_set():
        for peer in peers:
            if not peer.connected:
                await peer.connect()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _RECONNECT_S)
