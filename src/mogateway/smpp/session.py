"""The ESME side of one SMPP 3.4 session as a state machine (sans-IO: PDUs in, PDUs and events out).

Rules stated before the code:

* States: ``open`` (connected, not bound) → ``binding`` → ``bound_tx`` / ``bound_rx`` / ``bound_trx``
  → ``unbinding`` → ``closed``. Every change of state is one row of :data:`TRANSITIONS`; nothing
  else moves the state.
* Requests we send get a sequence number from 1 to 0x7FFFFFFF, wrapping to 1 and skipping numbers
  still outstanding. At most ``window`` application requests (submit_sm...) wait for a response; the
  keepalive and unbind are control traffic and do not count against the window.
* Time is a number the caller passes in (seconds, any monotonic origin). :meth:`Session.poll` reports
  requests whose response is overdue and asks for an enquire_link when the link has been quiet for
  ``enquire_link_s``; an unanswered enquire_link, bind or unbind closes the session.
* The session answers what it can by itself (enquire_link, unbind, PDUs it cannot accept) with
  :class:`Send` events; a deliver_sm comes out as :class:`RequestReceived` and is answered by the
  caller with :meth:`Session.respond`, once the message is durably stored.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeAlias

from mogateway.core.immutable import immutable
from mogateway.smpp.constants import Status
from mogateway.smpp.pdu import (
    Bind,
    BindMode,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    EnquireLinkResp,
    GenericNack,
    Pdu,
    PduError,
    SubmitSm,
    SubmitSmResp,
    Unbind,
    UnbindResp,
    response_class,
    with_sequence,
)

__all__ = [
    "MAX_SEQUENCE",
    "TRANSITIONS",
    "BindRefused",
    "Bound",
    "Closed",
    "Event",
    "Ignored",
    "RequestReceived",
    "ResponseReceived",
    "ResponseTimedOut",
    "Send",
    "Session",
    "SessionError",
    "SessionState",
    "Trigger",
    "WindowFull",
]

MAX_SEQUENCE: Final = 0x7FFFFFFF


class SessionState(enum.StrEnum):
    OPEN = "open"
    BINDING = "binding"
    BOUND_TX = "bound_tx"
    BOUND_RX = "bound_rx"
    BOUND_TRX = "bound_trx"
    UNBINDING = "unbinding"
    CLOSED = "closed"


class Trigger(enum.StrEnum):
    """What can move a session: something sent, received, or a deadline passed."""

    SEND_BIND = "send_bind"
    BOUND_AS_TX = "bound_as_tx"
    BOUND_AS_RX = "bound_as_rx"
    BOUND_AS_TRX = "bound_as_trx"
    BIND_REFUSED = "bind_refused"
    SEND_UNBIND = "send_unbind"
    PEER_UNBIND = "peer_unbind"  # we answer unbind_resp at once, so this ends the session
    UNBIND_DONE = "unbind_done"
    LINK_DEAD = "link_dead"  # bind, unbind or enquire_link unanswered in time
    CONNECTION_LOST = "connection_lost"


_BOUND: Final = (SessionState.BOUND_TX, SessionState.BOUND_RX, SessionState.BOUND_TRX)
_LIVE: Final = (SessionState.OPEN, SessionState.BINDING, *_BOUND, SessionState.UNBINDING)

#: (state, trigger) -> next state. A pair not in the table is a programming or protocol error.
TRANSITIONS: Final[dict[tuple[SessionState, Trigger], SessionState]] = {
    (SessionState.OPEN, Trigger.SEND_BIND): SessionState.BINDING,
    (SessionState.BINDING, Trigger.BOUND_AS_TX): SessionState.BOUND_TX,
    (SessionState.BINDING, Trigger.BOUND_AS_RX): SessionState.BOUND_RX,
    (SessionState.BINDING, Trigger.BOUND_AS_TRX): SessionState.BOUND_TRX,
    (SessionState.BINDING, Trigger.BIND_REFUSED): SessionState.CLOSED,
    **{(s, Trigger.SEND_UNBIND): SessionState.UNBINDING for s in _BOUND},
    **{(s, Trigger.PEER_UNBIND): SessionState.CLOSED for s in (*_BOUND, SessionState.UNBINDING)},
    (SessionState.UNBINDING, Trigger.UNBIND_DONE): SessionState.CLOSED,
    **{(s, Trigger.LINK_DEAD): SessionState.CLOSED for s in _LIVE},
    **{(s, Trigger.CONNECTION_LOST): SessionState.CLOSED for s in (*_LIVE, SessionState.CLOSED)},
}

_BOUND_TRIGGER: Final = {
    BindMode.TRANSMITTER: Trigger.BOUND_AS_TX,
    BindMode.RECEIVER: Trigger.BOUND_AS_RX,
    BindMode.TRANSCEIVER: Trigger.BOUND_AS_TRX,
}

# Which requests each state lets us send, and which it lets the peer send us.
_MAY_SEND: Final[dict[SessionState, frozenset[type[Pdu]]]] = {
    SessionState.OPEN: frozenset({Bind}),
    SessionState.BOUND_TX: frozenset({SubmitSm, EnquireLink, Unbind}),
    SessionState.BOUND_RX: frozenset({EnquireLink, Unbind}),
    SessionState.BOUND_TRX: frozenset({SubmitSm, EnquireLink, Unbind}),
}
_MAY_RECEIVE: Final[dict[SessionState, frozenset[type[Pdu]]]] = {
    SessionState.BOUND_TX: frozenset({EnquireLink, Unbind}),
    SessionState.BOUND_RX: frozenset({DeliverSm, EnquireLink, Unbind}),
    SessionState.BOUND_TRX: frozenset({DeliverSm, EnquireLink, Unbind}),
    SessionState.UNBINDING: frozenset({DeliverSm, EnquireLink, Unbind}),
    SessionState.BINDING: frozenset({EnquireLink}),
}
_CONTROL: Final = (Bind, Unbind, EnquireLink)


class SessionError(RuntimeError):
    """A call that the session's state does not allow (a bug in the caller, not in the peer)."""


