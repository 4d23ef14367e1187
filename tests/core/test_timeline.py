"""The transition table of a message's life (core/timeline.py): what may follow what, and where it leads."""

from __future__ import annotations

import pytest

from mogateway.core.contract import OutcomeKind
from mogateway.core.timeline import (
    FINAL_STATES,
    NO_REPLY_STATES,
    TRANSITIONS,
    EventKind,
    IllegalTransition,
    State,
    next_state,
    state_for_outcome,
)

ALL_STATES: list[State | None] = [None, *State]
REPLAYABLE = FINAL_STATES - {State.REJECTED}


def fold(events: list[tuple[EventKind, OutcomeKind | None]]) -> State | None:
    state: State | None = None
    for event, outcome in events:
        state = next_state(state, event, outcome)
    return state


def test_a_replied_message_walks_the_happy_path() -> None:
    assert (
        fold(
            [
                (EventKind.RECEIVED, None),
                (EventKind.ROUTED, None),
                (EventKind.ATTEMPT, None),
                (EventKind.OUTCOME, OutcomeKind.REPLY),
                (EventKind.REPLY_SUBMITTED, None),
                (EventKind.DELIVERY, None),
            ]
        )
        is State.REPLIED  # a receipt event alone does not change the state; the journal decides
    )


@pytest.mark.parametrize(
    ("kind", "state"),
    [
        (OutcomeKind.REPLY, State.ANSWERED),
        (OutcomeKind.BLANK, State.NO_REPLY),
        (OutcomeKind.TIMEOUT, State.TIMED_OUT),
        (OutcomeKind.HTTP_ERROR, State.HTTP_ERROR),
        (OutcomeKind.BAD_RESPONSE, State.BAD_RESPONSE),
        (OutcomeKind.FAILED, State.FAILED),
        (OutcomeKind.UNROUTABLE, State.UNROUTABLE),
    ],
)
def test_each_outcome_leads_to_its_state(kind: OutcomeKind, state: State) -> None:
    assert state_for_outcome(kind) is state
    assert next_state(State.DISPATCHING, EventKind.OUTCOME, kind) is state
    assert next_state(State.QUEUED, EventKind.OUTCOME, kind) is state  # unroutable never dispatches


def test_only_a_reply_leaves_the_message_unfinished() -> None:
    for kind in OutcomeKind:
        state = state_for_outcome(kind)
        if kind is OutcomeKind.REPLY:
            assert state not in FINAL_STATES
        else:
            assert state in NO_REPLY_STATES and state in FINAL_STATES


def test_an_outcome_event_needs_its_kind() -> None:
    with pytest.raises(ValueError):
        next_state(State.DISPATCHING, EventKind.OUTCOME)


def test_a_message_is_born_received_or_rejected_and_only_once() -> None:
    assert next_state(None, EventKind.RECEIVED) is State.QUEUED
    assert next_state(None, EventKind.REJECTED) is State.REJECTED
    for state in State:
        for event in (EventKind.RECEIVED, EventKind.REJECTED):
            with pytest.raises(IllegalTransition):
                next_state(state, event)


@pytest.mark.parametrize("state", sorted(FINAL_STATES))
def test_no_second_outcome_once_final(state: State) -> None:
    """The compare-and-set of the dispatcher relies on this: a recorded outcome is never overwritten."""
    for event in (EventKind.ROUTED, EventKind.ATTEMPT, EventKind.OUTCOME):
        with pytest.raises(IllegalTransition):
            next_state(state, event, OutcomeKind.REPLY)


def test_reply_events_only_follow_an_answer() -> None:
    assert next_state(State.ANSWERED, EventKind.REPLY_SUBMITTED) is State.REPLIED
    assert next_state(State.ANSWERED, EventKind.REPLY_FAILED) is State.REPLY_FAILED
    for state in ALL_STATES:
        if state is State.ANSWERED:
            continue
        for event in (EventKind.REPLY_SUBMITTED, EventKind.REPLY_FAILED):
            with pytest.raises(IllegalTransition):
                next_state(state, event)


def test_replay_requeues_every_accepted_message_but_never_a_rejected_one() -> None:
    for state in REPLAYABLE | {State.QUEUED, State.DISPATCHING, State.ANSWERED}:
        assert next_state(state, EventKind.REPLAY) is State.QUEUED
    for state in (None, State.REJECTED):
        with pytest.raises(IllegalTransition):
            next_state(state, EventKind.REPLAY)


def test_recovery_is_only_for_unfinished_messages_and_changes_nothing() -> None:
    for state in (State.QUEUED, State.DISPATCHING, State.ANSWERED):
        assert next_state(state, EventKind.RECOVERED) is state
    for state in FINAL_STATES:
        with pytest.raises(IllegalTransition):
            next_state(state, EventKind.RECOVERED)


def test_receipts_keep_the_state_and_come_only_after_an_answer() -> None:
    for state in FINAL_STATES | {State.ANSWERED}:
        assert next_state(state, EventKind.DELIVERY) is state
    for state in (None, State.QUEUED, State.DISPATCHING):
        with pytest.raises(IllegalTransition):
            next_state(state, EventKind.DELIVERY)


def test_notes_may_be_added_anywhere() -> None:
    for state in ALL_STATES:
        assert next_state(state, EventKind.NOTE) is state


def test_the_table_covers_every_event_and_every_state_is_reachable() -> None:
    assert set(TRANSITIONS) == set(EventKind)
    reached: set[State | None] = {None}
    frontier: list[State | None] = [None]
    while frontier:
        current = frontier.pop()
        for event in EventKind:
            for outcome in OutcomeKind if event is EventKind.OUTCOME else [None]:
                try:
                    after = next_state(current, event, outcome)
                except IllegalTransition:
                    continue
                if after not in reached:
                    reached.add(after)
                    frontier.append(after)
    # DELIVERED/UNDELIVERED are set by the journal from receipts, not by an event's own target state.
    assert reached >= set(State) - {State.DELIVERED, State.UNDELIVERED}


def test_final_and_pending_states_are_disjoint() -> None:
    assert not FINAL_STATES & {State.QUEUED, State.DISPATCHING, State.ANSWERED}
    assert NO_REPLY_STATES <= FINAL_STATES
