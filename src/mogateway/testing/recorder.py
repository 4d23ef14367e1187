"""A recording callback application: a real HTTP/1.1 server on 127.0.0.1 that records every request and
answers as it is told to — well (a text reply) or badly (blank, an error status, the wrong content type,
late, trickling, too large, or hanging up without a word).

It is written on raw asyncio streams rather than on an ASGI server because the bad answers are the point:
an ASGI server would not let an application close the socket mid-request or send a body slower than the
gateway's deadline byte by byte. Use it in your own tests of a gateway deployment, too::

    with CallbackRecorder.in_thread(Answer.text("Thanks!")) as app:  # a background thread, a free port
        register_client(callback_url=app.url)
        push_mo(...)
        (call,) = app.wait_for_calls(1, timeout=5)
        assert call.headers["authorization"] == "Bearer ..."
        app.answer = Answer.status(500)                               # change behaviour at any time

or inside a running event loop: ``async with CallbackRecorder(...) as app: await app.until_calls(1)``.

``answer`` is an :class:`Answer` or a function of the :class:`RecordedCall` returning one;
:meth:`CallbackRecorder.then` queues one-shot answers used (in order) before it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import http
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

__all__ = ["Answer", "AnswerSource", "CallbackRecorder", "RecordedCall"]

#: The gateway reads at most this many bytes of an answer (the contract's limit), repeated here so the
#: recorder can make a body that is just over it without importing the gateway.
_CONTRACT_LIMIT = 64 * 1024
_MAX_HEAD = 64 * 1024
_STARTUP_S = 10.0


@dataclass(frozen=True, slots=True)
class Answer:
    """How to answer one request. The constructors below name the usual cases."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "text/plain; charset=utf-8"
    #: Seconds to wait before sending anything.
    delay_s: float = 0.0
    #: Send the body this many bytes at a time (0: all at once) with ``trickle_s`` between pieces.
    trickle_bytes: int = 0
    trickle_s: float = 0.0
    #: Close the connection without answering at all.
    close: bool = False
    #: ``transfer-encoding: chunked`` instead of a ``content-length``.
    chunked: bool = False
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, text: str, *, charset: str = "utf-8", content_type: str | None = None, **kw: Any) -> Answer:
        """A 200 reply with ``text`` encoded in ``charset`` (``content_type`` overrides the header)."""
        ctype = content_type if content_type is not None else f"text/plain; charset={charset}"
        return cls(body=text.encode(charset), content_type=ctype, **kw)

    @classmethod
    def blank(cls, body: bytes = b"", **kw: Any) -> Answer:
        """A 200 text/plain answer with an empty (or whitespace-only) body."""
        return cls(body=body, **kw)

    @classmethod
    def with_status(cls, status: int, body: bytes = b"", **kw: Any) -> Answer:
        """An answer with any status, e.g. 500, 404, 204, 302 (add a location with ``headers``)."""
        return cls(status=status, body=body, **kw)

    @classmethod
    def oversize(cls, size: int = _CONTRACT_LIMIT + 1, **kw: Any) -> Answer:
        """A text answer of ``size`` bytes (by default one byte more than a gateway may read)."""
        return cls(body=b"a" * size, **kw)

    @classmethod
    def late(cls, delay_s: float, text: str = "late", **kw: Any) -> Answer:
        """A text answer sent only after ``delay_s`` seconds."""
        return cls.text(text, delay_s=delay_s, **kw)

    @classmethod
    def hang_up(cls) -> Answer:
        """Read the request, then close the connection without a status line."""
        return cls(close=True)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One request the recorder received. Header names are lowercase; repeated headers are joined."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default=0.0, compare=False)  # time.monotonic() when the body was complete

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


AnswerSource = Answer | Callable[[RecordedCall], Answer]


class _BadRequest(Exception):
    pass


