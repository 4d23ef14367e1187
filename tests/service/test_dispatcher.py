"""The dispatcher on its own, with real parts: the local queue, a SQLite journal in a temporary directory,
a recording callback application on 127.0.0.1 reached by the gateway's own HTTP client, and the log reply
channel. What it promises (service/dispatcher.py): every MO gets one recorded outcome before its reply
goes out; an MO whose outcome is already recorded is never called again; a slow application holds only
its own lane (at most ``max_concurrency`` callbacks); stopping leaves what was cut off unfinished."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message, Sender, message_id
from mogateway.core.ports import MessageRecord
from mogateway.core.timeline import FINAL_STATES, EventKind, State
from mogateway.edges.http1 import Http1Client
from mogateway.edges.queue.local import LocalQueue
from mogateway.edges.replies import LogReplyChannel
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.dispatcher import Dispatcher
from mogateway.service.metrics import Metrics
from mogateway.service.registry import Registry
from mogateway.service.replier import Replier, ReplyRouter
from mogateway.testing.recorder import Answer, CallbackRecorder

SC = "56767"
SENDER = Sender(91, 9812, 345678, "Airtel", "Delhi")
TOKEN = "token-for-the-dispatcher-tests-0123"


@dataclass
class Parts:
    journal: SqliteJournal
    queue: LocalQueue
    registry: Registry
    dispatcher: Dispatcher
    app: CallbackRecorder

    async def client(self, **fields: object) -> ClientRecord:
        record = ClientRecord("c1", "app", [SC], [], self.app.url, token=TOKEN, **fields)  # type: ignore[arg-type]
        return await self.registry.add(record)

    async def push(
        self, text: str = "BAL", shortcode: str = SC, *, queued: bool = True, sender: Sender | None = SENDER
    ) -> Message:
        """Store an MO as intake does, and (``queued``) put it on the queue."""
        now = time.time()
        new_id = message_id(int(now * 1000), os.urandom(10))
        mo = Message(new_id, shortcode, "919812345678", text, now, sender=sender)
        await self.journal.store([mo])
        if queued:
            await self.queue.put([mo])
        return mo

    async def settled(self, mo: Message, timeout: float = 10.0) -> MessageRecord:
        """Poll the journal until the MO is final and its queue entry acknowledged (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            record = await self.journal.get(mo.id)
            assert record is not None
            if record.state in FINAL_STATES and not self.queue.holds(mo.id):
                return record
            assert time.monotonic() < deadline, f"{mo.id} still {record.state}"
            await asyncio.sleep(0.01)


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    journal = SqliteJournal(tmp_path / "journal.db")
    await journal.open()
    registry = Registry(journal)
    await registry.load()
    queue = LocalQueue()
    metrics = Metrics()
    http = Http1Client(allow_private=True)
    replier = Replier(journal, ReplyRouter(LogReplyChannel()), metrics, clients=registry.get)
    dispatcher = Dispatcher(
        queue=queue,
        store=journal,
        registry=registry,
        replier=replier,
        client=http,
        metrics=metrics,
        max_inflight=20,
        allow_private=True,
    )
    async with CallbackRecorder(Answer.text("Your balance is Rs 42")) as app:
        dispatcher.start()
        try:
            yield Parts(journal, queue, registry, dispatcher, app)
        finally:
            await dispatcher.stop(drain_s=0)
            await replier.stop(drain_s=0)
            await http.close()
    await journal.close()


async def test_an_answer_is_recorded_and_its_reply_handed_over(parts: Parts) -> None:
    client = await parts.client()
    mo = await parts.push("BAL")
    record = await parts.settled(mo)
    assert (record.state, record.client_id) == (State.REPLIED, client.id)
    assert record.reply_text == "Your balance is Rs 42"
    (call,) = parts.app.calls
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.headers["x-mogateway-message-id"] == mo.id
    assert (call.json()["message"], call.json()["msisdn"]) == ("BAL", 919812345678)
    _, events = await parts.journal.history(mo.id)  # type: ignore[misc]
    kinds = [event.kind for event in events]
    assert kinds[-2:] == [EventKind.OUTCOME, EventKind.REPLY_SUBMITTED]  # the outcome before the reply


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        (Answer.blank(), State.NO_REPLY),
        (Answer.with_status(500), State.HTTP_ERROR),
        (Answer.text("x", content_type="application/json"), State.BAD_RESPONSE),
        (Answer.late(3.0), State.TIMED_OUT),
    ],
)
async def test_each_kind_of_answer_ends_in_its_state(parts: Parts, answer: Answer, state: State) -> None:
    parts.app.answer = answer
    await parts.client(timeout_s=0.5)
    record = await parts.settled(await parts.push())
    assert record.state is state and record.reply_text is None


async def test_an_mo_nobody_takes_is_unroutable_without_a_callback(parts: Parts) -> None:
    await parts.client()
    record = await parts.settled(await parts.push(shortcode="56999"))
    assert record.state is State.UNROUTABLE and parts.app.calls == []


async def test_a_redelivered_mo_with_a_recorded_outcome_is_not_called_again(parts: Parts) -> None:
    await parts.client()
    mo = await parts.push()
    await parts.settled(mo)
    await parts.queue.put([mo], redelivered=True)  # as a sweep or a restart would
    record = await parts.settled(mo)  # acknowledged again, after looking at the journal
    assert record.state is State.REPLIED and len(parts.app.calls) == 1


async def test_a_redelivered_mo_still_queued_is_called_once(parts: Parts) -> None:
    await parts.client()
    mo = await parts.push(queued=False)  # stored by a node that died before calling back
    await parts.queue.put([mo], redelivered=True)
    record = await parts.settled(mo)
    assert record.state is State.REPLIED and len(parts.app.calls) == 1
    _, events = await parts.journal.history(mo.id)  # type: ignore[misc]
    assert EventKind.RECOVERED in [event.kind for event in events]


async def test_a_lane_never_has_more_callbacks_in_flight_than_its_client_allows(parts: Parts) -> None:
    parts.app.answer = Answer.late(0.2, "ok")
    await parts.client(max_concurrency=2)
    mos = [await parts.push(f"BAL {n}") for n in range(6)]
    most = 0
    deadline = time.monotonic() + 10
    while not all(not parts.queue.holds(mo.id) for mo in mos):
        most = max(most, sum(parts.dispatcher.inflight().values()))
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)
    assert most == 2
    assert [(await parts.settled(mo)).state for mo in mos] == [State.REPLIED] * 6


async def test_stopping_leaves_a_cut_off_callback_unfinished(parts: Parts) -> None:
    parts.app.answer = Answer.late(30.0)
    await parts.client(timeout_s=60)
    mo = await parts.push()
    await parts.app.until_calls(1)
    await parts.dispatcher.stop(drain_s=0)
    record = await parts.journal.get(mo.id)
    assert record is not None and record.state is State.QUEUED  # dispatched again at the next start


async def test_an_mo_it_cannot_call_back_for_is_recorded_failed_not_left_queued(parts: Parts) -> None:
    await parts.client()
    record = await parts.settled(await parts.push(sender=None))  # no sender: a bug upstream
    assert record.state is State.FAILED and parts.app.calls == []
    _, events = await parts.journal.history(record.id)  # type: ignore[misc]
    assert events[-1].data["detail"].startswith("gateway error: ValueError")
