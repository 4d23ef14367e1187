"""The SMPP codec: exact bytes, precise errors, a framer that never crashes, and smpp34 agreeing."""

from __future__ import annotations

import pytest
import smpp34
from hypothesis import given
from hypothesis import strategies as st

from mogateway.smpp.constants import Status, TlvTag
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import (
    Bind,
    BindMode,
    BindResp,
    DeliverSm,
    DeliverSmResp,
    EnquireLink,
    EnquireLinkResp,
    GenericNack,
    PduError,
    SubmitSm,
    SubmitSmResp,
    Unbind,
    UnbindResp,
    decode,
    encode,
)
from mogateway.smpp.tlv import Tlv

# An enquire_link with sequence 7, byte for byte.
ENQUIRE_LINK_7 = bytes.fromhex("00000010 00000015 00000000 00000007")
# bind_transceiver (27 bytes): "gw", "pw", system_type "", version 0x34, ton 1, npi 1, range "".
BIND_TRX = bytes.fromhex("0000001B 00000009 00000000 00000001 677700 707700 00 34 01 01 00")


def test_enquire_link_fixture() -> None:
    assert encode(EnquireLink(sequence=7)) == ENQUIRE_LINK_7
    assert decode(ENQUIRE_LINK_7) == EnquireLink(sequence=7)


def test_bind_fixture_both_ways() -> None:
    pdu = Bind(mode=BindMode.TRANSCEIVER, system_id="gw", password="pw", addr_ton=1, addr_npi=1, sequence=1)
    assert encode(pdu) == BIND_TRX
    assert decode(BIND_TRX) == pdu


def test_bind_resp_error_without_body() -> None:
    raw = bytes.fromhex("00000010 80000009 0000000E 00000001")
    assert decode(raw) == BindResp(mode=BindMode.TRANSCEIVER, status=Status.ESME_RINVPASWD, sequence=1)


def test_submit_sm_resp_fixture() -> None:
    raw = bytes.fromhex("00000015 80000004 00000000 00000003 6162633100")
    assert decode(raw) == SubmitSmResp(message_id="abc1", sequence=3)
    assert encode(SubmitSmResp(message_id="abc1", sequence=3)) == raw


def test_deliver_sm_with_vendor_tlvs_keeps_them_in_order() -> None:
    tlvs = (
        Tlv(0x1401, b"1107123456789012345"),
        Tlv(TlvTag.SAR_MSG_REF_NUM, b"\x00\x2a"),
        Tlv(0x3FFF, b""),
        Tlv(0x1400, b"1101234567890123456"),
    )
    pdu = DeliverSm(source_addr="919812345678", destination_addr="56767", short_message=b"hi", tlvs=tlvs)
    back = decode(encode(pdu))
    assert back.tlvs == tlvs  # type: ignore[union-attr]
    assert [t.name for t in tlvs] == ["dlt_template_id", "sar_msg_ref_num", "0x3FFF", "dlt_pe_id"]
    assert tlvs[1].decoded() == 42


def test_tlv_typed_values() -> None:
    assert Tlv.of_str(TlvTag.RECEIPTED_MESSAGE_ID, "m-1").decoded() == "m-1"
    assert Tlv.of_int(TlvTag.SAR_TOTAL_SEGMENTS, 3).value == b"\x03"
    assert Tlv(TlvTag.MESSAGE_PAYLOAD, b"\x01\x02").decoded() == b"\x01\x02"
    with pytest.raises(ValueError):
        Tlv.of_int(0x1400, 1)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        # unknown command id 0x00000099
        (bytes.fromhex("00000010 00000099 00000000 00000005"), Status.ESME_RINVCMDID),
        # deliver_sm whose service_type has no NUL before the end
        (bytes.fromhex("00000014 00000005 00000000 00000005 41424344"), Status.ESME_RINVSERTYP),
        # deliver_sm cut off after source_addr_ton
        (bytes.fromhex("00000012 00000005 00000000 00000005 0001"), Status.ESME_RINVMSGLEN),
        # submit_sm_resp with an unterminated message id
        (bytes.fromhex("00000013 80000004 00000000 00000005 616263"), Status.ESME_RINVMSGID),
    ],
)
def test_precise_errors(raw: bytes, status: Status) -> None:
    with pytest.raises(PduError) as info:
        decode(raw)
    assert info.value.status == status
    assert info.value.sequence == 5
    assert not info.value.fatal