class CallbackRecorder:
    """A programmable, recording HTTP server on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self, answer: AnswerSource | None = None, *, path: str = "/callback", max_body: int = 1 << 20
    ) -> None:
        self.answer: AnswerSource = answer if answer is not None else Answer.text("OK")
        self.path = path
        self.max_body = max_body
        self.port = 0
        self._calls: list[RecordedCall] = []
        self._once: collections.deque[Answer] = collections.deque()
        self._changed = threading.Condition()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self.connections = 0

    # ------------------------------------------------------------------ what tests read

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The URL to register as a callback."""
        return self.base_url + self.path

    @property
    def calls(self) -> list[RecordedCall]:
        """A copy of the calls so far, in the order their bodies were complete."""
        with self._changed:
            return list(self._calls)

    def clear(self) -> None:
        with self._changed:
            self._calls.clear()

    def then(self, *answers: Answer) -> CallbackRecorder:
        """Use these answers, in order, for the next requests; then ``answer`` again."""
        with self._changed:
            self._once.extend(answers)
        return self

    def wait_for_calls(self, count: int, timeout: float = 5.0) -> list[RecordedCall]:
        """Block until at least ``count`` calls were recorded; raises TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._calls) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._calls)} of {count} callback calls within {timeout} s")
                self._changed.wait(left)
            return list(self._calls)

    async def until_calls(self, count: int, timeout: float = 5.0) -> list[RecordedCall]:
        """The asyncio form of :meth:`wait_for_calls` (polls, so it works across threads too)."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls
            if len(calls) >= count:
                return calls
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(calls)} of {count} callback calls within {timeout} s")
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ running it

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port, in the running event loop."""
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0, limit=_MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop every open connection (a request in its delay is abandoned)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> CallbackRecorder:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @classmethod
    @contextlib.contextmanager
    def in_thread(cls, answer: AnswerSource | None = None, **options: Any) -> Iterator[CallbackRecorder]:
        """Run a recorder in a background thread with its own event loop for the ``with`` block."""
        recorder = cls(answer, **options)
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(recorder.start())
            except BaseException as exc:  # reported to the caller below
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(recorder.stop())
            loop.close()

        thread = threading.Thread(target=run, name="callback-recorder", daemon=True)
        thread.start()
        if not ready.wait(_STARTUP_S) or failure:
            raise RuntimeError(f"the callback recorder did not start: {failure[:1]}")
        try:
            yield recorder
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    # ------------------------------------------------------------------ HTTP/1.1, by hand

    def _next_answer(self, call: RecordedCall) -> Answer:
        with self._changed:
            if self._once:
                return self._once.popleft()
        source = self.answer
        return source if isinstance(source, Answer) else source(call)

    def _record(self, call: RecordedCall) -> None:
        with self._changed:
            self._calls.append(call)
            self._changed.notify_all()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            while True:
                try:
                    request = await self._read_request(reader)
                except _BadRequest as exc:
                    await self._write(writer, Answer.with_status(400, str(exc).encode()), False)
                    return
                if request is None:
                    return
                call, keep_alive = request
                self._record(call)
                answer = self._next_answer(call)
                if answer.delay_s:
                    await asyncio.sleep(answer.delay_s)
                if answer.close:
                    return
                await self._write(writer, answer, keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return  # the gateway gave up (its deadline) or hung up: nothing to answer
        except asyncio.CancelledError:
            # Only stop() cancels a handler. Ending normally keeps asyncio.start_server from logging the
            # cancellation as an error of the connection callback.
            return
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[RecordedCall, bool] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _BadRequest("incomplete request head") from None
            return None  # a kept-alive connection closed between requests
        except asyncio.LimitOverrunError:
            raise _BadRequest("request head too large") from None
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            raise _BadRequest("malformed request line") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest("malformed header line")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader)
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise _BadRequest("bad content-length") from None
            if length > self.max_body:
                raise _BadRequest("body too large")
            body = await reader.readexactly(length)
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
        return RecordedCall(method, target, headers, body, time.monotonic()), keep_alive

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadRequest("bad chunk size") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if total > self.max_body:
                raise _BadRequest("body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, answer: Answer, keep_alive: bool) -> None:
        try:
            reason = http.HTTPStatus(answer.status).phrase
        except ValueError:
            reason = "Unknown"
        head = [f"HTTP/1.1 {answer.status} {reason}"]
        if answer.content_type is not None:
            head.append(f"content-type: {answer.content_type}")
        no_body = answer.status in (204, 304) or 100 <= answer.status < 200
        if not no_body:
            head.append(
                "transfer-encoding: chunked" if answer.chunked else f"content-length: {len(answer.body)}"
            )
        head.extend(f"{name}: {value}" for name, value in answer.headers)
        head.append(f"connection: {'keep-alive' if keep_alive else 'close'}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if no_body:
            await writer.drain()
            return
        body = answer.body
        step = answer.trickle_bytes or max(1, len(body))
        for start in range(0, len(body), step):
            piece = body[start : start + step]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if answer.chunked else piece)
            await writer.drain()
            if answer.trickle_s and start + step < len(body):
                await asyncio.sleep(answer.trickle_s)
        if answer.chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
