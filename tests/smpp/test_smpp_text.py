"""GSM-7, Latin-1 and UCS-2 bytes, data_coding meanings, splitting replies and joining long MO."""

from __future__ import annotations

import gsm0338  # noqa: F401 - registers the "gsm03.38" codec used as an independent reference
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.reassembly import PartInfo, Reassembler, parse_udh
from mogateway.core.text import (
    GSM7_BASIC,
    GSM7_EXTENSION,
    TextEncodeError,
    count_parts,
    decode_short_message,
    gsm7_decode,
    gsm7_encode,
    split_text,
    ucs2_decode,
    ucs2_encode,
)
from mogateway.smpp.constants import TlvTag
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.segments import ESM_UDHI, choose_alphabet, join_segments, mo_part, plan_reply
from mogateway.smpp.tlv import Tlv

GSM7_CHARS = [c for c in GSM7_BASIC if c != "\x1b"] + list(GSM7_EXTENSION)
gsm_text = st.text(alphabet=st.sampled_from(GSM7_CHARS), max_size=600)
any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


def test_gsm7_fixture_and_escape() -> None:
    assert gsm7_encode("A{€}") == bytes([0x41, 0x1B, 0x28, 0x1B, 0x65, 0x1B, 0x29])
    assert gsm7_decode(bytes([0x00, 0x02, 0x1B, 0x14])) == "@$^"
    with pytest.raises(TextEncodeError):
        gsm7_encode("नमस्ते")


def test_gsm7_decode_is_forgiving() -> None:
    assert gsm7_decode(bytes([0x1B, 0x41])) == "A"  # unknown escape → basic character
    assert gsm7_decode(bytes([0x41, 0x1B])) == "A"  # trailing ESC dropped
    assert gsm7_decode(bytes([0xC1])) == "A"  # top bit ignored


@given(gsm_text)
def test_gsm7_round_trip_and_agrees_with_gsm0338(text: str) -> None:
    data = gsm7_encode(text)
    assert gsm7_decode(data) == text
    assert data == text.encode("gsm03.38")
    assert len(data) == count_parts(text).units


@given(any_text)
def test_ucs2_round_trip_with_surrogates(text: str) -> None:
    assert ucs2_decode(ucs2_encode(text)) == text


def test_ucs2_surrogate_pair_and_odd_length() -> None:
    assert ucs2_encode("😀") == b"\xd8\x3d\xde\x00"
    assert ucs2_decode(b"\x00A\x00") == "A\ufffd"


@pytest.mark.parametrize(
    ("dc", "default", "data", "text", "binary"),
    [
        (0x00, "gsm7", bytes([0x00, 0x41]), "@A", False),
        (0x00, "latin1", b"caf\xe9", "café", False),
        (0x00, "ascii", b"hi", "hi", False),
        (0x01, "gsm7", b"hi", "hi", False),
        (0x03, "gsm7", b"\xe9", "é", False),
        (0x08, "gsm7", "नमस्ते".encode("utf-16-be"), "नमस्ते", False),
        (0x04, "gsm7", b"\x01\xab", "01ab", True),
        (0x02, "gsm7", b"\xff", "ff", True),
        (0xF0, "latin1", bytes([0x41]), "A", False),  # class 0 flash, GSM-7
        (0xF4, "gsm7", b"\x01", "01", True),  # class 0, 8-bit data
        (0x18, "gsm7", "ह".encode("utf-16-be"), "ह", False),  # general group, UCS-2
        (0x24, "gsm7", b"\x01", "01", True),  # compressed
    ],
)
def test_data_coding_meanings(dc: int, default: str, data: bytes, text: str, binary: bool) -> None:
    decoded = decode_short_message(data, dc, default)  # type: ignore[arg-type]
    assert (decoded.text, decoded.binary) == (text, binary)


def test_split_text_never_cuts_escape_or_surrogate() -> None:
    assert split_text("a" * 152 + "€", "gsm7", 153) == ["a" * 152, "€"]
    assert split_text("a" * 66 + "😀", "ucs2", 67) == ["a" * 66, "😀"]


def test_reply_sizes_count_septets() -> None:
    assert len(plan_reply("a" * 160, default="gsm7", split="udh", reference=1)) == 1
    assert len(plan_reply("a" * 161, default="gsm7", split="udh", reference=1)) == 2
    assert len(plan_reply("€" * 80, default="gsm7", split="udh", reference=1)) == 1
    assert len(plan_reply("€" * 81, default="gsm7", split="udh", reference=1)) == 2
    assert len(plan_reply("ह" * 70, default="gsm7", split="udh", reference=1)) == 1
    assert len(plan_reply("ह" * 71, default="gsm7", split="udh", reference=1)) == 2
    parts = plan_reply("a" * 306, default="gsm7", split="udh", reference=0x1FF)
    assert [p.short_message[:6] for p in parts] == [
        bytes([5, 0, 3, 0xFF, 2, 1]),
        bytes([5, 0, 3, 0xFF, 2, 2]),
    ]
    assert all(p.esm_class == ESM_UDHI and p.data_coding == 0 for p in parts)


