"""The simulator's store and forward (``SimulatedSmsc.queue_mo``), as a real SMSC behaves across an ESME's
crash: a deliver_sm left unanswered when the connection drops is delivered again, with the same content,
after the next bind; one answered ESME_ROK never again; one answered with an error again after a delay;
never more unanswered at once than the window. And what the crash campaign (bench/chaos.py) uses to
land its kills: a submit_sm answered late, a stall, an enquire_link on demand, a small receive buffer.

The ESME here is written by hand on the gateway's codec so that a test decides exactly which deliver_sm
it answers, with what, and when it drops the connection (as a SIGKILLed gateway does).
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import termios
from collections.abc import AsyncIterator

import pytest

from mogateway.smpp.constants import Status
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import (
    Bind,
    BindMode,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    Pdu,
    PduError,
    SubmitSm,
    Unbind,
    encode,
)
from mogateway.testing.smsc import SimulatedSmsc


class HandEsme:
    """One connection to the simulator; every deliver_sm it reads waits in :attr:`inbox` for a verdict."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.framer = Framer()
        self.inbox: asyncio.Queue[Pdu] = asyncio.Queue()
        self._reading = asyncio.create_task(self._read())

    @classmethod
    async def bind(cls, smsc: SimulatedSmsc, system_id: str = "gw") -> HandEsme:
        reader, writer = await asyncio.open_connection("127.0.0.1", smsc.port)
        esme = cls(reader, writer)
        esme.send(Bind(mode=BindMode.TRANSCEIVER, system_id=system_id, password="pw", sequence=1))
        answer = await esme.next()
        assert isinstance(answer, BindResp) and answer.status == Status.ESME_ROK
        return esme

    async def _read(self) -> None:
        while data := await self.reader.read(65536):
            for item in self.framer.feed(data):
                assert not isinstance(item, PduError), item
                await self.inbox.put(item)

    def send(self, pdu: Pdu) -> None:
        self.writer.write(encode(pdu))

    async def next(self, timeout: float = 5.0) -> Pdu:
        return await asyncio.wait_for(self.inbox.get(), timeout)

    async def deliveries(self, count: int, timeout: float = 5.0) -> list[DeliverSm]:
        out = []
        for _ in range(count):
            pdu = await self.next(timeout)
            assert isinstance(pdu, DeliverSm), pdu
            out.append(pdu)
        return out

    async def nothing_more(self, wait: float = 0.3) -> None:
        with pytest.raises(TimeoutError):
            await self.next(wait)

    def answer(self, pdu: DeliverSm, status: int = Status.ESME_ROK) -> None:
        self.send(DeliverSmResp(status=status, sequence=pdu.sequence))

    async def drop(self) -> None:
        """Close the socket without unbinding, like a process that was killed."""
        self.writer.close()
        self._reading.cancel()
        await asyncio.gather(self._reading, return_exceptions=True)


@pytest.fixture
async def smsc() -> AsyncIterator[SimulatedSmsc]:
    async with SimulatedSmsc(system_id="gw", password="pw", outbox_window=3, retry_delay_s=0.2) as sim:
        yield sim


def content(pdu: DeliverSm) -> tuple[str, str, int, bytes, tuple[object, ...], int]:
    return (
        pdu.source_addr,
        pdu.destination_addr,
        pdu.data_coding,
        pdu.short_message,
        pdu.tlvs,
        pdu.esm_class,
    )


