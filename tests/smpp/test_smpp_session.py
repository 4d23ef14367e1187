"""The sans-IO session: the transition table, sequence numbers, window, timeouts and keepalive."""

from __future__ import annotations

import pytest

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
    PduError,
    SubmitSm,
    SubmitSmResp,
    Unbind,
    UnbindResp,
)
from mogateway.smpp.session import (
    MAX_SEQUENCE,
    TRANSITIONS,
    BindRefused,
    Bound,
    Closed,
    RequestReceived,
    ResponseReceived,
    ResponseTimedOut,
    Send,
    Session,
    SessionError,
    SessionState,
    Trigger,
    WindowFull,
)


def bound(mode: BindMode = BindMode.TRANSCEIVER, **kwargs: float) -> Session:
    session = Session(**kwargs)  # type: ignore[arg-type]
    bind = session.bind(mode, "gw", "pw", now=0.0)
    events = session.receive(BindResp(mode=mode, system_id="smsc", sequence=bind.sequence), now=0.0)
    assert events == [Bound(mode, "smsc")]
    return session


def test_every_state_change_is_in_the_table() -> None:
    assert TRANSITIONS[(SessionState.OPEN, Trigger.SEND_BIND)] is SessionState.BINDING
    assert TRANSITIONS[(SessionState.BOUND_RX, Trigger.SEND_UNBIND)] is SessionState.UNBINDING
    assert (SessionState.CLOSED, Trigger.SEND_BIND) not in TRANSITIONS


@pytest.mark.parametrize(
    ("mode", "state"),
    [
        (BindMode.TRANSMITTER, SessionState.BOUND_TX),
        (BindMode.RECEIVER, SessionState.BOUND_RX),
        (BindMode.TRANSCEIVER, SessionState.BOUND_TRX),
    ],
)
def test_bind_modes(mode: BindMode, state: SessionState) -> None:
    assert bound(mode).state is state


def test_bind_refused_closes() -> None:
    session = Session()
    bind = session.bind(BindMode.RECEIVER, "gw", "bad", now=0.0)
    events = session.receive(
        BindResp(mode=BindMode.RECEIVER, status=Status.ESME_RINVPASWD, sequence=bind.sequence), now=1.0
    )
    assert events[0] == BindRefused(Status.ESME_RINVPASWD)
    assert isinstance(events[-1], Closed)
    assert session.state is SessionState.CLOSED


def test_bind_timeout_closes() -> None:
    session = Session(response_timeout_s=5)
    session.bind(BindMode.RECEIVER, "gw", "pw", now=0.0)
    assert session.poll(now=4.9) == []
    events = session.poll(now=5.0)
    assert isinstance(events[-1], Closed) and "Bind" in events[-1].reason


def test_cannot_submit_before_bind_or_on_receiver() -> None:
    with pytest.raises(SessionError):
        Session().send(SubmitSm(), now=0)
    with pytest.raises(SessionError):
        bound(BindMode.RECEIVER).send(SubmitSm(), now=0)


def test_sequence_numbers_wrap_and_skip_outstanding() -> None:
    session = Session(first_sequence=MAX_SEQUENCE - 1, window=5)
    bind = session.bind(BindMode.TRANSMITTER, "gw", "pw", now=0)
    assert bind.sequence == MAX_SEQUENCE - 1
    session.receive(BindResp(mode=BindMode.TRANSMITTER, sequence=bind.sequence), now=0)
    a = session.send(SubmitSm(), now=0)
    b = session.send(SubmitSm(), now=0)
    assert (a.sequence, b.sequence) == (MAX_SEQUENCE, 1)
    session2 = Session(first_sequence=1, window=5)
    bind2 = session2.bind(BindMode.TRANSMITTER, "gw", "pw", now=0)  # seq 1 stays outstanding
    session2._next_sequence = 1  # force a collision with the outstanding bind
    session2.receive(BindResp(mode=BindMode.TRANSMITTER, sequence=bind2.sequence), now=0)
    session2._next_sequence = MAX_SEQUENCE
    first = session2.send(SubmitSm(), now=0)
    second = session2.send(SubmitSm(), now=0)
    assert (first.sequence, second.sequence) == (MAX_SEQUENCE, 1)


def test_window_limits_outstanding_requests() -> None:
    session = bound(window=2)
    a = session.send(SubmitSm(destination_addr="1"), now=0)
    session.send(SubmitSm(destination_addr="2"), now=0)
    assert not session.window_open
    with pytest.raises(WindowFull):
        session.send(SubmitSm(destination_addr="3"), now=0)
    # Control traffic is not held back by the window.
    session.send(EnquireLink(), now=0)
    events = session.receive(SubmitSmResp(message_id="m1", sequence=a.sequence), now=1)
    assert events == [ResponseReceived(a, SubmitSmResp(message_id="m1", sequence=a.sequence))]
    assert session.window_open


