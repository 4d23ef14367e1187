"""The life of one MO as data: its states, the events that move it, and the one table of transitions.

Every MO has one timeline: the events appended to it, in order. Its state is what those events lead to
according to :data:`TABLE`, and this module is the only place that says so. Nothing writes a state by
hand: a change to a message is an :class:`Event` wrapped in a :class:`Change`; :func:`transition` says
what the event does in the message's current state (or raises :class:`IllegalTransition`), and the
journals turn the same table into their SQL (an event is applied only in a state the table lists for
it, and the state written is the one the table names), so a journal cannot write a state the table did
not produce.

States::

    (none) --received--> queued                                   (none) --rejected--> rejected
    queued --outcome--> answered | no_reply | timed_out | http_error | bad_response | failed | unroutable
    answered --reply_sending--> replying --reply_submitted--> replied --delivery--> delivered | undelivered
    answered | replying --reply_failed--> reply_failed        replying --reply_waiting--> answered
    replying --reply_unknown--> reply_unknown (the handover was cut off: the reply may have gone out)
    answered --reply_submitted--> replied  (channels that need no intent record: log, http)
    answered --reply_blocked--> reply_blocked   (the client's DLT rules refused to send it)
    <final but rejected> --replay--> queued

``answered`` holds a reply that has not left yet (also while it waits for a bind); ``replying`` is
written just before a channel that cannot be asked twice (SMPP) hands it over, so that after a crash the
gateway knows whether the reply may already have gone out.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Final

from mogateway.core.contract import OutcomeKind
from mogateway.core.immutable import immutable

__all__ = [
    "FAILED_STATES",
    "FINAL_STATES",
    "NO_REPLY_STATES",
    "REPLAYABLE_STATES",
    "REPLIED_STATES",
    "STATES",
    "TABLE",
    "UNFINISHED_STATES",
    "UNSENT_STATES",
    "Change",
    "Event",
    "EventKind",
    "IllegalTransition",
    "State",
    "Step",
    "compose",
    "fold",
    "qualifier_of",
    "state_for_outcome",
    "step_for",
    "tone",
    "transition",
]


class State(enum.StrEnum):
    QUEUED = "queued"  # stored durably, waiting for (or in) its callback
    ANSWERED = "answered"  # the application answered with a reply that has not been handed over yet
    REPLYING = "replying"  # a channel is handing the reply over: it may have gone out
    REPLIED = "replied"  # a reply channel took the reply
    DELIVERED = "delivered"  # a delivery receipt said the reply reached the handset
    UNDELIVERED = "undelivered"  # a delivery receipt said it failed or expired
    REPLY_FAILED = "reply_failed"  # the reply could not be handed over (refused, or no bind in time)
    REPLY_UNKNOWN = "reply_unknown"  # the handover was cut off: the reply was possibly sent
    REPLY_BLOCKED = "reply_blocked"  # not sent: the client's DLT rules refused it (no template matches)
    NO_REPLY = "no_reply"  # the application answered blank
    TIMED_OUT = "timed_out"  # no complete answer within the deadline
    HTTP_ERROR = "http_error"  # the application answered with a status other than 200
    BAD_RESPONSE = "bad_response"  # the answer was not text/plain, undecodable or too large
    FAILED = "failed"  # the callback could not be delivered (connection refused, URL refused)
    UNROUTABLE = "unroutable"  # no application is registered for this shortcode/keyword
    REJECTED = "rejected"  # refused at intake (not an Indian mobile number, bad field)


class EventKind(enum.StrEnum):
    RECEIVED = "received"
    REJECTED = "rejected"
    OUTCOME = "outcome"  # the whole callback exchange: routed, attempts, judged answer
    REPLY_SENDING = "reply_sending"
    REPLY_WAITING = "reply_waiting"
    REPLY_SUBMITTED = "reply_submitted"
    REPLY_FAILED = "reply_failed"
    REPLY_UNKNOWN = "reply_unknown"
    REPLY_BLOCKED = "reply_blocked"
    DELIVERY = "delivery"
    REPLAY = "replay"
    RECOVERED = "recovered"
    NOTE = "note"


# The groups every reader of states takes from here (the console, the CLI, the templates, the API's
# enums), so that a new state is placed once. tests/core/test_state_groups.py pins each state to its
# groups and each reader to these.

#: Every state, in the order a person reads them (a message's life from left to right): a filter offers these.
STATES: Final = tuple(State)
#: Waiting: the gateway will move the message on by itself (its callback, its reply's handover).
UNFINISHED_STATES: Final = frozenset({State.QUEUED, State.ANSWERED, State.REPLYING})
#: Nothing more happens by itself (a receipt may still move a replied message): waiting for an outcome ends.
FINAL_STATES: Final = frozenset(State) - UNFINISHED_STATES
#: Final states an operator may send through the callback again.
REPLAYABLE_STATES: Final = FINAL_STATES - {State.REJECTED}
#: A reply channel took the reply (a delivery receipt may follow and say whether it reached the handset).
REPLIED_STATES: Final = frozenset({State.REPLIED, State.DELIVERED, State.UNDELIVERED})
#: The application's reply did not surely leave: refused, blocked by DLT rules, or possibly sent.
UNSENT_STATES: Final = frozenset({State.REPLY_FAILED, State.REPLY_BLOCKED, State.REPLY_UNKNOWN})
#: Ended without a reply to send (refused at intake, no answer, a blank one): nothing went to the sender.
NO_REPLY_STATES: Final = FINAL_STATES - REPLIED_STATES - UNSENT_STATES
#: Ended in a way an operator should look at: the callback, the reply or its delivery failed.
FAILED_STATES: Final = frozenset(
    {
        State.UNDELIVERED,
        State.REPLY_FAILED,
        State.REPLY_BLOCKED,
        State.TIMED_OUT,
        State.HTTP_ERROR,
        State.BAD_RESPONSE,
        State.FAILED,
        State.UNROUTABLE,
        State.REJECTED,
    }
)


def tone(state: str) -> str:
    """How a state reads at a glance (the colour the console and the CLI give it): ``waiting``
    (unfinished), ``bad`` (failed), ``unsure`` (the reply may have gone out) or ``good`` (replied or
    delivered, or no reply was wanted). Takes the state's name, as the API documents carry it."""
    if state in UNFINISHED_STATES:
        return "waiting"
    if state in FAILED_STATES:
        return "bad"
    if state == State.REPLY_UNKNOWN:
        return "unsure"
    if state in FINAL_STATES:
        return "good"
    raise ValueError(f"not a state: {state!r}")


