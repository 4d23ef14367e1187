"""The transition table of a message's life (core/timeline.py): what may follow what, and where it leads."""

from __future__ import annotations

from typing import Any

import pytest

from mogateway.core.contract import OutcomeKind
from mogateway.core.timeline import (
    FINAL_STATES,
    REPLAYABLE_STATES,
    TABLE,
    UNFINISHED_STATES,
    Change,
    Event,
    EventKind,
    IllegalTransition,
    State,
    compose,
    fold,
    state_for_outcome,
    step_for,
    transition,
)

ALL_STATES: list[State | None] = [None, *State]


def ev(kind: EventKind, **data: Any) -> Event:
    return Event(kind, 0.0, data)


def outcome(kind: OutcomeKind) -> Event:
    return ev(EventKind.OUTCOME, outcome=kind.value)


def receipt(status: str) -> Event:
    return ev(EventKind.DELIVERY, status=status, ref="r")


def test_a_delivered_reply_walks_the_happy_path() -> None:
    path = [
        ev(EventKind.RECEIVED),
        outcome(OutcomeKind.REPLY),
        ev(EventKind.REPLY_SENDING),
        ev(EventKind.REPLY_SUBMITTED),
        receipt("delivered"),
    ]
    assert fold(path) is State.DELIVERED
    assert fold(path[:2]) is State.ANSWERED
    assert fold(path[:3]) is State.REPLYING
    assert fold(path[:4]) is State.REPLIED


def test_a_channel_that_needs_no_intent_submits_straight_from_answered() -> None:
    assert transition(State.ANSWERED, ev(EventKind.REPLY_SUBMITTED)) is State.REPLIED


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
def test_each_outcome_leads_to_its_state_and_only_from_queued(kind: OutcomeKind, state: State) -> None:
    assert state_for_outcome(kind) is state
    assert transition(State.QUEUED, outcome(kind)) is state
    for other in ALL_STATES:
        if other is not State.QUEUED:
            with pytest.raises(IllegalTransition):
                transition(other, outcome(kind))


def test_only_a_reply_leaves_the_message_unfinished() -> None:
    for kind in OutcomeKind:
        assert (state_for_outcome(kind) in UNFINISHED_STATES) is (kind is OutcomeKind.REPLY)


def test_a_message_is_born_received_or_rejected_and_only_once() -> None:
    assert transition(None, ev(EventKind.RECEIVED)) is State.QUEUED
    assert transition(None, ev(EventKind.REJECTED)) is State.REJECTED
    for state in State:
        for kind in (EventKind.RECEIVED, EventKind.REJECTED):
            with pytest.raises(IllegalTransition):
                transition(state, ev(kind))


def test_the_intent_comes_only_from_an_answer_so_only_one_worker_can_record_it() -> None:
    assert transition(State.ANSWERED, ev(EventKind.REPLY_SENDING)) is State.REPLYING
    for state in ALL_STATES:
        if state is not State.ANSWERED:
            with pytest.raises(IllegalTransition):
                transition(state, ev(EventKind.REPLY_SENDING))


def test_a_reply_cut_off_in_its_handover_is_possibly_sent_and_final() -> None:
    assert transition(State.REPLYING, ev(EventKind.REPLY_UNKNOWN)) is State.REPLY_UNKNOWN
    assert State.REPLY_UNKNOWN in FINAL_STATES
    with pytest.raises(IllegalTransition):  # only a handover that began can be cut off
        transition(State.ANSWERED, ev(EventKind.REPLY_UNKNOWN))


def test_a_waiting_reply_stays_answered_and_a_refused_handover_goes_back_to_it() -> None:
    assert transition(State.ANSWERED, ev(EventKind.REPLY_WAITING)) is State.ANSWERED
    assert transition(State.REPLYING, ev(EventKind.REPLY_WAITING)) is State.ANSWERED
    for state in (State.QUEUED, State.REPLIED, *FINAL_STATES):
        with pytest.raises(IllegalTransition):
            transition(state, ev(EventKind.REPLY_WAITING))


def test_reply_results_only_follow_an_answer_or_a_handover() -> None:
    results = ((EventKind.REPLY_SUBMITTED, State.REPLIED), (EventKind.REPLY_FAILED, State.REPLY_FAILED))
    for kind, target in results:
        for state in ALL_STATES:
            if state in (State.ANSWERED, State.REPLYING):
                assert transition(state, ev(kind)) is target
            else:
                with pytest.raises(IllegalTransition):
                    transition(state, ev(kind))


