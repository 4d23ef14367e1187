"""One SMPP bind over asyncio: connect, bind, keep alive, reconnect; submit_sm within a window and a rate.

The protocol lives in :class:`~mogateway.smpp.session.Session`; this file only moves bytes and time
between it and a socket. Each :class:`EsmeBind` runs its own task: when its link fails it waits
(exponential backoff with jitter) and connects again, and nothing it does can stop another bind.

A deliver_sm is handed to the bind's ``on_deliver`` and answered with the status it gives, once it gives
it (the MO is stored by then). ``on_deliver`` is either a coroutine function, run in a task per
deliver_sm, or an object with ``begin(pdu, answer)`` (:class:`~mogateway.edges.smpp.inbound.InboundHandler`)
that calls ``answer(status)`` itself, which spares a task per message. Many deliver_sm may be in
progress at once, as many as the SMSC's own window sends.

Speed: every PDU written during one turn of the event loop goes out in one socket write (under load a
system call per small PDU was the largest single cost of a bind), and the submit rate (``throughput``)
spaces submit_sm exactly on average but only sleeps once the schedule is at least 1 ms ahead, so a fast
link is not held to one submit_sm per turn of the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from mogateway.config.smpp import BindConfig
from mogateway.service.throttle import Throttle
from mogateway.smpp.constants import Status
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import DeliverSm, Pdu, SubmitSm, encode
from mogateway.smpp.session import (
    BindRefused,
    Bound,
    Closed,
    Event,
    Ignored,
    RequestReceived,
    ResponseReceived,
    ResponseTimedOut,
    Send,
    Session,
    SessionState,
)

__all__ = ["BindUnavailable", "DeliverHandler", "EsmeBind", "ResponseLost"]

log = logging.getLogger("mogateway.smpp")

DeliverHandler = Callable[[DeliverSm], Awaitable[int]]
Answer = Callable[[int], None]
_READ_SIZE: Final = 65536
_CONNECT_TIMEOUT_S: Final = 10.0
_UNBIND_WAIT_S: Final = 5.0
#: The submit rate sleeps only when the next submit_sm is due at least this far ahead; smaller gaps are
#: carried forward in the schedule, so the average rate stays exact and the burst stays under 1 ms.
_RATE_GRANULARITY_S: Final = 0.001


class BindUnavailable(Exception):
    """The bind is not bound (or cannot transmit, or its window stayed full): nothing was sent."""


class ResponseLost(Exception):
    """The submit_sm was written but no response came (the session closed, or the response timed out):
    the SMSC may have taken it."""


@dataclass(slots=True)
class BindCounters:
    """What a bind has done since the process started (exported to /metrics)."""

    deliver_sm: int = 0
    deliver_sm_errors: int = 0
    submit_sm: int = 0
    submit_sm_errors: int = 0
    submit_sm_timeouts: int = 0
    connects: int = 0
    bind_failures: int = 0
    ignored: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class _Link:
    """One TCP connection and the session on it (lives until the connection closes)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Session) -> None:
        self.reader = reader
        self.writer = writer
        self.session = session
        self.framer = Framer()
        self.waiters: dict[int, asyncio.Future[Pdu]] = {}
        self.loop = self._loop = asyncio.get_running_loop()
        self.bound = self._loop.create_future()  # type: asyncio.Future[None]
        self.closed = asyncio.Event()
        self.window_changed = asyncio.Event()
        self._out: list[bytes] = []

    def write(self, pdu: Pdu) -> None:
        """Queue ``pdu``; what is queued in one turn of the event loop leaves in one socket write."""
        if not self._out:
            self._loop.call_soon(self.flush)
        self._out.append(encode(pdu))

    def flush(self) -> None:
        """Write what is queued now (before closing, so an unbind_resp is not lost)."""
        out, self._out = self._out, []
        if out and not self.writer.is_closing():
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))