def test_response_timeout_frees_the_window() -> None:
    session = bound(window=1, response_timeout_s=10, enquire_link_s=0)
    a = session.send(SubmitSm(), now=100)
    assert session.next_deadline() == 110
    assert session.poll(now=109) == []
    assert session.poll(now=110) == [ResponseTimedOut(a)]
    assert session.window_open
    # A late answer is ignored, not matched to anything.
    late = session.receive(SubmitSmResp(message_id="x", sequence=a.sequence), now=111)
    assert not any(isinstance(e, ResponseReceived) for e in late)


def test_generic_nack_answers_the_request() -> None:
    session = bound()
    a = session.send(SubmitSm(), now=0)
    nack = GenericNack(status=Status.ESME_RTHROTTLED, sequence=a.sequence)
    (event,) = session.receive(nack, now=0)
    assert isinstance(event, ResponseReceived) and event.status == Status.ESME_RTHROTTLED


def test_enquire_link_when_quiet_and_dead_link_closes() -> None:
    session = bound(enquire_link_s=30, response_timeout_s=10)
    assert session.poll(now=29) == []
    (send,) = session.poll(now=30)
    assert isinstance(send, Send) and isinstance(send.pdu, EnquireLink)
    assert session.poll(now=31) == []  # one keepalive at a time
    session.receive(EnquireLinkResp(sequence=send.pdu.sequence), now=32)
    assert session.poll(now=50) == []
    (send2,) = session.poll(now=62)
    assert isinstance(send2, Send)
    events = session.poll(now=72)
    assert isinstance(events[-1], Closed) and session.state is SessionState.CLOSED


def test_traffic_postpones_the_keepalive() -> None:
    session = bound(enquire_link_s=30)
    session.receive(DeliverSm(source_addr="1", sequence=5), now=20)
    assert session.poll(now=45) == []
    assert session.next_deadline() == 50


def test_peer_enquire_link_and_unbind_are_answered() -> None:
    session = bound()
    assert session.receive(EnquireLink(sequence=77), now=0) == [Send(EnquireLinkResp(sequence=77))]
    events = session.receive(Unbind(sequence=78), now=0)
    assert events[0] == Send(UnbindResp(sequence=78))
    assert isinstance(events[-1], Closed) and session.state is SessionState.CLOSED


def test_deliver_sm_is_handed_to_the_caller_and_refused_on_transmitter() -> None:
    session = bound(BindMode.RECEIVER)
    mo = DeliverSm(source_addr="919812345678", destination_addr="5676", sequence=9)
    assert session.receive(mo, now=0) == [RequestReceived(mo)]
    assert session.respond(mo) == DeliverSmResp(sequence=9)
    tx = bound(BindMode.TRANSMITTER)
    events = tx.receive(mo, now=0)
    assert events[0] == Send(DeliverSmResp(status=Status.ESME_RINVBNDSTS, sequence=9))


def test_garbled_request_gets_generic_nack_and_session_survives() -> None:
    session = bound()
    err = PduError(Status.ESME_RINVCMDID, "unknown", sequence=12, command_id=0x99)
    events = session.receive(err, now=0)
    assert events[0] == Send(GenericNack(status=Status.ESME_RINVCMDID, sequence=12))
    assert session.is_bound


def test_fatal_framing_error_closes() -> None:
    session = bound()
    err = PduError(Status.ESME_RINVCMDLEN, "len", sequence=1, fatal=True)
    events = session.receive(err, now=0)
    assert isinstance(events[-1], Closed)


def test_clean_unbind() -> None:
    session = bound()
    pending = session.send(SubmitSm(), now=0)
    unbind = session.unbind(now=1)
    assert unbind is not None and session.state is SessionState.UNBINDING
    with pytest.raises(SessionError):
        session.send(SubmitSm(), now=1)
    # While unbinding, MOs still arrive and are handed out; responses still match.
    session.receive(SubmitSmResp(message_id="m", sequence=pending.sequence), now=1)
    events = session.receive(UnbindResp(sequence=unbind.sequence), now=2)
    assert events == [Closed("unbound")]


def test_connection_lost_reports_outstanding() -> None:
    session = bound()
    a = session.send(SubmitSm(), now=0)
    events = session.connection_lost()
    assert events == [ResponseTimedOut(a), Closed("connection lost")]
    assert session.connection_lost() == []


def test_bind_resp_is_bind_pdu() -> None:
    assert isinstance(Session().bind(BindMode.RECEIVER, "a", "b", now=0), Bind)