def test_a_blocked_reply_is_final_and_can_be_replayed() -> None:
    """A reply the client's DLT rules refused ends the message; after fixing the templates (or the
    application) an operator replays it like any other finished message."""
    state = fold([ev(EventKind.RECEIVED), outcome(OutcomeKind.REPLY), ev(EventKind.REPLY_BLOCKED)])
    assert state is State.REPLY_BLOCKED and state in REPLAYABLE_STATES
    assert transition(state, ev(EventKind.REPLAY)) is State.QUEUED
    for kind in (EventKind.REPLY_SUBMITTED, EventKind.REPLY_FAILED, EventKind.RECOVERED):
        with pytest.raises(IllegalTransition):
            transition(state, ev(kind))
    for other in ALL_STATES:
        if other is not State.ANSWERED:
            with pytest.raises(IllegalTransition):
                transition(other, ev(EventKind.REPLY_BLOCKED))


def test_replay_requeues_only_finished_accepted_messages() -> None:
    for state in REPLAYABLE_STATES:
        assert transition(state, ev(EventKind.REPLAY)) is State.QUEUED
    for state in (None, State.REJECTED, *UNFINISHED_STATES):
        with pytest.raises(IllegalTransition):
            transition(state, ev(EventKind.REPLAY))


def test_recovery_is_only_for_unfinished_messages_and_changes_nothing() -> None:
    for state in UNFINISHED_STATES:
        assert transition(state, ev(EventKind.RECOVERED)) is state
    for state in [None, *FINAL_STATES]:
        with pytest.raises(IllegalTransition):
            transition(state, ev(EventKind.RECOVERED))


def test_receipts_move_a_replied_message_and_an_undelivered_part_is_never_hidden() -> None:
    assert transition(State.REPLIED, receipt("delivered")) is State.DELIVERED
    assert transition(State.REPLIED, receipt("undelivered")) is State.UNDELIVERED
    assert transition(State.DELIVERED, receipt("undelivered")) is State.UNDELIVERED
    assert transition(State.UNDELIVERED, receipt("delivered")) is State.UNDELIVERED
    assert transition(State.DELIVERED, receipt("delivered")) is State.DELIVERED
    # After a replay a late receipt is recorded without moving the new life of the message.
    assert transition(State.QUEUED, receipt("delivered")) is State.QUEUED
    with pytest.raises(IllegalTransition):
        transition(None, receipt("delivered"))


def test_notes_may_be_added_anywhere() -> None:
    for state in State:
        assert transition(state, ev(EventKind.NOTE)) is state


def test_an_unknown_outcome_or_event_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        transition(State.QUEUED, ev(EventKind.OUTCOME, outcome="maybe"))


def test_the_table_covers_every_event_and_every_state_is_reachable() -> None:
    assert {kind for kind, _ in TABLE} == set(EventKind)
    reached: set[State | None] = {None}
    frontier: list[State | None] = [None]
    while frontier:
        current = frontier.pop()
        for step in TABLE.values():
            try:
                after = step.after(current)
            except IllegalTransition:
                continue
            if after not in reached:
                reached.add(after)
                frontier.append(after)
    assert reached == set(ALL_STATES)


def test_final_and_unfinished_states_split_every_state() -> None:
    assert not FINAL_STATES & UNFINISHED_STATES
    assert set(State) == FINAL_STATES | UNFINISHED_STATES
    assert FINAL_STATES - {State.REJECTED} == REPLAYABLE_STATES


def test_a_composed_change_does_what_its_events_do_in_turn_and_nothing_else() -> None:
    answer, intent = outcome(OutcomeKind.REPLY), ev(EventKind.REPLY_SENDING)
    change = Change("m1", answer, reply_text="hi", then=(intent,))
    assert change.events == (answer, intent)
    step = change.step
    # Allowed exactly where the sequence is: from queued only, to replying.
    for state in ALL_STATES:
        try:
            expected: State | None = transition(transition(state, answer), intent)
        except IllegalTransition:
            expected = None
        if expected is None:
            assert state not in step.allowed, state
        else:
            assert step.after(state) is expected, state
    assert step.allowed == frozenset({State.QUEUED}) and step.after(State.QUEUED) is State.REPLYING
    # The same steps make the same step object (the journals cache their SQL by it).
    assert Change("m2", answer, then=(intent,)).step is step
    assert Change("m1", answer).step is step_for(answer)


def test_a_sequence_the_table_refuses_composes_to_a_step_allowed_nowhere() -> None:
    blank_then_intent = compose(step_for(outcome(OutcomeKind.BLANK)), step_for(ev(EventKind.REPLY_SENDING)))
    assert blank_then_intent.allowed == frozenset()
    # Events that keep the state compose to a keep.
    twice = compose(step_for(ev(EventKind.RECOVERED)), step_for(ev(EventKind.NOTE)))
    assert twice.allowed == UNFINISHED_STATES and all(twice.after(s) is s for s in UNFINISHED_STATES)