class WindowFull(SessionError):
    """``window`` requests already wait for a response; wait for one before sending more."""


# ----------------------------------------------------------------------------------------- events


@immutable
class Send:
    """Write this PDU to the peer."""

    pdu: Pdu


@immutable
class Bound:
    """The bind succeeded."""

    mode: BindMode
    system_id: str


@immutable
class BindRefused:
    """The SMSC refused the bind with ``status`` (the session is closed)."""

    status: int


@immutable
class RequestReceived:
    """The peer sent a request the caller must answer with :meth:`Session.respond`."""

    pdu: DeliverSm


@immutable
class ResponseReceived:
    """The answer to a request we sent (a generic_nack when the peer could not read it)."""

    request: Pdu
    response: Pdu

    @property
    def status(self) -> int:
        return self.response.status


@immutable
class ResponseTimedOut:
    """No answer to ``request`` within the response timeout (it left the window)."""

    request: Pdu


@immutable
class Ignored:
    """Something received that had no effect (late response, garbled PDU we answered)."""

    reason: str


@immutable
class Closed:
    """The session is over; close the connection."""

    reason: str


Event: TypeAlias = (
    Send | Bound | BindRefused | RequestReceived | ResponseReceived | ResponseTimedOut | Ignored | Closed
)


@dataclass(slots=True)
class _Pending:
    request: Pdu
    deadline: float


@dataclass(slots=True)
class _Counters:
    sent: int = 0
    received: int = 0
    timeouts: int = 0
    nacks_sent: int = 0


# ---------------------------------------------------------------------------------------- session