def test_sm_length_beyond_body_is_rinvmsglen() -> None:
    good = encode(DeliverSm(source_addr="1", destination_addr="2", short_message=b"hello"))
    bad = good[:-5] + b"hel"  # sm_length says 5, 3 present
    bad = len(bad).to_bytes(4, "big") + bad[4:]
    with pytest.raises(PduError) as info:
        decode(bad)
    assert info.value.status == Status.ESME_RINVMSGLEN


def test_truncated_tlv_is_optional_parameter_stream_error() -> None:
    good = encode(DeliverSm(source_addr="1", destination_addr="2", tlvs=(Tlv(0x1400, b"abcd"),)))
    bad = good[:-2]
    bad = len(bad).to_bytes(4, "big") + bad[4:]
    with pytest.raises(PduError) as info:
        decode(bad)
    assert info.value.status == Status.ESME_RINVOPTPARSTREAM


def test_encode_refuses_overlong_fields() -> None:
    with pytest.raises(ValueError, match="source_addr"):
        encode(SubmitSm(source_addr="1" * 21))
    with pytest.raises(ValueError, match="254"):
        encode(SubmitSm(short_message=b"x" * 255))


def test_framer_reassembles_chunks_and_skips_bad_pdus() -> None:
    stream = (
        ENQUIRE_LINK_7
        + bytes.fromhex("00000010 00000099 00000000 00000008")  # unknown id: error, then carry on
        + encode(DeliverSm(source_addr="919812345678", destination_addr="5676", short_message=b"x"))
        + encode(UnbindResp(sequence=9))
    )
    framer = Framer()
    out = []
    for i in range(0, len(stream), 3):
        out += framer.feed(stream[i : i + 3])
    assert out[0] == EnquireLink(sequence=7)
    assert isinstance(out[1], PduError) and out[1].status == Status.ESME_RINVCMDID and out[1].sequence == 8
    assert isinstance(out[2], DeliverSm)
    assert out[3] == UnbindResp(sequence=9)
    assert framer.buffered == 0


def test_framer_bad_length_is_fatal_once() -> None:
    framer = Framer(max_length=1000)
    out = framer.feed(bytes.fromhex("00000008 00000015 00000000 00000001"))
    assert len(out) == 1 and isinstance(out[0], PduError) and out[0].fatal
    assert out[0].status == Status.ESME_RINVCMDLEN
    assert framer.feed(ENQUIRE_LINK_7) == []
    assert Framer(max_length=1000).feed(bytes.fromhex("00100000 00000015 00000000 00000001"))[0].fatal  # type: ignore[union-attr]


@given(st.binary(max_size=400))
def test_framer_never_raises_on_garbage(data: bytes) -> None:
    framer = Framer()
    for item in framer.feed(data):
        assert isinstance(item, PduError) or item.command_id is not None


@given(st.binary(max_size=300))
def test_decode_never_raises_anything_but_pdu_error(data: bytes) -> None:
    body = (16 + len(data)).to_bytes(4, "big") + bytes.fromhex("00000005 00000000 00000001") + data
    try:
        decode(body)
    except PduError:
        pass


# ------------------------------------------------------------------------------- round trips

_cstr = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=5)
_addr = st.text(alphabet="0123456789+", max_size=20)
_byte = st.integers(0, 255)
_tlvs = st.lists(st.builds(Tlv, st.integers(0, 0xFFFF), st.binary(max_size=30)), max_size=5).map(tuple)