_OUTCOME_STATE: Final = {
    OutcomeKind.REPLY: State.ANSWERED,
    OutcomeKind.BLANK: State.NO_REPLY,
    OutcomeKind.TIMEOUT: State.TIMED_OUT,
    OutcomeKind.HTTP_ERROR: State.HTTP_ERROR,
    OutcomeKind.BAD_RESPONSE: State.BAD_RESPONSE,
    OutcomeKind.FAILED: State.FAILED,
    OutcomeKind.UNROUTABLE: State.UNROUTABLE,
}


@immutable(eq=False)
class Step:
    """What one kind of event does: the states it moves from (and to), and the states in which it is
    recorded without moving. In any other state it is refused. (Steps are the table's own values,
    compared and hashed by identity, so the journals can cache the SQL of each.)"""

    moves: Mapping[State | None, State]
    keeps: frozenset[State] = frozenset()

    @property
    def allowed(self) -> frozenset[State | None]:
        """Every state in which the event may be appended."""
        return frozenset(self.moves) | self.keeps

    def after(self, state: State | None) -> State | None:
        """The state after the event in ``state``; raises IllegalTransition when it is not allowed."""
        moved = self.moves.get(state)
        if moved is not None:
            return moved
        if state in self.keeps:
            return state
        raise IllegalTransition(f"not allowed in state {state}")


_ALL: Final = frozenset(State)


def _receipt(moves: Mapping[State | None, State]) -> Step:
    # Receipts may arrive for any part of a reply, also after a replay re-queued the message: recorded
    # everywhere, they move only a replied (or, for a failed part, delivered) message.
    return Step(moves, _ALL - frozenset(s for s in moves if s is not None))


