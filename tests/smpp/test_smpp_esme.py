"""A real bind (EsmeBind + InboundHandler) against the simulator on 127.0.0.1, over real sockets.

The intake here is a small recording stand-in with the Intake.accept signature, so these tests pin the
bind's own behaviour (acks, joining, dedupe, reconnect); the end-to-end test uses the real gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from mogateway.config.smpp import BindConfig, SmppSettings
from mogateway.core.message import Arrival, Message, Sender
from mogateway.core.ports import Reply, ReplyError, Stored
from mogateway.core.repeats import content_digest, content_source_id, repeat_family
from mogateway.core.timeline import State
from mogateway.edges.smpp.bind import EsmeBind
from mogateway.edges.smpp.inbound import InboundHandler
from mogateway.edges.smpp.replies import SmppReplyChannel
from mogateway.smpp.constants import Status, TlvTag
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.tlv import Tlv, find_tlv
from mogateway.testing.smsc import SimulatedSmsc


def reply_to(mid: str, shortcode: str, msisdn: str, text: str, origin: str, operator: str = "") -> Reply:
    """A reply of ``text`` to the MO ``mid`` that came from ``msisdn`` to ``shortcode`` over ``origin``."""
    sender = Sender(91, int(msisdn[2:6]), int(msisdn[6:]), operator)
    return Reply(Message(mid, shortcode, msisdn, "MO", 0.0, origin, sender=sender), text)


@dataclass
class RecordingIntake:
    """Stores MOs in a list, deduplicating like the journal: on (origin, source id), and with a repeat
    window on (number, source id family) from any origin (at any age); can be made to fail."""

    stored: list[Arrival] = field(default_factory=list)
    arrived: list[Arrival] = field(default_factory=list)  # every arrival, duplicates too
    fail: bool = False
    seen: set[tuple[str, str | None]] = field(default_factory=set)

    async def accept(self, items: Sequence[Arrival]) -> list[Stored]:
        if self.fail:
            raise OSError("disk full")
        out = []
        self.arrived.extend(items)
        for arrival in items:
            m = arrival.message
            if arrival.repeat_window_s > 0:
                key: tuple[str, str | None] = (m.msisdn, repeat_family(m.source_id))
            else:
                key = (m.origin, m.source_id)
            duplicate = key in self.seen
            self.seen.add(key)
            if not duplicate:
                self.stored.append(arrival)
            state = State.REJECTED if arrival.problem else State.QUEUED
            out.append(Stored(id=str(len(self.stored)), state=state, duplicate=duplicate))
        return out


@dataclass
class RecordingJournal:
    deliveries: list[tuple[str, str, str]] = field(default_factory=list)
    calls: int = 0
    fail: bool = False

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        self.calls += 1
        if self.fail:
            raise OSError("disk full")
        self.deliveries.extend(receipts)
        return ["m1"] * len(receipts)


def config(port: int, **kw: Any) -> BindConfig:
    base: dict[str, Any] = {
        "name": "airtel-dl",
        "host": "127.0.0.1",
        "port": port,
        "system_id": "gw",
        "password": "pw",
        "operator": "airtel",
        "circle": "delhi",
        "enquire_link_s": 5,
        "reassembly_timeout_s": 3.0,
        "throughput": 1000,
    }
    return BindConfig(**{**base, **kw})


@dataclass
class Rig:
    smsc: SimulatedSmsc
    intake: RecordingIntake
    journal: RecordingJournal
    bind: EsmeBind
    handler: InboundHandler


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    smsc = await SimulatedSmsc(system_id="gw", password="pw").start()
    intake, journal = RecordingIntake(), RecordingJournal()
    cfg = config(smsc.port, reply_tlvs={"0x1400": "1101234567890123456", "0x1401": "1107123456789012345"})
    handler = InboundHandler(cfg, intake, journal, part_ack_hold_s=0.2)
    bind = EsmeBind(cfg, handler, backoff_initial_s=0.05, backoff_max_s=0.2)
    bind.start()
    assert await bind.wait_bound(5)
    yield Rig(smsc, intake, journal, bind, handler)
    await bind.stop()
    await handler.close()
    await smsc.stop()


async def test_single_mo_is_stored_before_ack(rig: Rig) -> None:
    statuses = await rig.smsc.inject_mo("919810012345", "56767", "HELP me")
    assert statuses == [0]
    (arrival,) = rig.intake.stored
    mo = arrival.message
    assert (mo.shortcode, mo.msisdn, mo.text) == ("56767", "919810012345", "HELP me")
    assert (mo.origin, arrival.operator, arrival.circle) == ("smpp:airtel-dl", "airtel", "delhi")
    assert mo.source_id and mo.source_id.startswith("c:")


async def test_national_ton_is_normalised(rig: Rig) -> None:
    await rig.smsc.inject_mo("9810012345", "56767", "hi", source_ton=2)
    assert rig.intake.stored[0].message.msisdn == "919810012345"


async def test_redelivery_is_one_message(rig: Rig) -> None:
    statuses = await rig.smsc.inject_mo("919810012345", "56767", "same", repeat=2)
    assert statuses == [0, 0]
    assert len(rig.intake.stored) == 1


async def test_every_mo_may_repeat_one_from_another_bind_and_is_named_by_content_without_an_smsc_id(
    rig: Rig,
) -> None:
    # The journal recognises a redelivery by (number, SMSC id or content digest) within the window,
    # over any bind (core.repeats.find_repeats): so the digest is the same over every bind, and the
    # source id is dated by when it was seen (it dates the message id).
    await rig.smsc.inject_mo("919810012345", "56767", "dated")
    await asyncio.sleep(0.01)
    await rig.smsc.inject_mo("919810012345", "56767", "dated")
    first, again = rig.intake.arrived
    assert first.repeat_window_s == again.repeat_window_s == rig.handler.config.dedupe_window_s == 600
    assert content_digest(first.message.source_id) == content_digest(again.message.source_id) is not None
    assert first.message.source_id == content_source_id(
        content_digest(first.message.source_id) or "", first.first_seen_ms or 0
    )
    assert first.first_seen_ms is not None and again.first_seen_ms is not None
    assert again.first_seen_ms > first.first_seen_ms
    assert len(rig.intake.stored) == 1

    async def arrival_over(cfg: BindConfig, *tlvs: Tlv) -> Arrival:
        intake = RecordingIntake()
        handler = InboundHandler(cfg, intake, RecordingJournal())
        pdu = DeliverSm(
            source_addr="919810012345", destination_addr="56767", short_message=b"dated", tlvs=tlvs
        )
        assert await handler(pdu) == Status.ESME_ROK
        await handler.close()
        return intake.arrived[0]

    cfg = rig.handler.config
    other_bind = await arrival_over(cfg.model_copy(update={"name": "airtel-dl-2", "system_id": "gw2"}))
    assert other_bind.message.origin == "smpp:airtel-dl-2"
    assert content_digest(other_bind.message.source_id) == content_digest(first.message.source_id)
    smsc_id = Tlv(TlvTag.RECEIPTED_MESSAGE_ID, b"7001\x00")
    named = await arrival_over(cfg, smsc_id)
    assert (named.message.source_id, named.first_seen_ms, named.repeat_window_s) == ("s:7001", None, 600)
    no_window = await arrival_over(cfg.model_copy(update={"dedupe_window_s": 0}))
    assert no_window.repeat_window_s == 0


async def test_storage_failure_answers_rx_t_appn(rig: Rig) -> None:
    rig.intake.fail = True
    assert await rig.smsc.inject_mo("919810012345", "56767", "x") == [Status.ESME_RX_T_APPN]
    rig.intake.fail = False
    assert await rig.smsc.inject_mo("919810012345", "56767", "x") == [0]
    assert len(rig.intake.stored) == 1


@pytest.mark.parametrize("split", ["udh", "sar"])
async def test_long_ucs2_mo_out_of_order_with_duplicate(rig: Rig, split: str) -> None:
    text = "नमस्ते दुनिया 😀 " * 12  # UCS-2, 4 parts, a surrogate pair per repetition
    statuses = await asyncio.wait_for(
        rig.smsc.inject_mo("919810012345", "56767", text, split=split, order=[2, 0, 0, 1, 3]),  # type: ignore[arg-type]
        10,
    )
    assert all(s == 0 for s in statuses)
    assert [a.message.text for a in rig.intake.stored] == [text]


async def test_incomplete_long_mo_is_delivered_after_timeout(rig: Rig) -> None:
    # This bind's parts wait 0.4 s instead of the rig's 3 s; the test polls for the stored MO.
    await rig.bind.stop()
    await rig.handler.close()
    cfg = rig.handler.config.model_copy(update={"reassembly_timeout_s": 0.4})
    handler = InboundHandler(cfg, rig.intake, rig.journal, part_ack_hold_s=0.2)
    bind = EsmeBind(cfg, handler, backoff_initial_s=0.05, backoff_max_s=0.2)
    bind.start()
    try:
        assert await bind.wait_bound(5)
        text = "a" * 400  # 3 GSM-7 parts
        started = asyncio.get_running_loop().time()
        await rig.smsc.inject_mo("919810012345", "56767", text, order=[0, 2])
        for _ in range(500):  # bounded: 5 s
            if rig.intake.stored:
                break
            await asyncio.sleep(0.01)
        assert asyncio.get_running_loop().time() - started >= 0.4  # not before the timeout
    finally:
        await bind.stop()
        await handler.close()
    (arrival,) = rig.intake.stored
    mo = arrival.message
    assert mo.text == "a" * (153 + 94)
    assert mo.notes == ("incomplete: 2 of 3 parts",)


async def test_binary_mo_recorded_as_hex(rig: Rig) -> None:
    client = rig.smsc.receivers()[0]
    from mogateway.smpp.pdu import DeliverSm

    await rig.smsc._deliver(
        client,
        DeliverSm(
            source_addr="919810012345", destination_addr="56767", data_coding=4, short_message=b"\x01\xff"
        ),
    )
    (arrival,) = rig.intake.stored
    assert arrival.message.text == "01ff" and "binary" in arrival.message.notes[0]


async def test_reply_goes_back_with_dlt_tlvs_and_receipt_is_recorded(rig: Rig) -> None:
    channel = SmppReplyChannel({"airtel-dl": rig.bind})
    reply = reply_to("m1", "56767", "919810012345", "Thanks! {ok} " + "x" * 200, "smpp:airtel-dl", "airtel")
    submitted = await channel.send(reply)
    assert submitted.parts == 2 and len(submitted.refs) == 2
    subs = await rig.smsc.wait_submits(2)
    for sub in subs:
        assert sub.pdu.source_addr == "56767" and sub.pdu.destination_addr == "919810012345"
        assert sub.pdu.registered_delivery == 1 and sub.pdu.esm_class & 0x40
        assert find_tlv(sub.pdu.tlvs, 0x1400).value == b"1101234567890123456"  # type: ignore[union-attr]
        assert find_tlv(sub.pdu.tlvs, 0x1401).value == b"1107123456789012345"  # type: ignore[union-attr]
    assert [s.message_id for s in subs] == submitted.refs
    for _ in range(50):
        if len(rig.journal.deliveries) == 2:
            break
        await asyncio.sleep(0.05)
    assert [(r, s) for r, s, _ in rig.journal.deliveries] == [(ref, "delivered") for ref in submitted.refs]


async def test_a_receipt_the_journal_cannot_record_is_asked_again_recorded_ones_are_acked(rig: Rig) -> None:
    channel = SmppReplyChannel({"airtel-dl": rig.bind})
    rig.journal.fail = True
    failing = await channel.send(reply_to("m1", "56767", "919810012345", "x" * 500, "smpp:airtel-dl"))
    for _ in range(100):
        if len(rig.smsc.receipt_answers) == failing.parts:
            break
        await asyncio.sleep(0.02)
    assert rig.smsc.receipt_answers == [Status.ESME_RX_T_APPN] * failing.parts  # the SMSC sends them again
    assert rig.journal.deliveries == [] and rig.handler.counters["receipts"] == 0

    rig.journal.fail = False
    calls_before = rig.journal.calls
    submitted = await channel.send(reply_to("m2", "56767", "919810012345", "y" * 900, "smpp:airtel-dl"))
    for _ in range(100):
        if len(rig.journal.deliveries) == submitted.parts:
            break
        await asyncio.sleep(0.02)
    assert sorted(r for r, _, _ in rig.journal.deliveries) == sorted(submitted.refs)
    assert rig.smsc.receipt_answers[failing.parts :] == [Status.ESME_ROK] * submitted.parts
    assert rig.handler.counters["receipts"] == submitted.parts
    assert rig.journal.calls > calls_before


async def test_reply_ucs2_and_throttle_retry(rig: Rig) -> None:
    rig.smsc.refuse_next = [Status.ESME_RTHROTTLED, Status.ESME_RMSGQFUL]
    channel = SmppReplyChannel({"airtel-dl": rig.bind}, backoff_initial_s=0.01)
    submitted = await channel.send(reply_to("m2", "56767", "919810012345", "धन्यवाद", "smpp:airtel-dl", ""))
    assert submitted.parts == 1
    (sub,) = await rig.smsc.wait_submits(1)
    assert sub.pdu.data_coding == 8 and sub.pdu.short_message == "धन्यवाद".encode("utf-16-be")


async def test_reply_refused_is_not_retryable(rig: Rig) -> None:
    rig.smsc.refuse_next = [Status.ESME_RINVDSTADR]
    channel = SmppReplyChannel({"airtel-dl": rig.bind})
    with pytest.raises(ReplyError) as info:
        await channel.send(reply_to("m3", "56767", "919810012345", "hi", "smpp:airtel-dl", ""))
    assert not info.value.retryable and "ESME_RINVDSTADR" in info.value.detail


async def test_garbage_gets_generic_nack_and_bind_survives(rig: Rig) -> None:
    await rig.smsc.send_raw(bytes.fromhex("00000010 00000099 00000000 00000042"))
    assert await rig.smsc.inject_mo("919810012345", "56767", "still here") == [0]
    assert rig.bind.is_bound


async def test_reconnects_after_the_smsc_drops_and_others_are_unaffected() -> None:
    smsc = await SimulatedSmsc().start()
    intake, journal = RecordingIntake(), RecordingJournal()
    good = EsmeBind(
        config(smsc.port), InboundHandler(config(smsc.port), intake, journal), backoff_initial_s=0.05
    )
    dead_cfg = config(1, name="dead")  # nothing listens on port 1
    dead = EsmeBind(dead_cfg, InboundHandler(dead_cfg, intake, journal), backoff_initial_s=0.05)
    good.start()
    dead.start()
    try:
        assert await good.wait_bound(5)
        for client in list(smsc.clients):
            client.writer.close()
        for _ in range(100):  # bound again on a second connection (bounded: 5 s)
            if good.counters.connects >= 2 and good.is_bound:
                break
            await asyncio.sleep(0.05)
        assert good.counters.connects >= 2 and good.is_bound
        assert not dead.is_bound and dead.last_error
        assert await smsc.inject_mo("919810012345", "56767", "after reconnect") == [0]
    finally:
        await good.stop()
        await dead.stop()
        await smsc.stop()


async def test_bad_password_is_refused_and_retried() -> None:
    smsc = await SimulatedSmsc(system_id="gw", password="right").start()
    cfg = config(smsc.port, password="wrong")
    bind = EsmeBind(cfg, InboundHandler(cfg, RecordingIntake(), RecordingJournal()), backoff_initial_s=0.05)
    bind.start()
    try:
        for _ in range(100):
            if bind.counters.bind_failures >= 2:
                break
            await asyncio.sleep(0.02)
        assert bind.counters.bind_failures >= 2 and "ESME_RBINDFAIL" in bind.last_error
        assert "wrong" not in str(bind.status())
    finally:
        await bind.stop()
        await smsc.stop()


def test_settings_model() -> None:
    settings = SmppSettings.model_validate(
        {
            "binds": [
                {"name": "a", "host": "h", "system_id": "s", "password": "p", "reply_tlvs": {"0x1400": "1"}}
            ]
        }
    )
    assert settings.binds[0].reply_tlv_list()[0].tag == 0x1400
    with pytest.raises(ValueError):
        SmppSettings.model_validate(
            {"binds": [{"name": "a", "host": "h", "system_id": "s", "password": "123456789"}]}
        )
    with pytest.raises(ValueError):
        SmppSettings.model_validate(
            {
                "binds": [
                    {"name": "a", "host": "h", "system_id": "s"},
                    {"name": "a", "host": "h", "system_id": "s"},
                ]
            }
        )
    assert TlvTag.DLT_PE_ID == 0x1400