async def until(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def _unread(smsc: SimulatedSmsc) -> int:
    """Bytes that arrived on the SMSC's connections and were not read yet (the kernel's count)."""
    unread = 0
    for client in smsc.clients:
        sock = client.writer.get_extra_info("socket")
        unread += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    return unread


async def test_an_acknowledged_mo_is_never_sent_again(smsc: SimulatedSmsc) -> None:
    mo = smsc.queue_mo("919810012345", "56767", "HELLO 1")
    esme = await HandEsme.bind(smsc)
    (pdu,) = await esme.deliveries(1)
    assert pdu.short_message == b"HELLO 1" and pdu.tlvs == ()  # no SMSC message id: content is all
    esme.answer(pdu)
    await until(lambda: mo.acknowledged)
    await esme.drop()
    again = await HandEsme.bind(smsc)
    await again.nothing_more()
    assert (mo.attempts, mo.statuses, mo.dropped) == (1, [0], 0)
    assert smsc.outbox_size() == 0
    await again.drop()


async def test_an_mo_unanswered_when_the_connection_drops_is_redelivered_after_the_next_bind(
    smsc: SimulatedSmsc,
) -> None:
    first, second = (
        smsc.queue_mo("919810012345", "56767", "ONE"),
        smsc.queue_mo("919810012346", "56767", "TWO"),
    )
    esme = await HandEsme.bind(smsc)
    one, two = await esme.deliveries(2)
    esme.answer(one)  # ...and the ESME dies before answering the second
    await until(lambda: first.acknowledged)
    await esme.drop()
    await until(lambda: second.dropped == 1)
    assert smsc.outbox_size() == 1

    again = await HandEsme.bind(smsc)
    (redelivered,) = await again.deliveries(1)
    assert content(redelivered) == content(two)
    again.answer(redelivered)
    await until(lambda: second.acknowledged)
    await again.nothing_more()
    assert (first.attempts, second.attempts) == (1, 2)
    assert second.statuses == [0]
    await again.drop()


async def test_an_mo_answered_with_an_error_is_delivered_again_later(smsc: SimulatedSmsc) -> None:
    mo = smsc.queue_mo("919810012345", "56767", "RETRY")
    esme = await HandEsme.bind(smsc)
    (pdu,) = await esme.deliveries(1)
    esme.answer(pdu, Status.ESME_RX_T_APPN)
    (again,) = await esme.deliveries(1, timeout=2)  # after retry_delay_s (0.2 s)
    assert content(again) == content(pdu) and again.sequence != pdu.sequence
    esme.answer(again)
    await until(lambda: mo.acknowledged)
    assert mo.statuses == [Status.ESME_RX_T_APPN, Status.ESME_ROK] and mo.attempts == 2
    await esme.drop()


async def test_never_more_unanswered_than_the_window_and_order_is_kept(smsc: SimulatedSmsc) -> None:
    mos = [smsc.queue_mo(f"91981001234{i}", "56767", f"MO {i}") for i in range(7)]
    esme = await HandEsme.bind(smsc)
    seen: list[bytes] = []
    for _ in range(2):  # window 3: three arrive, then nothing until they are answered
        batch = await esme.deliveries(3)
        await esme.nothing_more(0.2)
        assert [m.text for m in smsc.unanswered()] == [p.short_message.decode() for p in batch]
        seen.extend(p.short_message for p in batch)
        for pdu in batch:
            esme.answer(pdu)
    (last,) = await esme.deliveries(1)
    esme.answer(last)
    seen.append(last.short_message)
    assert seen == [f"MO {i}".encode() for i in range(7)]
    await until(lambda: all(m.acknowledged for m in mos))
    await smsc.wait_outbox_empty(2)
    await esme.drop()


async def test_mos_queued_while_nobody_is_bound_wait_for_the_right_system_id(smsc: SimulatedSmsc) -> None:
    mo = smsc.queue_mo("919810012345", "56767", "FOR GW")
    assert mo.system_id == "gw"
    other = SimulatedSmsc(system_id=None)  # accepts any system_id, so the MO must name its own
    with pytest.raises(ValueError):
        other.queue_mo("919810012345", "56767", "WHOSE")
    esme = await HandEsme.bind(smsc)
    (pdu,) = await esme.deliveries(1)
    esme.answer(pdu)
    await until(lambda: mo.acknowledged)
    await esme.drop()


async def test_an_unbinding_esme_hands_back_what_it_did_not_answer(smsc: SimulatedSmsc) -> None:
    mo = smsc.queue_mo("919810012345", "56767", "UNBIND")
    esme = await HandEsme.bind(smsc)
    (pdu,) = await esme.deliveries(1)
    esme.send(Unbind(sequence=9))
    await until(lambda: mo.dropped == 1)
    esme.answer(pdu)  # too late: it is already waiting for the next bind
    await esme.drop()
    again = await HandEsme.bind(smsc)
    (redelivered,) = await again.deliveries(1)
    assert content(redelivered) == content(pdu)
    again.answer(redelivered)
    await until(lambda: mo.acknowledged)
    assert mo.statuses == [0] and mo.attempts == 2
    await again.drop()


async def test_replies_are_still_recorded_and_the_old_injection_is_unchanged(smsc: SimulatedSmsc) -> None:
    esme = await HandEsme.bind(smsc)
    esme.send(SubmitSm(source_addr="56767", destination_addr="919810012345", short_message=b"hi", sequence=5))
    await smsc.wait_submits(1, timeout=5)
    injected = asyncio.create_task(smsc.inject_mo("919810012345", "56767", "DIRECT"))
    resp = await esme.next()  # the submit_sm_resp
    assert resp.sequence == 5
    (pdu,) = await esme.deliveries(1)
    esme.answer(pdu)
    assert await injected == [0]
    assert smsc.stored == []  # injection bypasses the outbox
    await esme.drop()


async def test_a_slow_smsc_records_a_submit_at_once_and_answers_it_later() -> None:
    async with SimulatedSmsc(system_id="gw", password="pw", submit_delay_s=0.3) as smsc:
        esme = await HandEsme.bind(smsc)
        esme.send(
            SubmitSm(source_addr="56767", destination_addr="919810012345", short_message=b"a", sequence=7)
        )
        await smsc.wait_submits(1, timeout=5)
        assert smsc.unanswered_submits() == 1
        await esme.nothing_more(0.1)  # no submit_sm_resp yet
        resp = await esme.next(2)
        assert resp.sequence == 7 and resp.status == Status.ESME_ROK
        assert smsc.unanswered_submits() == 0
        # One whose ESME dies before the answer stays received (the handset gets it) but unanswered.
        esme.send(
            SubmitSm(source_addr="56767", destination_addr="919810012346", short_message=b"b", sequence=8)
        )
        await smsc.wait_submits(2, timeout=5)
        await esme.drop()
        await until(lambda: smsc.unanswered_submits() == 0)
        assert [s.pdu.short_message for s in smsc.submits] == [b"a", b"b"]


async def test_a_stalled_smsc_reads_no_answer_until_it_resumes(smsc: SimulatedSmsc) -> None:
    mo = smsc.queue_mo("919810012345", "56767", "STALL")
    esme = await HandEsme.bind(smsc)
    (pdu,) = await esme.deliveries(1)
    smsc.pause_reading()
    esme.answer(pdu)
    answer = len(encode(DeliverSmResp(status=Status.ESME_ROK, sequence=pdu.sequence)))
    await until(lambda: _unread(smsc) == answer)  # it has arrived, and waits in the SMSC's socket
    # A bind on a new connection, answered: the SMSC has since been reading (what it has not paused),
    # so it would have read the answer by now too.
    other = await HandEsme.bind(smsc)
    assert _unread(smsc) == answer
    assert not mo.acknowledged and smsc.unanswered() == [mo]
    smsc.resume_reading()
    await until(lambda: mo.acknowledged)
    assert smsc.unanswered() == []
    await esme.drop()
    await other.drop()


async def test_ping_sends_an_enquire_link_to_every_bound_esme(smsc: SimulatedSmsc) -> None:
    esme = await HandEsme.bind(smsc)
    smsc.ping()
    assert isinstance(await esme.next(), EnquireLink)
    await esme.drop()


async def test_a_small_receive_buffer_is_what_connections_get() -> None:
    async with SimulatedSmsc(system_id="gw", password="pw", receive_buffer=4096) as smsc:
        esme = await HandEsme.bind(smsc)
        (client,) = smsc.clients
        sock = client.writer.get_extra_info("socket")
        # Linux doubles the value asked for (bookkeeping); the default is far larger.
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) <= 2 * 4096
        await esme.drop()