class Session:
    """One ESME session. Feed it received PDUs and the time; write out what it returns."""

    def __init__(
        self,
        *,
        window: int = 10,
        response_timeout_s: float = 10.0,
        enquire_link_s: float = 30.0,
        first_sequence: int = 1,
    ) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        if not 1 <= first_sequence <= MAX_SEQUENCE:
            raise ValueError("first_sequence must be in 1..0x7FFFFFFF")
        self.window = window
        self.response_timeout_s = response_timeout_s
        self.enquire_link_s = enquire_link_s
        self.state = SessionState.OPEN
        self.mode: BindMode | None = None
        self.closed_reason = ""
        self.counters = _Counters()
        self._next_sequence = first_sequence
        self._pending: dict[int, _Pending] = {}
        self._app_pending = 0  # how many of _pending are application requests (kept, not counted)
        self._last_heard = 0.0

    # ------------------------------------------------------------------------------ state and time

    def _move(self, trigger: Trigger) -> None:
        try:
            self.state = TRANSITIONS[(self.state, trigger)]
        except KeyError:
            raise SessionError(f"{trigger} is not allowed in state {self.state}") from None

    @property
    def is_bound(self) -> bool:
        return self.state in _BOUND

    @property
    def in_flight(self) -> int:
        """Application requests waiting for a response (what the window limits)."""
        return self._app_pending

    @property
    def window_open(self) -> bool:
        """True when one more application request may be sent now."""
        return self.in_flight < self.window

    def can_send(self, kind: type[Pdu]) -> bool:
        """Whether the state allows sending a request of ``kind`` (ignoring the window)."""
        return kind in _MAY_SEND.get(self.state, frozenset())

    def next_deadline(self) -> float | None:
        """The earliest time :meth:`poll` has something to do (None: nothing scheduled)."""
        times = [p.deadline for p in self._pending.values()]
        if self.is_bound and self.enquire_link_s > 0:
            times.append(self._last_heard + self.enquire_link_s)
        return min(times, default=None)

    def _allocate_sequence(self) -> int:
        for _ in range(MAX_SEQUENCE):
            seq = self._next_sequence
            self._next_sequence = 1 if seq >= MAX_SEQUENCE else seq + 1
            if seq not in self._pending:
                return seq
        raise SessionError("no free sequence number")  # pragma: no cover - needs 2**31 outstanding

    # -------------------------------------------------------------------------------- we send

    def bind(
        self, mode: BindMode, system_id: str, password: str, *, system_type: str = "", now: float
    ) -> Bind:
        """The bind PDU to send first."""
        request = Bind(mode=mode, system_id=system_id, password=password, system_type=system_type)
        pdu = self.send(request, now=now)
        assert isinstance(pdu, Bind)
        return pdu

    def send(self, request: Pdu, *, now: float) -> Pdu:
        """Register a request (sequence number assigned here) and return the PDU to write.

        Raises :class:`WindowFull` when the window is full, :class:`SessionError` when the state does
        not allow this request.
        """
        kind = type(request)
        if not self.can_send(kind):
            raise SessionError(f"cannot send {kind.__name__} in state {self.state}")
        if not isinstance(request, _CONTROL) and not self.window_open:
            raise WindowFull(f"{self.in_flight} requests outstanding (window {self.window})")
        if isinstance(request, Bind):
            self._move(Trigger.SEND_BIND)
            self.mode = request.mode
            self._last_heard = now
        elif isinstance(request, Unbind):
            self._move(Trigger.SEND_UNBIND)
        pdu = with_sequence(request, self._allocate_sequence())
        self._pending[pdu.sequence] = _Pending(pdu, now + self.response_timeout_s)
        if not isinstance(pdu, _CONTROL):
            self._app_pending += 1
        self.counters.sent += 1
        return pdu

    def unbind(self, *, now: float) -> Unbind | None:
        """The unbind to send for a clean shutdown, or None when not bound (just close)."""
        if not self.is_bound:
            return None
        pdu = self.send(Unbind(), now=now)
        assert isinstance(pdu, Unbind)
        return pdu

    def respond(self, request: DeliverSm, status: int = 0) -> DeliverSmResp:
        """The deliver_sm_resp answering ``request``."""
        return DeliverSmResp(status=status, sequence=request.sequence)

    def connection_lost(self) -> list[Event]:
        """The transport closed. Outstanding requests are reported as timed out."""
        if self.state is SessionState.CLOSED:
            return []
        self._move(Trigger.CONNECTION_LOST)
        self.closed_reason = self.closed_reason or "connection lost"
        events: list[Event] = [ResponseTimedOut(p.request) for p in self._drain()]
        events.append(Closed(self.closed_reason))
        return events

    def _drain(self) -> list[_Pending]:
        pending = [p for p in self._pending.values() if not isinstance(p.request, _CONTROL)]
        self._pending.clear()
        self._app_pending = 0
        return pending

    def _forget(self, sequence: int) -> _Pending | None:
        """Take the request with ``sequence`` off the outstanding list (None: not outstanding)."""
        pending = self._pending.pop(sequence, None)
        if pending is not None and not isinstance(pending.request, _CONTROL):
            self._app_pending -= 1
        return pending

    def _close(self, trigger: Trigger, reason: str) -> list[Event]:
        self._move(trigger)
        self.closed_reason = reason
        events: list[Event] = [ResponseTimedOut(p.request) for p in self._drain()]
        events.append(Closed(reason))
        return events

    # ---------------------------------------------------------------------------------- time

    def poll(self, *, now: float) -> list[Event]:
        """Report overdue responses and ask for a keepalive when due."""
        if self.state is SessionState.CLOSED:
            return []
        events: list[Event] = []
        for seq, pending in list(self._pending.items()):
            if pending.deadline > now:
                continue
            if isinstance(pending.request, _CONTROL):
                name = type(pending.request).__name__
                return events + self._close(Trigger.LINK_DEAD, f"no answer to {name} in time")
            self._forget(seq)
            self.counters.timeouts += 1
            events.append(ResponseTimedOut(pending.request))
        keepalive_due = self.enquire_link_s > 0 and now - self._last_heard >= self.enquire_link_s
        waiting = any(isinstance(p.request, EnquireLink) for p in self._pending.values())
        if self.is_bound and keepalive_due and not waiting:
            events.append(Send(self.send(EnquireLink(), now=now)))
        return events

    # ------------------------------------------------------------------------------ we receive

    def receive(self, item: Pdu | PduError, *, now: float) -> list[Event]:
        """Take one item from the framer; return what follows from it."""
        if self.state is SessionState.CLOSED:
            return [Ignored("session is closed")]
        self._last_heard = now
        self.counters.received += 1
        if isinstance(item, PduError):
            return self._on_error(item)
        if response_class(item) is None:  # a response (or generic_nack)
            return self._on_response(item)
        return self._on_request(item)

    def _on_error(self, error: PduError) -> list[Event]:
        self.counters.nacks_sent += 1
        command_id = error.command_id
        if command_id is not None and command_id & 0x80000000:
            # Never answer a response; a garbled answer to our request counts as that request failing.
            pending = self._forget(error.sequence)
            if pending is not None:
                nack = GenericNack(status=error.status, sequence=error.sequence)
                return [ResponseReceived(pending.request, nack), Ignored(str(error))]
            events: list[Event] = [Ignored(str(error))]
        else:
            events = [Send(GenericNack(status=error.status, sequence=error.sequence)), Ignored(str(error))]
        if error.fatal:
            events += self._close(Trigger.LINK_DEAD, f"stream framing lost: {error.detail}")
        return events

    def _on_response(self, response: Pdu) -> list[Event]:
        pending = self._forget(response.sequence)
        if pending is None:
            return [Ignored(f"response with unknown sequence {response.sequence} (late or unsolicited)")]
        request = pending.request
        if isinstance(request, Bind):
            if isinstance(response, BindResp) and response.status == 0:
                self._move(_BOUND_TRIGGER[request.mode])
                return [Bound(request.mode, response.system_id)]
            return [BindRefused(response.status), *self._close(Trigger.BIND_REFUSED, "bind refused")]
        if isinstance(request, Unbind):
            return self._close(Trigger.UNBIND_DONE, "unbound")
        if isinstance(request, EnquireLink):
            return []
        return [ResponseReceived(request, response)]

    def _on_request(self, request: Pdu) -> list[Event]:
        if type(request) not in _MAY_RECEIVE.get(self.state, frozenset()):
            return [Send(_refusal(request)), Ignored(f"{type(request).__name__} not allowed in {self.state}")]
        if isinstance(request, EnquireLink):
            return [Send(EnquireLinkResp(sequence=request.sequence))]
        if isinstance(request, Unbind):
            events: list[Event] = [Send(UnbindResp(sequence=request.sequence))]
            return events + self._close(Trigger.PEER_UNBIND, "unbound by the SMSC")
        assert isinstance(request, DeliverSm)
        return [RequestReceived(request)]


def _refusal(request: Pdu) -> Pdu:
    """The answer to a request the state does not allow (§2.3: ESME_RINVBNDSTS)."""
    if isinstance(request, DeliverSm):
        return DeliverSmResp(status=Status.ESME_RINVBNDSTS, sequence=request.sequence)
    if isinstance(request, SubmitSm):
        return SubmitSmResp(status=Status.ESME_RINVBNDSTS, sequence=request.sequence)
    if isinstance(request, Bind):
        return BindResp(mode=request.mode, status=Status.ESME_RALYBND, sequence=request.sequence)
    return GenericNack(status=Status.ESME_RINVBNDSTS, sequence=request.sequence)