class EsmeBind:
    """A bind to one SMSC, kept up until :meth:`stop`."""

    def __init__(
        self,
        config: BindConfig,
        on_deliver: DeliverHandler,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
    ) -> None:
        self.config = config
        self.name = config.name
        self._on_deliver = on_deliver
        begin: Callable[[DeliverSm, Answer], None] | None = getattr(on_deliver, "begin", None)
        self._begin = begin if begin is not None else self._begin_in_task
        self._clock = clock
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self.counters = BindCounters()
        self._state = "idle"
        self.state_since = time.time()  # wall clock, for display (the console shows reconnects live)
        self.connected_since: float | None = None  # wall clock, for display
        self._last_error = ""  # cleared when bound again
        self.last_failure = ""  # the same, kept after the bind recovers, with its time
        self.last_error_at: float | None = None
        self._down_since: float | None = None  # monotonic, from the first failure after being bound
        self._failed_attempts = 0
        self._down_log = Throttle(60.0)  # "bind X down": at once, then once a minute while it stays down
        self._link: _Link | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._bound_event = asyncio.Event()
        self._next_submit_at = 0.0
        self._rate_lock = asyncio.Lock()

    @property
    def state(self) -> str:
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        if value != self._state:
            self._state = value
            self.state_since = time.time()

    @property
    def last_error(self) -> str:
        return self._last_error

    @last_error.setter
    def last_error(self, value: str) -> None:
        self._last_error = value
        if value:
            self.last_failure = value
            self.last_error_at = time.time()

    # ---------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start keeping the bind up (returns at once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run_forever(), name=f"smpp-bind-{self.name}")

    async def stop(self) -> None:
        """Unbind cleanly (waiting a few seconds for unbind_resp), then close."""
        self._stopping = True
        link = self._link
        if link is not None and link.session.is_bound:
            with contextlib.suppress(Exception):
                unbind = link.session.unbind(now=self._clock())
                if unbind is not None:
                    link.write(unbind)
                    await asyncio.wait_for(link.closed.wait(), _UNBIND_WAIT_S)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.state = "stopped"

    @property
    def is_bound(self) -> bool:
        return self._link is not None and self._link.session.is_bound

    @property
    def can_transmit(self) -> bool:
        return self.config.mode.can_transmit and self.is_bound

    async def wait_bound(self, timeout: float) -> bool:
        """Wait until bound (True) or ``timeout`` seconds pass (False)."""
        try:
            await asyncio.wait_for(self._bound_event.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def _run_forever(self) -> None:
        attempt = 0
        while not self._stopping:
            self.state = "connecting"
            try:
                bound = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure of one link ends in a reconnect, never a crash
                self.last_error = f"{type(exc).__name__}: {exc}"
                lost = self.connected_since is not None  # it was bound: a session went away (e.g. reset)
                bound = False
                self._log_down(lost=lost)
            else:
                if bound and not self._stopping:  # a session that was up went away
                    self._log_down(lost=True)
            self._bound_event.clear()
            self.connected_since = None
            if self._stopping:
                break
            attempt = 0 if bound else attempt + 1
            delay = min(self._backoff_max, self._backoff_initial * 2 ** min(attempt, 16))
            delay *= random.uniform(0.5, 1.0)  # jitter: binds that failed together retry apart
            self.state = "backoff"
            await asyncio.sleep(delay)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        context: ssl.SSLContext | None = None
        if self.config.tls:
            context = ssl.create_default_context()
            if not self.config.tls_verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        return await asyncio.wait_for(
            asyncio.open_connection(self.config.host, self.config.port, ssl=context), _CONNECT_TIMEOUT_S
        )

    def _log_down(self, *, lost: bool = False) -> None:
        """Log a lost session or a failed connect or bind: the first at once, then one line a minute
        while the bind stays down (and one when it is back: see the Bound event)."""
        if lost:
            self._down_since, self._failed_attempts = time.monotonic(), 0
            self._down_log.forget(self.name)
            self._down_log.ready(self.name)
            log.warning("bind %s: lost: %s", self.name, self.last_error or "the connection closed")
            return
        self._failed_attempts += 1
        if self._down_since is None:
            self._down_since = time.monotonic()
        if self._down_log.ready(self.name) is not None:
            down_s = time.monotonic() - self._down_since
            if self._failed_attempts == 1 and down_s < 1:
                log.warning("bind %s: down: %s", self.name, self.last_error)
            else:
                log.warning(
                    "bind %s: still down after %.0f s (%d failed attempts), the last: %s",
                    self.name,
                    down_s,
                    self._failed_attempts,
                    self.last_error,
                )

    async def _run_once(self) -> bool:
        """One connection from connect to close. True when it got bound."""
        reader, writer = await self._connect()
        self.counters.connects += 1
        cfg = self.config
        session = Session(
            window=cfg.window, response_timeout_s=cfg.response_timeout_s, enquire_link_s=cfg.enquire_link_s
        )
        link = _Link(reader, writer, session)
        self._link = link
        self.state = "binding"
        timer = asyncio.create_task(self._timer(link), name=f"smpp-timer-{self.name}")
        got_bound = False
        try:
            link.write(
                session.bind(
                    cfg.mode,
                    cfg.system_id,
                    cfg.password.get_secret_value(),
                    system_type=cfg.system_type,
                    now=self._clock(),
                )
            )
            while not link.closed.is_set():
                data = await reader.read(_READ_SIZE)
                if not data:
                    self._handle(link, session.connection_lost())
                    break
                now = self._clock()
                for item in link.framer.feed(data):
                    self._handle(link, session.receive(item, now=now))
                    if session.is_bound:
                        got_bound = True
                if link.closed.is_set():
                    break
                await writer.drain()
        finally:
            got_bound = got_bound or (link.bound.done() and not link.bound.cancelled())
            if session.state is not SessionState.CLOSED:
                self._handle(link, session.connection_lost())
            link.closed.set()
            timer.cancel()
            self._link = None
            link.flush()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            for fut in link.waiters.values():
                if not fut.done():
                    fut.set_exception(ResponseLost("the session closed before the response"))
            link.window_changed.set()
        return got_bound

    async def _timer(self, link: _Link) -> None:
        while not link.closed.is_set():
            deadline = link.session.next_deadline()
            now = self._clock()
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - now))
            await asyncio.sleep(wait)
            self._handle(link, link.session.poll(now=self._clock()))
            with contextlib.suppress(Exception):
                await link.writer.drain()

    # ------------------------------------------------------------------------------------ events

    def _handle(self, link: _Link, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, Send):
                link.write(event.pdu)
            elif isinstance(event, RequestReceived):
                self.counters.deliver_sm += 1
                self._begin(event.pdu, functools.partial(self._answer, link, event.pdu))
            elif isinstance(event, ResponseReceived):
                waiter = link.waiters.pop(event.response.sequence, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(event.response)
                link.window_changed.set()
            elif isinstance(event, ResponseTimedOut):
                waiter = link.waiters.pop(event.request.sequence, None)
                if waiter is not None and not waiter.done():
                    waiter.set_exception(ResponseLost("no response in time"))
                link.window_changed.set()
            elif isinstance(event, Bound):
                self.state = "bound"
                self.connected_since = time.time()
                self.last_error = ""
                if not link.bound.done():
                    link.bound.set_result(None)
                self._bound_event.set()
                log.info(
                    "bind %s: bound as %s to %s:%d", self.name, event.mode, self.config.host, self.config.port
                )
                if self._down_since is not None:
                    attempts = self._failed_attempts
                    log.warning(
                        "bind %s: back after %.0f s down (%d failed attempts)",
                        self.name,
                        time.monotonic() - self._down_since,
                        attempts,
                    )
                    self._down_since, self._failed_attempts = None, 0
                    self._down_log.forget(self.name)
            elif isinstance(event, BindRefused):
                self.counters.bind_failures += 1
                self.last_error = f"bind refused: {Status.describe(event.status)}"
                self._log_down()
            elif isinstance(event, Closed):
                self.state = "closed"
                if event.reason != "unbound" and not self._stopping and not self.last_error:
                    self.last_error = event.reason
                link.closed.set()
                if not link.writer.is_closing():
                    link.flush()
                    link.writer.close()
            elif isinstance(event, Ignored):
                self.counters.ignored += 1
                log.debug("bind %s: %s", self.name, event.reason)

    def _begin_in_task(self, pdu: DeliverSm, answer: Answer) -> None:
        task = asyncio.create_task(self._call_handler(pdu, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call_handler(self, pdu: DeliverSm, answer: Answer) -> None:
        try:
            status = await self._on_deliver(pdu)
        except Exception:  # a handler bug must not lose the MO: ask the SMSC to deliver it again
            log.exception("bind %s: deliver_sm handler failed", self.name)
            status = Status.ESME_RX_T_APPN
        answer(status)

    def _answer(self, link: _Link, pdu: DeliverSm, status: int) -> None:
        """Send the deliver_sm_resp (written with the rest of this turn's PDUs; the read loop's drain
        holds further reading while the SMSC does not take our writes)."""
        if status:
            self.counters.deliver_sm_errors += 1
        if link.closed.is_set():
            return  # the SMSC redelivers what was not answered; the journal deduplicates it
        link.write(link.session.respond(pdu, status))

    # ------------------------------------------------------------------------------------ submit

    async def _keep_rate(self) -> None:
        """Wait until this bind may send its next submit_sm (``throughput`` per second)."""
        if not self._rate_lock.locked():  # nobody waiting for the rate: maybe no wait at all
            now = self._clock()
            if self._next_submit_at - now < _RATE_GRANULARITY_S:
                self._next_submit_at = max(now, self._next_submit_at) + 1.0 / self.config.throughput
                return
        async with self._rate_lock:
            now = self._clock()
            wait = self._next_submit_at - now
            if wait >= _RATE_GRANULARITY_S:
                await asyncio.sleep(wait)
                now = self._clock()
            self._next_submit_at = max(now, self._next_submit_at) + 1.0 / self.config.throughput

    async def submit(self, pdu: SubmitSm, *, timeout: float = 30.0) -> Pdu:
        """Send one submit_sm and return its response (submit_sm_resp or generic_nack).

        Waits for the submit rate and for room in the window. Raises :class:`BindUnavailable` when nothing
        was sent (not bound as a transmitter, or the window stayed full for ``timeout``), and
        :class:`ResponseLost` when the submit_sm was written but no response came.
        """
        if not self.config.mode.can_transmit:
            raise BindUnavailable(f"bind {self.name} is a receiver")
        await self._keep_rate()
        deadline = self._clock() + timeout
        while True:
            link = self._link
            if link is None or not link.session.is_bound:
                raise BindUnavailable(f"bind {self.name} is not bound ({self.state})")
            if link.session.window_open:
                break
            link.window_changed.clear()
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise BindUnavailable(f"bind {self.name}: the window stayed full")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(link.window_changed.wait(), remaining)
        sent = link.session.send(pdu, now=self._clock())
        waiter: asyncio.Future[Pdu] = link.loop.create_future()
        link.waiters[sent.sequence] = waiter
        link.write(sent)
        self.counters.submit_sm += 1
        try:
            await link.writer.drain()
            response = await waiter
        except ResponseLost:
            self.counters.submit_sm_timeouts += 1
            raise
        except (ConnectionError, OSError) as exc:  # drain on a dying socket: the bytes may have left
            self.counters.submit_sm_timeouts += 1
            raise ResponseLost(f"the connection failed after the submit_sm was written: {exc}") from None
        if response.status:
            self.counters.submit_sm_errors += 1
        return response

    def status(self) -> dict[str, object]:
        """What ``GET /v1/binds`` shows for this bind (no secrets)."""
        link = self._link
        c = self.counters
        return {
            "name": self.name,
            "state": self.state,
            "session": link.session.state.value if link is not None else "closed",
            "host": self.config.host,
            "port": self.config.port,
            "mode": self.config.mode.value,
            "operator": self.config.operator,
            "circle": self.config.circle,
            "state_since": self.state_since,
            "connected_since": self.connected_since,
            "in_flight": link.session.in_flight if link is not None else 0,
            "window": self.config.window,
            "throughput": self.config.throughput,
            "last_error": self.last_error,
            "last_failure": self.last_failure,
            "last_error_at": self.last_error_at,
            "counters": {
                "deliver_sm": c.deliver_sm,
                "deliver_sm_errors": c.deliver_sm_errors,
                "submit_sm": c.submit_sm,
                "submit_sm_errors": c.submit_sm_errors,
                "submit_sm_timeouts": c.submit_sm_timeouts,
                "connects": c.connects,
                "bind_failures": c.bind_failures,
                "ignored": c.ignored,
                **c.extra,
            },
        }