#: (event kind, qualifier) -> Step. The qualifier is the outcome kind of an OUTCOME event and the receipt
#: status of a DELIVERY event ("delivered" — also WhatsApp's "read" —, "sent" or "undelivered"); None for
#: every other kind.
TABLE: Final[Mapping[tuple[EventKind, str | None], Step]] = {
    (EventKind.RECEIVED, None): Step({None: State.QUEUED}),
    (EventKind.REJECTED, None): Step({None: State.REJECTED}),
    **{
        (EventKind.OUTCOME, kind.value): Step({State.QUEUED: state}) for kind, state in _OUTCOME_STATE.items()
    },
    # Only from answered, so that of two workers about to hand one reply over only one records the
    # intent (an at-least-once resend after a restart goes back to answered first: reply_waiting).
    (EventKind.REPLY_SENDING, None): Step({State.ANSWERED: State.REPLYING}),
    (EventKind.REPLY_WAITING, None): Step({State.REPLYING: State.ANSWERED}, frozenset({State.ANSWERED})),
    (EventKind.REPLY_SUBMITTED, None): Step({State.REPLYING: State.REPLIED, State.ANSWERED: State.REPLIED}),
    (EventKind.REPLY_FAILED, None): Step(
        {State.ANSWERED: State.REPLY_FAILED, State.REPLYING: State.REPLY_FAILED}
    ),
    (EventKind.REPLY_UNKNOWN, None): Step({State.REPLYING: State.REPLY_UNKNOWN}),
    (EventKind.REPLY_BLOCKED, None): Step({State.ANSWERED: State.REPLY_BLOCKED}),
    (EventKind.DELIVERY, "delivered"): _receipt({State.REPLIED: State.DELIVERED}),
    (EventKind.DELIVERY, "sent"): Step({}, _ALL),  # a WhatsApp "sent" status: in the timeline only
    (EventKind.DELIVERY, "undelivered"): _receipt(
        {State.REPLIED: State.UNDELIVERED, State.DELIVERED: State.UNDELIVERED}
    ),
    (EventKind.REPLAY, None): Step({s: State.QUEUED for s in REPLAYABLE_STATES}),
    (EventKind.RECOVERED, None): Step({}, UNFINISHED_STATES),
    (EventKind.NOTE, None): Step({}, _ALL),
}


class IllegalTransition(ValueError):
    """An event that may not follow the message's current state."""


@immutable
class Event:
    """One entry of a timeline: what happened, when (unix seconds), and its details."""

    kind: EventKind
    at: float
    data: dict[str, Any] = field(default_factory=dict)


@immutable
class Change:
    """One event to append to one message, and the columns it sets besides the state.

    ``then``: events that follow ``event`` at once, in the same write (the answer of a callback and
    the intent to hand its reply over): the change is allowed only where the whole sequence is, and
    leads where the sequence leads (:func:`compose`)."""

    message_id: str
    event: Event
    client_id: str | None = None
    reply_text: str | None = None
    reply_refs: tuple[str, ...] = ()
    then: tuple[Event, ...] = ()

    @property
    def step(self) -> Step:
        """What this change does (see :data:`TABLE`)."""
        if not self.then:
            return step_for(self.event)
        return compose(step_for(self.event), *(step_for(event) for event in self.then))

    @property
    def events(self) -> tuple[Event, ...]:
        """The events this change appends, in order."""
        return (self.event, *self.then) if self.then else (self.event,)


def qualifier_of(event: Event) -> str | None:
    """The qualifier under which ``event`` is found in :data:`TABLE`."""
    if event.kind is EventKind.OUTCOME:
        return str(event.data["outcome"])
    if event.kind is EventKind.DELIVERY:
        status = event.data.get("status")
        # WhatsApp statuses: "read" means delivered too; "sent" (accepted by the servers) moves nothing.
        if status in ("delivered", "read"):
            return "delivered"
        return "sent" if status == "sent" else "undelivered"
    return None


def step_for(event: Event) -> Step:
    """The :class:`Step` of ``event``; raises IllegalTransition for an event the table does not know."""
    try:
        return TABLE[(event.kind, qualifier_of(event))]
    except KeyError:
        raise IllegalTransition(f"unknown event {event.kind} {qualifier_of(event)!r}") from None


@functools.cache
def compose(*steps: Step) -> Step:
    """One step doing ``steps`` in turn: allowed in a state where each step is allowed in the state the
    ones before it lead to, and leading where the last one does. (Cached: the same steps give the same
    step object, which the journals cache their SQL by.)"""
    moves: dict[State | None, State] = {}
    keeps: set[State] = set()
    for start in steps[0].allowed:
        state = start
        try:
            for step in steps:
                state = step.after(state)
        except IllegalTransition:
            continue
        if state is None:
            continue
        if state == start:
            keeps.add(state)
        else:
            moves[start] = state
    return Step(moves, frozenset(keeps))


def transition(state: State | None, event: Event) -> State:
    """The state after ``event`` in ``state`` (None: a new message). Raises IllegalTransition."""
    try:
        after = step_for(event).after(state)
    except IllegalTransition as exc:
        raise IllegalTransition(f"{event.kind} ({qualifier_of(event)}): {exc}") from None
    assert after is not None  # every step leaves a message in some state
    return after


def fold(events: Sequence[Event]) -> State | None:
    """The state a whole timeline leads to, from nothing. Raises IllegalTransition on a bad sequence."""
    state: State | None = None
    for event in events:
        state = transition(state, event)
    return state


def state_for_outcome(kind: OutcomeKind) -> State:
    """The state an outcome of ``kind`` leads to."""
    return _OUTCOME_STATE[kind]
