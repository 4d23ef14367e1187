"""Message ids: fresh ones sort by time; a source's ids are the same on every retry, and sort by time
when the source id carries the time it was first seen (SMPP's content ids)."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.message import id_for_source, message_id


def _time_of(mid: str) -> int:
    raw = base64.b32hexdecode(mid.upper() + "=" * (-len(mid) % 8))
    return int.from_bytes(raw[:6], "big")


def test_an_undated_source_id_is_a_hash_of_the_key_alone() -> None:
    assert id_for_source("http:op-1") == id_for_source("http:op-1")
    assert id_for_source("http:op-1") != id_for_source("http:op-2")
    assert len(id_for_source("http:op-1")) == 26


@given(st.text(min_size=1, max_size=80), st.integers(min_value=0, max_value=2**48 - 1))
def test_a_dated_source_id_starts_with_its_time_and_is_the_same_on_every_retry(key: str, ms: int) -> None:
    mid = id_for_source(key, ms)
    assert mid == id_for_source(key, ms)
    assert len(mid) == 26 and mid == mid.lower()
    assert _time_of(mid) == ms
    assert mid != id_for_source(key)  # the dated and undated forms are different ids
    assert mid != id_for_source(key + "x", ms)


def test_dated_source_ids_sort_in_time_order_among_fresh_ids() -> None:
    times = [1_763_900_000_000 + step * 7 for step in range(200)]
    ids = [
        id_for_source(f"smpp:b:c:{n:032x}:{ms}", ms) if n % 2 else message_id(ms, bytes(10))
        for n, ms in enumerate(times)
    ]
    assert sorted(ids) == ids


@given(st.binary(min_size=0, max_size=40))
def test_ids_are_lower_case_base32hex_as_the_standard_library_writes_it(raw: bytes) -> None:
    # _b32 reads 16 octets ten bits at a time; whatever it is given, it must write what base64 does.
    from mogateway.core.message import _b32

    assert _b32(raw) == base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()


@given(st.integers(min_value=0, max_value=2**48 - 1), st.binary(min_size=10, max_size=10))
def test_a_fresh_id_is_its_time_and_random_octets_in_base32hex(ms: int, random10: bytes) -> None:
    raw = ms.to_bytes(6, "big") + random10
    assert message_id(ms, random10) == base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()
