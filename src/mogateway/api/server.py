"""The HTTP server in front of the API: uvicorn with the httptools parser, plus what a public port needs.

What uvicorn 0.54 offers, and what it leaves open:

* ``timeout_keep_alive`` closes a connection that stays idle *after* a response. A connection that never
  sends a byte, or sends its head one byte at a time, is never closed.
* ``h11_max_incomplete_event_size`` bounds an unfinished request head — for the h11 parser only. With
  httptools (llhttp, in C: the cheaper parser per request, which this gateway keeps) nothing bounds it,
  and httptools accumulates an unfinished header value in Python bytes: twenty connections each sending
  an 8 MB head grew the gateway by some 170 MiB.
* ``limit_concurrency`` answers 503 above N connections or tasks, but still accepts every connection
  and counts idle ones: enough idle connections use up the open-files limit (accept fails) or make every
  request a 503, ``/healthz`` included.

:class:`GuardedHttpProtocol` (a subclass of uvicorn's httptools protocol) adds, per :class:`Limits`:

* **Head size.** A request head (request line and headers) larger than ``max_header_bytes`` is answered
  431 and the connection closed; the parser is never fed more than the head may still take, so an
  unfinished head holds at most that much (plus one read).
* **Head time.** A head must be complete ``header_timeout_s`` after its first byte (else 408, close).
* **Idle time.** A connection that sends nothing for ``idle_timeout_s`` while the server waits for it —
  before its first request, between requests, or in the middle of a head or a body — is closed (408 in
  the middle of a request). While the application works on a request, no timer runs.
* **Connection cap.** Above ``max_connections`` the connection that has been silent longest among those
  with no request in progress is closed to make room, so a flood of idle connections can never lock
  ``/healthz`` or the admin API out; a connection in the middle of a request is never closed for this.
  When every connection has a request in progress the newcomer gets 503.

The body is bounded elsewhere: uvicorn stops reading above 64 KiB not yet taken by the application, and
:mod:`mogateway.api.limits` refuses bodies over the configured size.

:func:`raise_open_files_limit` lifts the soft RLIMIT_NOFILE to the hard limit at start, and the cap is
kept to half of it, so callbacks, the journal and SMPP binds always have descriptors left.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import orjson
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mogateway.core.immutable import immutable

__all__ = ["GuardedHttpProtocol", "Limits", "raise_open_files_limit", "server_config"]

log = logging.getLogger("mogateway.http")

#: After a refusal, the rest of what the client is still sending is read and thrown away (up to this
#: much, for at most _LINGER_S), so that it reads the answer instead of a connection reset.
_LINGER_BYTES = 1024 * 1024
_LINGER_S = 2.0
#: At most one warning per this many seconds about closing idle connections at the cap.
_CAP_WARNING_EVERY_S = 60.0

_REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
_KINDS = {408: "request-timeout", 431: "header-too-large", 503: "too-many-connections"}


@immutable
class Limits:
    """What one connection may hold and for how long, and how many connections there may be."""

    max_connections: int = 1000
    max_header_bytes: int = 16 * 1024
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 15.0


def _answer(status: int, detail: str) -> bytes:
    body = orjson.dumps(
        {
            "type": f"urn:mogateway:problem:{_KINDS[status]}",
            "title": _REASONS[status].decode(),
            "status": status,
            "detail": detail,
        }
    )
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/problem+json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body)
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above. Subclass it with ``limits`` set (see
    :func:`server_config`); one instance per connection."""

    limits: ClassVar[Limits] = Limits()
    _last_cap_warning: ClassVar[float] = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_activity = 0.0  # loop time of the last byte received or the last answer completed
        self._head_open = True  # the next bytes belong to a request head
        self._head_room = self.limits.max_header_bytes
        self._head_started: float | None = None  # loop time of the head's first byte
        self._heads = 0  # request heads parsed on this connection
        self._discarding = False  # refused: the rest of the input is read and dropped
        self._discarded = 0
        self._watch: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._last_activity = self.loop.time()
        if len(self.connections) > self.limits.max_connections and not self._make_room():
            self._refuse(503, "too many connections with a request in progress; try again")
            return
        self._arm(min(self.limits.idle_timeout_s, self.limits.header_timeout_s))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._last_activity = now = self.loop.time()
        if self._discarding:
            self._discarded += len(data)
            if self._discarded > _LINGER_BYTES:
                self.transport.close()
            return
        if not self._head_open:
            super().data_received(data)
            return
        if self._head_started is None:
            self._head_started = now
        room = self._head_room
        if len(data) <= room:
            self._head_room = room - len(data)
            super().data_received(data)
            return
        # The head may end inside this chunk or not: the parser gets only what the head may still take.
        self._head_room = 0
        heads = self._heads
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self._heads == heads:  # that head is still not complete
            self._refuse(431, f"request head larger than {self.limits.max_header_bytes} bytes")
            return
        self.data_received(data[room:])

    # ------------------------------------------------------------------ parser callbacks

    def on_headers_complete(self) -> None:
        self._heads += 1
        self._head_open = False
        self._head_started = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_open = True
        self._head_room = self.limits.max_header_bytes

    def on_response_complete(self) -> None:
        # The idle clock of a kept-alive connection starts when the answer is out, not at the request's
        # last byte: a slow answer must not make the next request race a close.
        self._last_activity = self.loop.time()
        super().on_response_complete()

    # ------------------------------------------------------------------ limits

    def _idle(self) -> bool:
        """No request in progress: between requests, before the first, or in the middle of a head."""
        cycle = self.cycle
        return (cycle is None or cycle.response_complete) and not self.pipeline

    def _waiting_for_body(self) -> bool:
        cycle = self.cycle
        return (
            cycle is not None
            and not cycle.response_complete
            and cycle.more_body
            and not self.flow.read_paused  # paused: the application has not taken what came yet
        )

    def _make_room(self) -> bool:
        """Close the longest-silent idle connection; False when every other one has a request."""
        victim: GuardedHttpProtocol | None = None
        closing = 0
        for conn in self.connections:
            if conn is self or not isinstance(conn, GuardedHttpProtocol):
                continue
            if conn.transport.is_closing():
                closing += 1
            elif conn._discarding:  # already refused, only lingering: the first to go
                victim = conn
                break
            elif conn._idle() and (victim is None or conn._last_activity < victim._last_activity):
                victim = conn
        if len(self.connections) - closing <= self.limits.max_connections:
            return True  # connections already on their way out make the room
        if victim is None:
            return False
        victim.transport.close()
        now = time.monotonic()
        cls = type(self)
        if now - cls._last_cap_warning > _CAP_WARNING_EVERY_S:
            cls._last_cap_warning = now
            log.warning(
                "%d HTTP connections open (max_connections): closing the longest idle ones to make room",
                len(self.connections) - closing,
            )
        return True

    def _arm(self, delay: float) -> None:
        self._watch = self.loop.call_later(max(delay, 0.01), self._check_timers)

    def _check_timers(self) -> None:
        """One timer per connection, re-armed lazily: receiving a byte only stamps the time."""
        self._watch = None
        if self.transport.is_closing() or self._discarding:
            return
        limits = self.limits
        now = self.loop.time()
        idle = self._idle()
        head_started = self._head_started if idle else None  # a pipelined head waits: not timed
        in_request = head_started is not None or self._waiting_for_body()
        if head_started is not None and now - head_started >= limits.header_timeout_s:
            self._refuse(408, f"request head not complete within {limits.header_timeout_s:g} s")
            return
        if (idle or in_request) and now - self._last_activity >= limits.idle_timeout_s:
            if in_request:
                self._refuse(408, f"nothing received for {limits.idle_timeout_s:g} s")
            else:
                self.transport.close()
            return
        due = (self._last_activity if idle or in_request else now) + limits.idle_timeout_s
        if head_started is not None:
            due = min(due, head_started + limits.header_timeout_s)
        self._arm(due - now)

    def _refuse(self, status: int, detail: str) -> None:
        """Answer ``status`` (unless a response is under way), then read and drop what still comes in
        for a moment before closing, so the client sees the answer rather than a reset."""
        log.debug("HTTP %d to %s: %s", status, self.client, detail)
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started:
                self.transport.close()  # the answer is half written: only closing is left
                return
            cycle.disconnected = True  # the application's own answer must not follow this one
            cycle.message_event.set()
        self._discarding = True
        self.transport.write(_answer(status, detail))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER_S, self.transport.close)


def protocol_class(limits: Limits) -> type[GuardedHttpProtocol]:
    """A :class:`GuardedHttpProtocol` with these limits (uvicorn instantiates the class itself)."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"limits": limits})


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one. Returns (soft limit now, soft limit before)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, before


def connection_cap(wanted: int, open_files: int) -> int:
    """The connection cap that leaves half the descriptors for everything else."""
    return max(8, min(wanted, open_files // 2))


def server_config(
    app: Any,
    *,
    host: str,
    port: int,
    limits: Limits,
    trusted_proxies: Sequence[str] = (),
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's configuration for the gateway's API with the guarded httptools protocol.

    ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only from ``trusted_proxies`` (the
    setting): uvicorn's own default trusts them from 127.0.0.1 (or ``$FORWARDED_ALLOW_IPS``), which would
    let any local process, or a proxy passing the header through, choose the client address the
    console's sign-in throttle counts."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(limits),
        timeout_keep_alive=max(1, round(limits.idle_timeout_s)),
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies) or None,
        **options,
    )
