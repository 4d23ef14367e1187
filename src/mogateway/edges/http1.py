"""A lean HTTP/1.1 client for callbacks: keep-alive pools, a size cap, an address guard at connect.

Why not aiohttp's client: on this hot path it costs about 220 µs of CPU per request, most of it in
machinery a callback does not need (cookie jars, tracing hooks, redirects, multidicts). This client writes
the request in one buffer and parses the answer with httptools (llhttp, in C), for about 40 µs. It does
exactly what the callback contract needs and nothing else:

* ``POST`` with a complete body; answers parsed for status, content type and body.
* Connections are kept alive and reused per origin; a reused connection that turns out to be closed by
  the server before any answer byte arrived is replaced once, at once (the request was not processed).
* At most ``max_body`` bytes of an answer are kept; a larger answer is reported as oversized and its
  connection closed.
* Redirects are never followed; there are no cookies.
* The answer's headers are read for framing, content type and coding only, unless the client is made with
  ``capture_headers=True`` (the portal's "test my endpoint", which shows them): then at most
  :data:`MAX_CAPTURED_HEADERS` headers of at most :data:`MAX_CAPTURED_HEADER_BYTES` in all are kept, and
  the rest counted. The dispatcher's connections are another class, so the capture costs it nothing.
* Host names are resolved with the event loop's resolver (or the one given; cached briefly) and every
  address is checked by :func:`mogateway.edges.urlguard.address_allowed` before connecting — the
  connect-time half of the SSRF guard, which also covers DNS rebinding.
* The URL is used in its ASCII form (:func:`mogateway.edges.urlguard.normalize_callback_url`), and a
  request line or Host header with anything but visible ASCII is never written: a control character
  there would split or smuggle a request. Such a URL is refused (UrlRefused) before connecting.

* Quick ACKs (Linux): the answer's bytes are acknowledged at once (``TCP_QUICKACK``, re-armed after the
  request is written and after every read, because the kernel drops it again by itself). An application
  that writes its headers and its body in two writes without ``TCP_NODELAY`` (Python's ``http.server``,
  several dev servers) otherwise waits, in Nagle's algorithm, for the ACK of its headers, which a
  kept-alive connection delays up to 40 ms: every callback took 40 ms more (docs/client.md,
  bench/callback_nagle.py).

Deadlines are the caller's (``service.deadline`` around :meth:`Http1Client.post`); a cancelled request
closes its connection, so a late answer can never be taken for the next request's.

Two policies are the callback path's and are options for other users (the Graph API sender,
``edges.whatsapp.graph_sender``):

* ``allow_private``: the address guard refuses loopback and private addresses unless it is set (a Graph
  URL pointing at a fake or a private proxy on loopback sets it explicitly).
* ``retry_stale``: a request on a reused connection that the server closed before any answer byte is
  sent again once on a new connection (right for callbacks, which are idempotent by message id). A
  sender that must never send twice (a WhatsApp reply reaches a person) turns it off and reads
  :class:`RequestProgress` instead: whether the request's bytes began to go out.

TLS is the standard ``ssl`` module's: ``ssl_context`` (default: the system's CAs, made on first use), or
:func:`tls_context` for a CA file of a private proxy.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from functools import lru_cache
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from mogateway.core.callback_url import UrlRefused, address_allowed, check_url_shape, normalize_callback_url
from mogateway.core.contract import MAX_RESPONSE_BYTES
from mogateway.core.immutable import immutable
from mogateway.core.ports import AnswerIncomplete, AnswerMalformed, ConnectFailed, RawAnswer
from mogateway.edges.urlguard import Resolver, system_resolver
from mogateway.service.running_loop import RunningLoop

__all__ = [
    "MAX_ANSWER_HEAD_BYTES",
    "MAX_CAPTURED_HEADERS",
    "MAX_CAPTURED_HEADER_BYTES",
    "Http1Client",
    "RequestProgress",
    "tls_context",
]

#: What a capture of an answer's headers keeps at most (``capture_headers=True``): a page shows them,
#: and an endpoint that answers a thousand headers must not make the page (or the worker) huge.
MAX_CAPTURED_HEADERS = 64
MAX_CAPTURED_HEADER_BYTES = 16 * 1024

# An answer's status line and headers, at most: httptools (llhttp) sets no bound of its own and buffers a
# header's value until it ends, so without this a server could grow our memory with one endless header
# until the deadline. 64 KiB is four times what common servers accept in a request's head.
MAX_ANSWER_HEAD_BYTES = 64 * 1024
_DNS_TTL_S = 30.0
_IDLE_KEEP_S = 15.0
_MAX_IDLE_PER_ORIGIN = 1024
_FRAMING = (b"content-length", b"transfer-encoding")
#: What a request target and a Host header may hold: visible ASCII, nothing else (no space, no controls).
_VISIBLE_ASCII = re.compile(rb"[\x21-\x7e]+")
#: Linux's TCP_QUICKACK (None elsewhere: nothing is set).
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


@immutable
class _Target:
    tls: bool
    host: str
    port: int
    host_header: bytes
    target: bytes  # path and query

    @property
    def origin(self) -> tuple[bool, str, int]:
        return self.tls, self.host, self.port


@lru_cache(maxsize=4096)
def _target(url: str) -> _Target:
    url = normalize_callback_url(url)
    scheme, host = check_url_shape(url)
    parts = urlsplit(url)
    tls = scheme == "https"
    port = parts.port or (443 if tls else 80)
    default_port = (tls and port == 443) or (not tls and port == 80)
    host_text = f"[{host}]" if ":" in host else host
    host_header = host_text if default_port else f"{host_text}:{port}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    target = path.encode("ascii", "replace")
    host_bytes = host_header.encode("ascii", "replace")
    for what, value in (("request target", target), ("host", host_bytes)):
        if not _VISIBLE_ASCII.fullmatch(value):
            raise UrlRefused(f"the {what} {value!r} has characters an HTTP/1.1 request line cannot carry")
    return _Target(tls, host, port, host_bytes, target)


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """A verifying client context: the system's CAs, or only those in ``ca_file`` (PEM) when given."""
    return ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()