@st.composite
def short_messages(draw: st.DrawFn) -> SubmitSm | DeliverSm:
    cls = draw(st.sampled_from([SubmitSm, DeliverSm]))
    return cls(  # type: ignore[no-any-return]
        service_type=draw(_cstr),
        source_addr_ton=draw(_byte),
        source_addr_npi=draw(_byte),
        source_addr=draw(_addr),
        dest_addr_ton=draw(_byte),
        dest_addr_npi=draw(_byte),
        destination_addr=draw(_addr),
        esm_class=draw(_byte),
        protocol_id=draw(_byte),
        priority_flag=draw(_byte),
        registered_delivery=draw(_byte),
        data_coding=draw(_byte),
        short_message=draw(st.binary(max_size=254)),
        tlvs=draw(_tlvs),
        sequence=draw(st.integers(0, 0x7FFFFFFF)),
    )


@given(short_messages())
def test_short_message_round_trip(pdu: SubmitSm | DeliverSm) -> None:
    assert decode(encode(pdu)) == pdu


@given(short_messages())
def test_smpp34_reads_what_we_write(pdu: SubmitSm | DeliverSm) -> None:
    theirs = smpp34.decode(encode(pdu))
    assert theirs.sequence_number == pdu.sequence
    assert theirs.source_addr == pdu.source_addr  # type: ignore[union-attr]
    assert theirs.destination_addr == pdu.destination_addr  # type: ignore[union-attr]
    assert theirs.data_coding == pdu.data_coding  # type: ignore[union-attr]
    assert theirs.esm_class == pdu.esm_class  # type: ignore[union-attr]
    assert theirs.short_message == pdu.short_message  # type: ignore[union-attr]
    assert [(t.tag, t.value) for t in theirs.tlvs] == [(t.tag, t.value) for t in pdu.tlvs]  # type: ignore[union-attr]


@given(
    src=_addr,
    dst=_addr,
    message=st.binary(max_size=254),
    dc=_byte,
    esm=_byte,
    tlvs=st.lists(st.builds(smpp34.Tlv, st.integers(0x1400, 0x3FFF), st.binary(max_size=20)), max_size=4),
    seq=st.integers(1, 0x7FFFFFFF),
)
def test_we_read_what_smpp34_writes(
    src: str, dst: str, message: bytes, dc: int, esm: int, tlvs: list[smpp34.Tlv], seq: int
) -> None:
    raw = smpp34.DeliverSm(
        src, dst, message, data_coding=dc, esm_class=esm, tlvs=tlvs, sequence_number=seq
    ).encode()
    ours = decode(raw)
    assert isinstance(ours, DeliverSm)
    assert (ours.source_addr, ours.destination_addr, ours.short_message) == (src, dst, message)
    assert (ours.data_coding, ours.esm_class, ours.sequence) == (dc, esm, seq)
    assert [(t.tag, t.value) for t in ours.tlvs] == [(t.tag, t.value) for t in tlvs]
    assert encode(ours) == raw


@pytest.mark.parametrize(
    "pdu",
    [
        Unbind(sequence=1),
        UnbindResp(sequence=2),
        EnquireLinkResp(sequence=3),
        GenericNack(status=Status.ESME_RINVCMDID, sequence=4),
        DeliverSmResp(sequence=5),
        DeliverSmResp(status=Status.ESME_RX_T_APPN, sequence=6),
        BindResp(mode=BindMode.RECEIVER, system_id="smsc", tlvs=(Tlv(0x0210, b"\x34"),), sequence=7),
        Bind(mode=BindMode.TRANSMITTER, system_id="a", password="b", system_type="VMA", sequence=8),
    ],
)
def test_control_pdus_round_trip_and_smpp34_agrees_on_header(pdu: object) -> None:
    raw = encode(pdu)  # type: ignore[arg-type]
    assert decode(raw) == pdu
    theirs = smpp34.decode(raw)
    assert (theirs.command_id, theirs.sequence_number) == (pdu.command_id, pdu.sequence)  # type: ignore[attr-defined]
