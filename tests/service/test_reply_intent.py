"""A reply whose channel can take it at once has its handover intent recorded with its answer (one write);
if the handover then fails before anything went out, the reply goes back to ``answered`` and goes out
once, later, with an intent of its own (service/replier.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from mogateway.core.clients import ClientRecord
from mogateway.core.contract import OutcomeKind
from mogateway.core.message import Message
from mogateway.core.ports import Reply, ReplyError, ReplySubmitted
from mogateway.core.timeline import Change, Event, EventKind, IllegalTransition, State
from mogateway.service.metrics import Metrics
from mogateway.service.replier import Replier, ReplyRouter

MO = Message("m1", "56767", "919812345678", "BAL", 0.0, "smpp:airtel")


class TableStore:
    """A message store that applies changes by the transition table and keeps every write."""

    def __init__(self) -> None:
        self.states: dict[str, State] = {MO.id: State.QUEUED}
        self.timeline: list[EventKind] = []
        self.writes: list[list[Change]] = []

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        self.writes.append(list(changes))
        out = []
        for change in changes:
            try:
                after = change.step.after(self.states[change.message_id])
            except IllegalTransition:
                out.append(False)
                continue
            assert after is not None
            self.states[change.message_id] = after
            self.timeline.extend(event.kind for event in change.events)
            out.append(True)
        return out


class Channel:
    """An SMPP-like channel: needs an intent, calls the handover before writing; fails as told."""

    name = "smpp"
    needs_intent = True

    def __init__(self) -> None:
        self.up = True
        self.fail_before_writing = 0  # how many sends fail (retryable) before the handover
        self.handovers = 0
        self.sent: list[Reply] = []

    def ready(self, reply: Reply) -> bool:
        return self.up

    async def send(
        self, reply: Reply, handover: Callable[[], Awaitable[None]] | None = None
    ) -> ReplySubmitted:
        if self.fail_before_writing:
            self.fail_before_writing -= 1
            raise ReplyError("bind went down", retryable=True)
        assert handover is not None
        await handover()
        self.handovers += 1
        self.sent.append(reply)
        return ReplySubmitted("smpp:airtel", 1, ["ref-1"], "")


def client() -> ClientRecord:
    return ClientRecord("c1", "app", ["56767"], [], "https://app.example/mo", token="t")


async def answer(store: TableStore, replier: Replier, text: str) -> bool:
    """What the dispatcher does with an application's reply: plan it, record it, hand it over."""
    planned = replier.plan(MO, text, client())
    event = Event(EventKind.OUTCOME, 1.0, {"outcome": OutcomeKind.REPLY.value})
    (applied,) = await store.apply([Change(MO.id, event, reply_text=text, then=planned.events)])
    if applied:
        replier.send(planned, answered_at=1.0)
    return applied


async def settle(replier: Replier) -> None:
    for _ in range(200):
        if not replier.in_progress():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the reply was not finished")


async def test_a_reply_a_bind_can_take_now_costs_one_write_for_answer_and_intent() -> None:
    store, channel = TableStore(), Channel()
    replier = Replier(store, ReplyRouter(channel), Metrics(), clock=lambda: 1.0)
    assert await answer(store, replier, "your balance is 42")
    await settle(replier)
    first = store.writes[0]
    assert len(first) == 1
    assert [e.kind for e in first[0].events] == [EventKind.OUTCOME, EventKind.REPLY_SENDING]
    # The handover recorded nothing more before writing: the next write is the submission.
    assert [[c.event.kind for c in w] for w in store.writes[1:]] == [[EventKind.REPLY_SUBMITTED]]
    assert channel.handovers == 1 and store.states[MO.id] is State.REPLIED
    assert store.timeline == [EventKind.OUTCOME, EventKind.REPLY_SENDING, EventKind.REPLY_SUBMITTED]


async def test_no_bind_at_the_answer_means_the_intent_waits_for_the_handover() -> None:
    store, channel = TableStore(), Channel()
    channel.up = False
    replier = Replier(store, ReplyRouter(channel), Metrics(), clock=lambda: 1.0)
    assert await answer(store, replier, "later")
    assert store.writes[0][0].then == () and store.states[MO.id] is State.ANSWERED
    await asyncio.sleep(0.05)
    channel.up = True
    await settle(replier)
    assert store.states[MO.id] is State.REPLIED and len(channel.sent) == 1
    assert store.timeline == [
        EventKind.OUTCOME,
        EventKind.REPLY_WAITING,
        EventKind.REPLY_SENDING,
        EventKind.REPLY_SUBMITTED,
    ]


async def test_a_handover_that_fails_after_the_recorded_intent_goes_back_to_answered_and_out_once() -> None:
    store, channel = TableStore(), Channel()
    channel.fail_before_writing = 1  # the bind drops between the answer and the submit_sm
    replier = Replier(store, ReplyRouter(channel), Metrics(), clock=lambda: 1.0)
    replier.validity_s = 30
    assert await answer(store, replier, "your balance is 42")
    await settle(replier)
    assert store.states[MO.id] is State.REPLIED and len(channel.sent) == 1
    kinds = store.timeline
    assert kinds[:3] == [EventKind.OUTCOME, EventKind.REPLY_SENDING, EventKind.REPLY_WAITING]
    assert kinds[-2:] == [EventKind.REPLY_SENDING, EventKind.REPLY_SUBMITTED]
    assert kinds.count(EventKind.REPLY_SENDING) == 2  # the second try recorded its own intent


async def test_an_answer_recorded_elsewhere_first_sends_nothing_here() -> None:
    store, channel = TableStore(), Channel()
    store.states[MO.id] = State.ANSWERED  # another worker recorded the answer
    replier = Replier(store, ReplyRouter(channel), Metrics(), clock=lambda: 1.0)
    assert not await answer(store, replier, "your balance is 42")
    await asyncio.sleep(0.05)
    assert channel.sent == [] and store.timeline == []
