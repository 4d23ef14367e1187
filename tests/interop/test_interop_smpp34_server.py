"""Interoperability with an SMSC that is not ours: the smpp34 package's asyncio server (Rust core).

Our bind connects and binds to it, it pushes MOs (with vendor TLVs, UCS-2 and SAR parts) and receives
our replies with the DLT TLVs; each side decodes the other's bytes with its own codec.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import smpp34

from mogateway.config.smpp import BindConfig
from mogateway.core.message import Arrival, Message, Sender
from mogateway.core.ports import Reply, Stored
from mogateway.core.timeline import State
from mogateway.edges.smpp.bind import EsmeBind
from mogateway.edges.smpp.inbound import InboundHandler
from mogateway.edges.smpp.replies import SmppReplyChannel


def reply_to(mid: str, shortcode: str, msisdn: str, text: str, origin: str, operator: str = "") -> Reply:
    """A reply of ``text`` to the MO ``mid`` that came from ``msisdn`` to ``shortcode`` over ``origin``."""
    sender = Sender(91, int(msisdn[2:6]), int(msisdn[6:]), operator)
    return Reply(Message(mid, shortcode, msisdn, "MO", 0.0, origin, sender=sender), text)


@dataclass
class RecordingIntake:
    stored: list[Arrival] = field(default_factory=list)

    async def accept(self, items: Sequence[Arrival]) -> list[Stored]:
        self.stored.extend(items)
        return [Stored(id=str(i), state=State.QUEUED, duplicate=False) for i, _ in enumerate(items)]


class NoJournal:
    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        return [None] * len(receipts)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Peer:
    server: smpp34.Server
    esme: Any
    bind: EsmeBind
    intake: RecordingIntake
    events: asyncio.Queue[Any]


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    port = free_port()
    server = smpp34.Server("127.0.0.1", port, system_id="smpp34")
    await server.start()
    events: asyncio.Queue[Any] = asyncio.Queue()
    cfg = BindConfig(
        name="peer",
        host="127.0.0.1",
        port=port,
        system_id="gw",
        password="pw",
        operator="jio",
        reply_tlvs={"0x1400": "1101234567890123456", "0x1401": "1107123456789012345"},
        split="sar",
    )
    intake = RecordingIntake()
    bind = EsmeBind(cfg, InboundHandler(cfg, intake, NoJournal(), part_ack_hold_s=0.2), backoff_initial_s=0.1)
    bind.start()
    esme = await asyncio.wait_for(server.next(), 10)
    assert isinstance(esme, smpp34.Esme) and esme.system_id == "gw"

    async def pump() -> None:
        while True:
            await events.put(await server.next())

    task = asyncio.create_task(pump())
    assert await bind.wait_bound(5)
    yield Peer(server, esme, bind, intake, events)
    await bind.stop()
    task.cancel()
    await server.stop()


async def test_mo_with_vendor_tlvs_from_smpp34(peer: Peer) -> None:
    resp = await peer.esme.deliver_sm(
        "56767",
        b"hello from smpp34",
        source_addr="919810012345",
        source_addr_ton=1,
        source_addr_npi=1,
        tlvs=[smpp34.Tlv(0x1400, b"vendor"), smpp34.Tlv(smpp34.TLV_RECEIPTED_MESSAGE_ID, b"smsc-77\x00")],
    )
    assert resp.is_success
    (arrival,) = peer.intake.stored
    mo = arrival.message
    assert (mo.msisdn, mo.shortcode, mo.text, arrival.operator) == (
        "919810012345",
        "56767",
        "hello from smpp34",
        "jio",
    )
    assert mo.source_id == "s:smsc-77"


async def test_long_ucs2_mo_in_sar_parts_from_smpp34(peer: Peer) -> None:
    text = "नमस्ते " * 20  # 140 UTF-16 units: 3 parts of at most 67
    data = text.encode("utf-16-be")
    chunks = [data[0:134], data[134:268], data[268:]]

    async def part(index: int) -> bool:
        tlvs = [
            smpp34.Tlv(smpp34.TLV_SAR_MSG_REF_NUM, (0x0102).to_bytes(2, "big")),
            smpp34.Tlv(smpp34.TLV_SAR_TOTAL_SEGMENTS, b"\x03"),
            smpp34.Tlv(smpp34.TLV_SAR_SEGMENT_SEQNUM, bytes([index + 1])),
        ]
        r = await peer.esme.deliver_sm(
            "56767", chunks[index], source_addr="919810012345", data_coding=8, tlvs=tlvs
        )
        return bool(r.is_success)

    results = await asyncio.gather(part(2), part(0), part(1))
    assert all(results)
    assert [a.message.text for a in peer.intake.stored] == [text]


async def test_reply_reaches_smpp34_with_dlt_tlvs(peer: Peer) -> None:
    channel = SmppReplyChannel({"peer": peer.bind})

    async def smsc_side() -> list[Any]:
        seen = []
        while len(seen) < 2:
            event = await asyncio.wait_for(peer.events.get(), 10)
            if isinstance(event, smpp34.SubmitSmEvent):
                seen.append(event)
                event.accept(f"sm34-{len(seen)}")
        return seen

    watcher = asyncio.create_task(smsc_side())
    submitted = await channel.send(reply_to("m1", "56767", "919810012345", "Z" * 200, "smpp:peer", "jio"))
    seen = await watcher
    assert submitted.refs == ["sm34-1", "sm34-2"]
    for number, event in enumerate(seen, start=1):
        tags = {t.tag: t.value for t in event.tlvs}
        assert tags[0x1400] == b"1101234567890123456" and tags[0x1401] == b"1107123456789012345"
        assert tags[smpp34.TLV_SAR_SEGMENT_SEQNUM] == bytes([number])
        assert event.destination_addr == "919810012345" and event.registered_delivery == 1
    assert b"".join(e.short_message for e in seen) == b"Z" * 200
