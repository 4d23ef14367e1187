"""The life of one MO as data: its states, the events that move it, and the one table of transitions.

A message's state is derived from its timeline: each event kind names the state it leads to, and an
event is allowed only from the states listed for it here. The journal, the dispatcher, the admin API and
the CLI all use this table; nothing else decides what may follow what.

States::

    (none) --received--> queued --routed/attempt--> dispatching --outcome--> answered | <final no-reply>
    answered --reply_submitted--> replied --delivery--> delivered | undelivered
    answered --reply_failed--> reply_failed
    (none) --rejected--> rejected
    <any final but rejected> --replay--> queued
"""

from __future__ import annotations

import enum
from typing import Final

from mogateway.core.contract import OutcomeKind

__all__ = [
    "EventKind",
    "IllegalTransition",
    "State",
    "FINAL_STATES",
    "NO_REPLY_STATES",
    "TRANSITIONS",
    "next_state",
    "state_for_outcome",
]


class State(enum.StrEnum):
    QUEUED = "queued"  # stored durably, waiting for the dispatcher
    DISPATCHING = "dispatching"  # a callback is (or was, before a crash) in flight
    ANSWERED = "answered"  # the application answered with a reply; the reply is not yet handed over
    REPLIED = "replied"  # the reply was handed to a reply channel
    DELIVERED = "delivered"  # a delivery receipt said the reply reached the handset
    UNDELIVERED = "undelivered"  # a delivery receipt said it failed or expired
    REPLY_FAILED = "reply_failed"  # the reply channel refused the reply
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
    ROUTED = "routed"
    ATTEMPT = "attempt"
    OUTCOME = "outcome"
    REPLY_SUBMITTED = "reply_submitted"
    REPLY_FAILED = "reply_failed"
    DELIVERY = "delivery"
    REPLAY = "replay"
    RECOVERED = "recovered"
    NOTE = "note"


NO_REPLY_STATES: Final = frozenset(
    {
        State.NO_REPLY,
        State.TIMED_OUT,
        State.HTTP_ERROR,
        State.BAD_RESPONSE,
        State.FAILED,
        State.UNROUTABLE,
    }
)
FINAL_STATES: Final = NO_REPLY_STATES | {
    State.REPLIED,
    State.DELIVERED,
    State.UNDELIVERED,
    State.REPLY_FAILED,
    State.REJECTED,
}
_PENDING: Final = frozenset({State.QUEUED, State.DISPATCHING})
_REPLAYABLE: Final = FINAL_STATES - {State.REJECTED}

_OUTCOME_STATE: Final = {
    OutcomeKind.REPLY: State.ANSWERED,
    OutcomeKind.BLANK: State.NO_REPLY,
    OutcomeKind.TIMEOUT: State.TIMED_OUT,
    OutcomeKind.HTTP_ERROR: State.HTTP_ERROR,
    OutcomeKind.BAD_RESPONSE: State.BAD_RESPONSE,
    OutcomeKind.FAILED: State.FAILED,
    OutcomeKind.UNROUTABLE: State.UNROUTABLE,
}

#: event kind -> (states it may follow; None = a new message), resulting state (None = unchanged)
TRANSITIONS: Final[dict[EventKind, tuple[frozenset[State | None], State | None]]] = {
    EventKind.RECEIVED: (frozenset({None}), State.QUEUED),
    EventKind.REJECTED: (frozenset({None}), State.REJECTED),
    EventKind.ROUTED: (_PENDING, State.DISPATCHING),
    EventKind.ATTEMPT: (_PENDING, State.DISPATCHING),
    # The resulting state of an outcome depends on its kind: see state_for_outcome.
    EventKind.OUTCOME: (_PENDING, None),
    EventKind.REPLY_SUBMITTED: (frozenset({State.ANSWERED}), State.REPLIED),
    EventKind.REPLY_FAILED: (frozenset({State.ANSWERED}), State.REPLY_FAILED),
    # Receipts may arrive for any reply part, also after a replay re-answered the message.
    EventKind.DELIVERY: (frozenset(FINAL_STATES | {State.ANSWERED}), None),
    EventKind.REPLAY: (frozenset(_REPLAYABLE | _PENDING | {State.ANSWERED}), State.QUEUED),
    EventKind.RECOVERED: (frozenset(_PENDING | {State.ANSWERED}), None),
    EventKind.NOTE: (frozenset(set(State) | {None}), None),
}


class IllegalTransition(ValueError):
    """An event that may not follow the message's current state."""


def state_for_outcome(kind: OutcomeKind) -> State:
    """The state an outcome of ``kind`` leads to."""
    return _OUTCOME_STATE[kind]


def next_state(current: State | None, event: EventKind, outcome: OutcomeKind | None = None) -> State | None:
    """The state after ``event`` (``outcome`` is needed for OUTCOME events). Raises IllegalTransition."""
    allowed, result = TRANSITIONS[event]
    if current not in allowed:
        raise IllegalTransition(f"{event} is not allowed in state {current}")
    if event is EventKind.OUTCOME:
        if outcome is None:
            raise ValueError("an outcome event needs its outcome kind")
        return state_for_outcome(outcome)
    return current if result is None else result
