"""The shortcuts taken for speed give exactly what the plain code gives.

- deliver_sm/submit_sm bodies read with ``find`` equal the field-by-field reading (and anything the
  shortcut declines still gets the precise error);
- ``with_sequence`` equals ``dataclasses.replace``;
- receipt fields found in the lower-cased text equal a case-insensitive search;
- the GSM-7 codec's table translations equal reading and writing one character at a time, and a
  reply is sent whole exactly when splitting it would give one part;
- the session's counted window equals counting the outstanding requests;
- a bind stores the MOs that arrive together with one intake call, answers each deliver_sm only after
  that call, and answers all of them ESME_RX_T_APPN when it fails;
- the simulator's burst keeps its window and reports every answer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hypothesis import given
from hypothesis import strategies as st

from mogateway.config.smpp import BindConfig
from mogateway.core.message import Arrival
from mogateway.core.ports import Stored
from mogateway.core.text import (
    GSM7_BASIC,
    GSM7_EXTENSION,
    TextEncodeError,
    gsm7_decode,
    gsm7_encode,
    split_text,
)
from mogateway.core.timeline import State
from mogateway.edges.smpp.bind import EsmeBind
from mogateway.edges.smpp.inbound import InboundHandler
from mogateway.smpp.constants import HEADER_LENGTH, CommandId, Status, TlvTag
from mogateway.smpp.fields import BodyReader
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import (
    Bind,
    BindMode,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    PduError,
    SubmitSm,
    SubmitSmResp,
    _ShortMessage,
    decode,
    encode,
    with_sequence,
)
from mogateway.smpp.receipt import _OUTCOMES, _STATE_WORDS, _field, _fields, parse_receipt
from mogateway.smpp.segments import _SIZES, choose_alphabet, plan_reply
from mogateway.smpp.session import ResponseReceived, ResponseTimedOut, Session
from mogateway.smpp.tlv import Tlv
from mogateway.testing.smsc import SimulatedSmsc

_cstr = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=8)
_addr = st.text(alphabet="0123456789+A", max_size=24)
_byte = st.integers(0, 255)


@st.composite
def short_messages(draw: st.DrawFn) -> SubmitSm | DeliverSm:
    cls = draw(st.sampled_from([SubmitSm, DeliverSm]))
    return cls(  # type: ignore[return-value]
        service_type=draw(_cstr.filter(lambda s: len(s) <= 5)),
        source_addr_ton=draw(_byte),
        source_addr=draw(_addr.filter(lambda s: len(s) <= 20)),
        destination_addr=draw(_addr.filter(lambda s: len(s) <= 20)),
        esm_class=draw(_byte),
        schedule_delivery_time=draw(st.sampled_from(["", "261120101010000+"])),
        registered_delivery=draw(_byte),
        data_coding=draw(_byte),
        short_message=draw(st.binary(max_size=254)),
        tlvs=tuple(draw(st.lists(st.builds(Tlv, st.integers(0, 0xFFFF), st.binary(max_size=8)), max_size=3))),
        sequence=draw(st.integers(0, 0x7FFFFFFF)),
    )


#: The command id of each body's PDU (read from the enum: a compiled class's ``COMMAND_ID`` is an
#: instance slot, not a class attribute).
_COMMAND_IDS = {SubmitSm: int(CommandId.SUBMIT_SM), DeliverSm: int(CommandId.DELIVER_SM)}


def _field_by_field(body: bytes, cls: type[_ShortMessage]) -> _ShortMessage | PduError:
    """What the plain reader makes of ``body``."""
    try:
        return cls._parse_fields(BodyReader(body, _COMMAND_IDS[cls], 9))
    except PduError as exc:
        return exc


def _shortcut(body: bytes, cls: type[_ShortMessage]) -> _ShortMessage | PduError | None:
    try:
        return cls._parse_well_formed(BodyReader(body, _COMMAND_IDS[cls], 9))
    except PduError as exc:  # only the TLV reader may raise
        return exc


@given(short_messages(), st.data())
def test_shortcut_reading_equals_field_by_field(pdu: SubmitSm | DeliverSm, data: st.DataObject) -> None:
    body = encode(pdu)[HEADER_LENGTH:]
    # the body as written, cut short, or with one byte changed (often a NUL that moves every field)
    cut = data.draw(st.integers(0, len(body)))
    at = data.draw(st.integers(0, max(0, len(body) - 1)))
    changed = body[:at] + bytes([data.draw(_byte)]) + body[at + 1 :] if body else body
    for candidate in (body, body[:cut], changed):
        fast = _shortcut(candidate, type(pdu))
        slow = _field_by_field(candidate, type(pdu))
        if fast is None:  # declined: the plain reader decides alone
            continue
        if isinstance(slow, PduError):
            assert isinstance(fast, PduError) and fast.status == slow.status
        else:
            assert fast == slow
    assert _shortcut(body, type(pdu)) == replace(pdu, sequence=9)  # a well-formed body is never declined


@given(st.binary(max_size=120))
def test_shortcut_never_accepts_what_the_plain_reader_refuses(body: bytes) -> None:
    fast = _shortcut(body, DeliverSm)
    slow = _field_by_field(body, DeliverSm)
    if fast is not None and not isinstance(fast, PduError):
        assert fast == slow


@given(short_messages(), st.integers(1, 0x7FFFFFFF))
def test_with_sequence_equals_replace(pdu: SubmitSm | DeliverSm, sequence: int) -> None:
    copy = with_sequence(pdu, sequence)
    assert copy == replace(pdu, sequence=sequence) and type(copy) is type(pdu)
    assert with_sequence(EnquireLink(sequence=1), sequence) == EnquireLink(sequence=sequence)


_REFERENCE = re.compile(r"(id|sub|dlvrd|submit date|done date|stat|err|text):", re.IGNORECASE)


def _reference_fields(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    matches = list(_REFERENCE.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=False):
        end = following.start() if following is not None else len(text)
        found.setdefault(match.group(1).lower(), text[match.end() : end].strip())
    return found


_receipt_words = st.sampled_from(["id:", "ID:", "stat:", "Stat:", "err:", "text:", "submit date:", " ", "İ"])


@given(st.lists(st.one_of(_receipt_words, st.text(max_size=6)), max_size=12).map("".join))
def test_receipt_fields_equal_a_case_insensitive_search(text: str) -> None:
    assert _fields(text) == _reference_fields(text)


@given(st.lists(st.one_of(_receipt_words, st.text(max_size=6)), max_size=12).map("".join))
def test_one_receipt_field_equals_reading_them_all(text: str) -> None:
    for name in ("id", "stat", "err"):
        assert _field(text, name) == _fields(text).get(name, "")


def _reference_receipt(pdu: DeliverSm) -> tuple[str, str, str, str | None] | None:
    """(id, stat, err, outcome) as parse_receipt read them from all the fields at once."""
    fields = _fields(pdu.short_message.decode("latin-1"))
    id_tlv, state_tlv = pdu.tlv(TlvTag.RECEIPTED_MESSAGE_ID), pdu.tlv(TlvTag.MESSAGE_STATE)
    message_id = id_tlv.as_str() if id_tlv is not None else fields.get("id", "")
    if not message_id:
        return None
    stat = fields.get("stat", "").upper()
    if state_tlv is not None and len(state_tlv.value) == 1:
        stat = _STATE_WORDS.get(state_tlv.as_int(), stat or "UNKNOWN")
    return message_id, stat, fields.get("err", ""), _OUTCOMES.get(stat)


_state_tlvs = st.one_of(
    st.none(),
    st.integers(0, 9).map(lambda n: Tlv(TlvTag.MESSAGE_STATE, bytes((n,)))),
    st.just(Tlv(TlvTag.MESSAGE_STATE, b"\x02\x02")),  # not one octet: the text decides
)


_id_tlvs = st.one_of(
    st.none(), st.sampled_from(["", "ab12"]).map(lambda v: Tlv.of_str(TlvTag.RECEIPTED_MESSAGE_ID, v))
)
_receipt_values = st.sampled_from(["DELIVRD", "undeliv", "000"])
_receipt_texts = st.lists(st.one_of(_receipt_words, _receipt_values, st.text(max_size=6)), max_size=12).map(
    "".join
)


@given(_receipt_texts, _id_tlvs, _state_tlvs)
def test_receipts_read_as_from_all_their_fields(text: str, id_tlv: Tlv | None, state_tlv: Tlv | None) -> None:
    tlvs = tuple(t for t in (id_tlv, state_tlv) if t is not None)
    pdu = DeliverSm(esm_class=0x04, short_message=text.encode("latin-1", "replace")[:254], tlvs=tlvs)
    receipt = parse_receipt(pdu)
    found = None if receipt is None else (receipt.message_id, receipt.stat, receipt.err, receipt.outcome)
    assert found == _reference_receipt(pdu)


def _reference_gsm7_encode(text: str) -> bytes:
    out = bytearray()
    for ch in text:
        if ch in GSM7_BASIC and ch != "\x1b":
            out.append(GSM7_BASIC.index(ch))
        elif ch in GSM7_EXTENSION:
            out += bytes((0x1B, GSM7_EXTENSION[ch]))
        else:
            raise TextEncodeError(f"{ch!r} is not in the GSM-7 alphabet")
    return bytes(out)


def _reference_gsm7_decode(data: bytes) -> str:
    back = {code: ch for ch, code in GSM7_EXTENSION.items()}
    out, escaped = [], False
    for octet in data:
        code = octet & 0x7F
        if escaped:
            escaped = False
            out.append(back.get(code) or (" " if code == 0x1B else GSM7_BASIC[code]))
        elif code == 0x1B:
            escaped = True
        else:
            out.append(GSM7_BASIC[code])
    return "".join(out)


_gsm7_and_others = st.text(
    st.sampled_from([*GSM7_BASIC, *GSM7_EXTENSION, "é", "ü", "अ", "😀", "\x00"]), max_size=60
)


@given(_gsm7_and_others)
def test_gsm7_encode_equals_one_character_at_a_time(text: str) -> None:
    def outcome(encode: Callable[[str], bytes]) -> bytes | str:
        try:
            return encode(text)
        except TextEncodeError as exc:
            return str(exc)

    assert outcome(gsm7_encode) == outcome(_reference_gsm7_encode)


@given(st.binary(max_size=60))
def test_gsm7_decode_equals_one_septet_at_a_time(data: bytes) -> None:
    assert gsm7_decode(data) == _reference_gsm7_decode(data)


@given(
    st.text(
        st.sampled_from([*GSM7_BASIC.replace("\x1b", ""), *GSM7_EXTENSION, "é", "अ", "😀"]), max_size=200
    ),
    st.sampled_from(["gsm7", "latin1", "ascii"]),
)
def test_a_reply_goes_whole_exactly_when_splitting_gives_one_part(text: str, default: str) -> None:
    alphabet = choose_alphabet(text, default)  # type: ignore[arg-type]
    one_part = len(split_text(text, alphabet, _SIZES[alphabet][0])) == 1
    segments = plan_reply(text, default=default, split="udh", reference=7)  # type: ignore[arg-type]
    assert (len(segments) == 1 and not segments[0].esm_class) == one_part


def test_counted_window_equals_outstanding_requests() -> None:
    session = Session(window=3, response_timeout_s=5, enquire_link_s=0)
    bind = session.bind(BindMode.TRANSCEIVER, "gw", "pw", now=0)
    session.receive(_bind_ok(bind.sequence), now=0)
    sent = [session.send(SubmitSm(destination_addr="1"), now=0) for _ in range(3)]
    assert session.in_flight == 3 and not session.window_open
    events = session.receive(SubmitSmResp(message_id="a", sequence=sent[0].sequence), now=1)
    assert isinstance(events[0], ResponseReceived) and session.in_flight == 2
    session.receive(SubmitSmResp(message_id="a", sequence=sent[0].sequence), now=1)  # late duplicate
    assert session.in_flight == 2
    assert all(isinstance(e, ResponseTimedOut) for e in session.poll(now=10)) and session.in_flight == 0
    session.send(SubmitSm(destination_addr="1"), now=10)
    assert session.in_flight == 1
    session.connection_lost()
    assert session.in_flight == 0


def _bind_ok(sequence: int) -> BindResp:
    return BindResp(mode=BindMode.TRANSCEIVER, system_id="smsc", sequence=sequence)


@dataclass
class CountingIntake:
    calls: list[int] = field(default_factory=list)
    fail: bool = False
    stored: list[Arrival] = field(default_factory=list)

    async def accept(self, items: Sequence[Arrival]) -> list[Stored]:
        self.calls.append(len(items))
        await asyncio.sleep(0.05)  # a commit takes time; nothing may be answered before it ends
        if self.fail:
            raise OSError("disk full")
        self.stored.extend(items)
        return [Stored(id=str(i), state=State.QUEUED, duplicate=False) for i, _ in enumerate(items)]


class NoJournal:
    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        return [None] * len(receipts)


async def _bound(intake: CountingIntake) -> tuple[SimulatedSmsc, EsmeBind, InboundHandler]:
    smsc = await SimulatedSmsc(system_id="gw", password="pw").start()
    cfg = BindConfig.model_validate(
        {"name": "b", "host": "127.0.0.1", "port": smsc.port, "system_id": "gw", "password": "pw"}
    )
    handler = InboundHandler(cfg, intake, NoJournal())
    bind = EsmeBind(cfg, handler, backoff_initial_s=0.05)
    bind.start()
    assert await bind.wait_bound(5)
    await smsc.wait_bound(5)
    return smsc, bind, handler


async def _close(smsc: SimulatedSmsc, bind: EsmeBind, handler: InboundHandler) -> None:
    await bind.stop()
    await handler.close()
    await smsc.stop()


async def test_mos_arriving_together_are_stored_with_one_intake_call() -> None:
    intake = CountingIntake()
    smsc, bind, handler = await _bound(intake)
    try:
        messages = [(f"91981001{i:04d}", "56767", f"vote {i}") for i in range(40)]
        results = await smsc.inject_burst(messages, window=40, timeout=10)
        assert [r.status for r in results] == [0] * 40
        assert sum(intake.calls) == 40 and len(intake.calls) < 10  # batched, not one call per MO
        assert sorted(a.message.msisdn for a in intake.stored) == sorted(m[0] for m in messages)
        # each deliver_sm_resp came after the commit of its batch (>= the 50 ms the intake takes)
        assert min(r.answered_at - r.sent_at for r in results) >= 0.045
        assert handler.counters["mo_stored"] == 40
    finally:
        await _close(smsc, bind, handler)


async def test_a_batch_that_cannot_be_stored_is_refused_temporarily() -> None:
    intake = CountingIntake(fail=True)
    smsc, bind, handler = await _bound(intake)
    try:
        messages = [(f"91981001{i:04d}", "56767", f"vote {i}") for i in range(10)]
        results = await smsc.inject_burst(messages, window=10, timeout=10)
        assert {r.status for r in results} == {Status.ESME_RX_T_APPN}
        assert bind.counters.deliver_sm_errors == 10
    finally:
        await _close(smsc, bind, handler)


async def test_burst_keeps_its_window() -> None:
    async with SimulatedSmsc() as smsc:
        reader, writer = await asyncio.open_connection("127.0.0.1", smsc.port)
        writer.write(encode(Bind(mode=BindMode.TRANSCEIVER, system_id="x", password="", sequence=1)))
        await smsc.wait_bound(5)
        burst = asyncio.create_task(
            smsc.inject_burst([(f"9198{i:08d}", "56767", "hi") for i in range(7)], window=3)
        )
        framer, seen = Framer(), list[DeliverSm]()
        while len(seen) < 7:
            await asyncio.sleep(0.05)
            data = await reader.read(65536)
            delivered = [p for p in framer.feed(data) if isinstance(p, DeliverSm)]
            assert 0 < len(delivered) <= 3  # never more than the window unanswered
            seen += delivered
            for pdu in delivered:
                writer.write(
                    encode(
                        DeliverSmResp(
                            status=0x45 if pdu.source_addr.endswith("3") else 0, sequence=pdu.sequence
                        )
                    )
                )
        results = await asyncio.wait_for(burst, 5)
        assert [r.status for r in results] == [0, 0, 0, 0x45, 0, 0, 0]
        assert [r.source for r in results] == [p.source_addr for p in seen]
        writer.close()


def test_decode_uses_the_shortcut_for_ordinary_pdus() -> None:
    pdu = DeliverSm(source_addr="919810012345", destination_addr="56767", short_message=b"hi", sequence=4)
    assert decode(encode(pdu)) == pdu