class RequestProgress:
    """Whether a request's bytes were handed to the connection (``written``). Before that, whatever
    happens (no connection, a deadline while connecting or waiting for the event loop), the server
    cannot have seen the request."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = False


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, max_body: int, quick_ack: bool = True) -> None:
        self._max_body = max_body
        self._quick_ack = quick_ack and _TCP_QUICKACK is not None
        self._socket: Any = None
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future[RawAnswer] | None = None
        self._parser: Any = None
        self._reset()

    def _reset(self) -> None:
        self._got_bytes = False
        self._head_bytes = 0
        self._headers_done = False
        self._status = 0
        self._content_type: str | None = None
        self._content_encoding = ""
        self._chunks: list[bytes] = []
        self._size = 0
        self._oversized = False
        self._complete = False
        self._keep_alive = False
        self._framed = False  # content-length or chunked: the end is known without closing

    # ---------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they have the same methods.
        self.transport = cast(asyncio.Transport, transport)
        # One parser for the connection's life: llhttp starts on the next answer by itself after a
        # complete one (keep-alive); a connection whose answer was not complete is never reused.
        self._parser = httptools.HttpResponseParser(self)
        if self._quick_ack:
            self._socket = transport.get_extra_info("socket")

    def _ack_quickly(self) -> None:
        """Acknowledge what arrives next at once (the kernel turns this off again by itself)."""
        if self._socket is not None:
            try:
                self._socket.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
            except OSError:  # closed under us, or not TCP after all: nothing to speed up
                self._socket = None

    def data_received(self, data: bytes) -> None:
        self._ack_quickly()
        waiter = self._waiter
        if waiter is None or waiter.done():
            # Bytes nobody asked for: the connection is out of step; never reuse it.
            self.close()
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(AnswerMalformed("the server switched protocols"))
            return
        except httptools.HttpParserError as exc:
            self._fail(AnswerMalformed(f"malformed HTTP answer: {exc}"))
            return
        if not self._headers_done:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_ANSWER_HEAD_BYTES:
                self._fail(AnswerMalformed(f"the answer's headers run over {MAX_ANSWER_HEAD_BYTES} bytes"))
                return
        if self._oversized:
            self._finish()
            self.close()
        elif self._complete:
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done and not self._framed:
            # An answer delimited by the end of the connection (no content-length, not chunked).
            self._keep_alive = False
            self._finish()
        elif not self._got_bytes:
            why = f": {exc}" if exc else ""
            waiter.set_exception(ConnectFailed(f"connection closed before the answer{why}"))
        else:
            waiter.set_exception(AnswerIncomplete("connection closed in the middle of the answer"))

    # ---------------------------------------------------------------- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"content-type":
            self._content_type = value.decode("latin-1").strip()
        elif lowered == b"content-encoding":
            self._content_encoding = value.decode("latin-1").strip().lower()
        elif lowered in _FRAMING and (lowered == b"content-length" or b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self._oversized:
            return
        self._size += len(body)
        if self._size > self._max_body:
            self._oversized = True
            self._chunks.clear()
        else:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    # ---------------------------------------------------------------- requests

    def _answer(self) -> RawAnswer:
        return RawAnswer(
            self._status,
            self._content_type,
            b"" if self._oversized else b"".join(self._chunks),
            self._oversized,
            self._content_encoding,
        )

    def _finish(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(self._answer())

    def _fail(self, exc: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def send(
        self, request: bytes, loop: asyncio.AbstractEventLoop, progress: RequestProgress | None = None
    ) -> asyncio.Future[RawAnswer]:
        assert self.transport is not None
        self._reset()
        self._waiter = loop.create_future()
        if self.closed:  # closed by the server before we wrote: nothing went out
            self._waiter.set_exception(ConnectFailed("the connection was closed before the request"))
            return self._waiter
        if progress is not None:
            progress.written = True
        self.transport.write(request)
        self._ack_quickly()
        return self._waiter

    @property
    def reusable(self) -> bool:
        return not self.closed and self._complete and self._keep_alive and not self._oversized

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _HeaderCapturingConnection(_Connection):
    """A connection that also keeps the answer's headers, within the capture's bound (module docstring).

    A subclass rather than a flag: httptools looks ``on_header`` up once per parser, so the dispatcher's
    plain connections do no work per header for a capture they never make."""

    def _reset(self) -> None:
        super()._reset()
        self._captured: list[tuple[str, str]] = []
        self._captured_bytes = 0
        self._left_out = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        size = len(name) + len(value)
        if (
            len(self._captured) >= MAX_CAPTURED_HEADERS
            or self._captured_bytes + size > MAX_CAPTURED_HEADER_BYTES
        ):
            self._left_out += 1
            return
        self._captured_bytes += size
        self._captured.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def _answer(self) -> RawAnswer:
        plain = super()._answer()
        return RawAnswer(
            plain.status,
            plain.content_type,
            plain.body,
            plain.oversized,
            plain.content_encoding,
            tuple(self._captured),
            self._left_out,
        )


class Http1Client:
    """Keep-alive HTTP/1.1 ``POST`` for callbacks. One instance per gateway; close it on shutdown."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        max_body: int = MAX_RESPONSE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        resolve: Resolver = system_resolver,
        quick_ack: bool = True,
        retry_stale: bool = True,
        capture_headers: bool = False,
    ) -> None:
        self._allow_private = allow_private
        self._connection_class = _HeaderCapturingConnection if capture_headers else _Connection
        self._retry_stale = retry_stale
        self._quick_ack = quick_ack
        self._resolve = resolve
        self._max_body = max_body
        self._ssl = ssl_context
        self._idle: dict[tuple[bool, str, int], list[_Connection]] = {}
        self._dns: dict[tuple[str, int], tuple[float, list[tuple[int, str]]]] = {}
        self._closed = False
        self._loop = RunningLoop()

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], progress: RequestProgress | None = None
    ) -> RawAnswer:
        """POST ``body`` and return the answer. Raises UrlRefused, ConnectFailed, AnswerMalformed,
        AnswerIncomplete; cancellation (the caller's deadline) closes the connection. ``progress``
        records whether the request began to go out."""
        target = _target(url)
        request = self._request_bytes(target, body, headers)
        loop = self._loop()
        conn, reused = self._checkout(target.origin)
        if conn is None:
            conn = await self._connect(target)
        try:
            try:
                answer = await conn.send(request, loop, progress)
            except ConnectFailed:
                if not reused or not self._retry_stale:
                    raise
                # The server closed an idle connection as we used it: the request was not received.
                conn = await self._connect(target)
                answer = await conn.send(request, loop, progress)
        except BaseException:
            conn.close()
            raise
        if conn.reusable and not self._closed:
            self._checkin(target.origin, conn)
        else:
            conn.close()
        return answer

    async def close(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    # ---------------------------------------------------------------- internals

    @staticmethod
    def _request_bytes(target: _Target, body: bytes, headers: dict[str, str]) -> bytes:
        lines = [b"POST ", target.target, b" HTTP/1.1\r\nhost: ", target.host_header, b"\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r} contains a line break")
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines.append(b"content-length: %d\r\n\r\n" % len(body))
        lines.append(body)
        return b"".join(lines)

    def _checkout(self, origin: tuple[bool, str, int]) -> tuple[_Connection | None, bool]:
        idle = self._idle.get(origin)
        if not idle:
            return None, False
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.closed or now - conn.idle_since > _IDLE_KEEP_S:
                conn.close()
                continue
            return conn, True
        return None, False

    def _checkin(self, origin: tuple[bool, str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= _MAX_IDLE_PER_ORIGIN:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def _addresses(self, host: str, port: int) -> list[tuple[int, str]]:
        key = (host, port)
        cached = self._dns.get(key)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            found = await self._resolve(host, port)
        except OSError as exc:
            raise ConnectFailed(f"cannot resolve {host!r}: {exc.strerror or exc}") from None
        allowed = [(f, a) for f, a in found if address_allowed(a, self._allow_private)]
        if not allowed:
            shown = ", ".join(a for _, a in found)
            raise UrlRefused(f"{host} resolves to {shown}: private, loopback or reserved address")
        self._dns[key] = (now + _DNS_TTL_S, allowed)
        return allowed

    async def _connect(self, target: _Target) -> _Connection:
        loop = asyncio.get_running_loop()
        context: ssl.SSLContext | None = None
        if target.tls:
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        last: OSError | None = None
        for family, address in await self._addresses(target.host, target.port):
            try:
                _, conn = await loop.create_connection(
                    lambda: self._connection_class(self._max_body, self._quick_ack),
                    address,
                    target.port,
                    family=family,
                    ssl=context,
                    server_hostname=target.host if context is not None else None,
                )
            except OSError as exc:
                last = exc
                continue
            return conn
        detail = last.strerror if last is not None and last.strerror else str(last)
        raise ConnectFailed(f"cannot connect to {target.host}:{target.port}: {detail}")
