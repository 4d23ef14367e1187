"""A receipt may arrive before the dispatcher has recorded the reply's message id: it is not lost."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from mogateway.config.smpp import BindConfig
from mogateway.core.message import Message, Sender
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.edges.smpp.inbound import InboundHandler
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.smpp.constants import Status
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.receipt import format_receipt_text, receipt_tlvs


class NoIntake:
    async def accept(self, items: object) -> list[object]:
        raise AssertionError("a receipt must not reach the intake")


def receipt(message_id: str, stat: str = "DELIVRD") -> DeliverSm:
    now = datetime.now(UTC)
    return DeliverSm(
        source_addr="919812345678",
        destination_addr="56767",
        esm_class=0x04,
        short_message=format_receipt_text(message_id, stat, "000", now, now).encode(),
        tlvs=receipt_tlvs(message_id, stat),
    )


async def test_a_receipt_before_the_reply_is_recorded_is_matched_a_moment_later(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        await journal.store(
            [
                Message(
                    "m1",
                    "56767",
                    "919812345678",
                    "HI",
                    time.time(),
                    origin="smpp:b",
                    source_id="s1",
                    sender=Sender(91, 9812, 345678),
                )
            ]
        )
        answered = Event(EventKind.OUTCOME, time.time(), {"outcome": "reply"})
        await journal.apply([Change("m1", answered, reply_text="hello")])
        cfg = BindConfig.model_validate(
            {"name": "b", "host": "127.0.0.1", "port": 1, "system_id": "gw", "password": "pw"}
        )
        handler = InboundHandler(cfg, NoIntake(), journal)  # type: ignore[arg-type]
        answers: list[int] = []
        handler.begin(receipt("smsc-42"), answers.append)  # the receipt comes first...
        await asyncio.sleep(0.05)
        assert answers == [Status.ESME_ROK]
        event = Event(EventKind.REPLY_SUBMITTED, time.time(), {"channel": "smpp", "refs": ["smsc-42"]})
        await journal.apply([Change("m1", event, reply_refs=("smsc-42",))])  # ...then the id
        for _ in range(50):
            record = await journal.get("m1")
            assert record is not None
            if record.state is State.DELIVERED:
                break
            await asyncio.sleep(0.05)
        assert record.state is State.DELIVERED
        assert [e.kind for e in await journal.timeline("m1")][-1] is EventKind.DELIVERY
        assert handler.counters["receipts_unknown"] == 0
        await handler.close()
    finally:
        await journal.close()