def test_alphabet_choice_per_link_default() -> None:
    assert choose_alphabet("Hello Δ", "gsm7") == "gsm7"
    assert choose_alphabet("Hello Δ", "latin1") == "ucs2"
    assert choose_alphabet("café", "latin1") == "latin1"
    assert choose_alphabet("café", "ascii") == "ucs2"
    assert choose_alphabet("नमस्ते", "gsm7") == "ucs2"


def test_sar_and_payload_splitting() -> None:
    sar = plan_reply("x" * 200, default="gsm7", split="sar", reference=0x1234)
    assert [[(t.tag, t.value) for t in s.tlvs] for s in sar][1] == [
        (TlvTag.SAR_MSG_REF_NUM, b"\x12\x34"),
        (TlvTag.SAR_TOTAL_SEGMENTS, b"\x02"),
        (TlvTag.SAR_SEGMENT_SEQNUM, b"\x02"),
    ]
    (payload,) = plan_reply("x" * 200, default="gsm7", split="payload", reference=1)
    assert payload.short_message == b"" and payload.tlvs[0].tag == TlvTag.MESSAGE_PAYLOAD


@given(
    text=st.one_of(gsm_text, any_text).filter(bool),
    split=st.sampled_from(["udh", "sar", "payload"]),
    default=st.sampled_from(["gsm7", "latin1", "ascii"]),
)
def test_split_join_round_trip(text: str, split: str, default: str) -> None:
    segments = plan_reply(text, default=default, split=split, reference=7)  # type: ignore[arg-type]
    assert join_segments(segments, default) == text  # type: ignore[arg-type]
    for seg in segments:
        assert len(seg.short_message) <= 140


# ------------------------------------------------------------------------------------ reassembly


def test_udh_16_bit_reference() -> None:
    info, payload = parse_udh(bytes([6, 8, 4, 0x12, 0x34, 3, 2]) + b"abc")
    assert info == PartInfo(0x1234, 3, 2) and payload == b"abc"


def test_mo_part_from_sar_tlvs_and_payload() -> None:
    pdu = DeliverSm(
        short_message=b"",
        tlvs=(
            Tlv(TlvTag.MESSAGE_PAYLOAD, b"hello"),
            Tlv.of_int(TlvTag.SAR_MSG_REF_NUM, 9),
            Tlv.of_int(TlvTag.SAR_TOTAL_SEGMENTS, 2),
            Tlv.of_int(TlvTag.SAR_SEGMENT_SEQNUM, 1),
        ),
    )
    assert mo_part(pdu) == (PartInfo(9, 2, 1), b"hello")
    bad = DeliverSm(esm_class=ESM_UDHI, short_message=bytes([9, 0, 3]))
    with pytest.raises(ValueError):
        mo_part(bad)


def test_reassembly_any_order_duplicates_and_timeout() -> None:
    r: Reassembler[str] = Reassembler(timeout_s=30)
    key = ("bind", "919812345678", "5676")
    assert r.add(key, PartInfo(5, 3, 3), b"C", 0, "p3") is None
    assert r.add(key, PartInfo(5, 3, 1), b"A", 1, "p1") is None
    assert r.add(key, PartInfo(5, 3, 1), b"X", 2, "p1-again") is None  # duplicate keeps the first
    done = r.add(key, PartInfo(5, 3, 2), b"B", 3, "p2")
    assert done is not None and done.payload == b"ABC" and done.complete
    assert done.items == ("p3", "p1", "p1-again", "p2")
    assert len(r) == 0
    r.add(key, PartInfo(6, 3, 1), b"A", 10, "q1")
    r.add(key, PartInfo(6, 3, 3), b"C", 11, "q3")
    assert r.next_deadline() == 40
    assert r.expire(39.9) == []
    (late,) = r.expire(40)
    assert (late.payload, late.complete, late.received, late.note) == (
        b"AC",
        False,
        (1, 3),
        "incomplete: 2 of 3 parts",
    )


def test_reassembly_keeps_sets_apart_and_joins_bytes_before_decoding() -> None:
    r: Reassembler[int] = Reassembler()
    smile = "😀".encode("utf-16-be")
    assert r.add("a", PartInfo(1, 2, 1), smile[:2], 0, 1) is None
    assert r.add("b", PartInfo(1, 2, 2), b"zz", 0, 2) is None  # other sender: other set
    done = r.add("a", PartInfo(1, 2, 2), smile[2:], 0, 3)
    assert done is not None and ucs2_decode(done.payload) == "😀"


def test_reassembly_overflow_is_handed_out_not_dropped() -> None:
    r: Reassembler[int] = Reassembler(timeout_s=100, max_sets=2)
    for i in range(3):
        r.add("k", PartInfo(i, 2, 1), b"x", float(i), i)
    (oldest,) = r.expire(5)
    assert oldest.items == (0,) and not oldest.complete


@given(
    st.lists(st.binary(min_size=1, max_size=10), min_size=2, max_size=8),
    st.randoms(use_true_random=False),
)
def test_reassembly_permutations(parts: list[bytes], rnd: object) -> None:
    r: Reassembler[int] = Reassembler()
    order = list(range(len(parts))) * 2
    rnd.shuffle(order)  # type: ignore[attr-defined]
    results = [r.add("k", PartInfo(1, len(parts), i + 1), parts[i], 0, i) for i in order]
    done = [x for x in results if x is not None]
    assert done[0].payload == b"".join(parts)
