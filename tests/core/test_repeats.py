"""SMPP MOs redelivered, over any bind: which of a batch repeat an MO received before, stored or earlier
in the batch, by the same content or the same SMSC id (core.repeats.find_repeats, run by both
journals)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.message import Message
from mogateway.core.repeats import (
    content_digest,
    content_source_id,
    find_repeats,
    repeat_family,
    repeat_lookups,
)


def mo(mid: str, digest: str, at: float, msisdn: str = "919812345678") -> Message:
    source_id = content_source_id(digest, int(at * 1000))
    return Message(mid, "56767", msisdn, "HI", at, "smpp:a", source_id=source_id)


def test_a_content_source_id_names_its_digest_and_nothing_else_does() -> None:
    assert content_digest(content_source_id("ab12", 1_700_000_000_000)) == "ab12"
    for other in (None, "s:ab12", "op-1", "c:", "c:ab12", "c:ab12:", "c::123", "c:ab12:12x"):
        assert content_digest(other) is None


def test_an_mo_repeats_the_stored_one_of_its_number_and_content_within_its_window() -> None:
    earlier = [("first", "919812345678", content_source_id("d1", 1000), 1000.0)]
    batch = [
        (mo("again", "d1", 1500.0), 1000.0),  # within: received at or after since
        (mo("late", "d1", 1700.0), 1000.5),  # the first is before this one's window
        (mo("other-number", "d1", 1500.0, msisdn="919812345679"), 1000.0),
        (mo("other-text", "d2", 1500.0), 1000.0),
        (mo("no-window", "d1", 1500.0), None),
    ]
    assert find_repeats(batch, earlier) == {0: "first"}


def test_within_a_batch_the_first_of_a_content_is_new_and_the_rest_repeat_it() -> None:
    batch = [(mo("a", "d1", 10.0), 0.0), (mo("b", "d1", 10.0), 0.0), (mo("c", "d1", 10.0), 0.0)]
    assert find_repeats(batch, []) == {1: "a", 2: "a"}


def test_the_earliest_mo_inside_the_window_is_the_one_repeated() -> None:
    # Sent at 0 and again at 700 (a new MO then: outside 600 s); a redelivery at 800 repeats the one at 700.
    earlier = [
        ("at-700", "919812345678", content_source_id("d1", 700_000), 700.0),
        ("at-0", "919812345678", content_source_id("d1", 0), 0.0),
        ("other-id", "919812345678", "s:smsc-1", 750.0),
    ]
    assert find_repeats([(mo("at-800", "d1", 800.0), 200.0)], earlier) == {0: "at-700"}
    assert find_repeats([(mo("at-500", "d1", 500.0), -100.0)], earlier) == {0: "at-0"}


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 2000)), max_size=40))
def test_each_number_and_content_has_one_first_mo_per_window(entries: list[tuple[int, int, int]]) -> None:
    # Arrivals in time order, window 600 s: an arrival is new exactly when no new MO of its number and
    # content came in the 600 s before it, and a repeat names that MO.
    entries.sort(key=lambda e: e[2])
    batch = [
        (mo(f"m{n}", f"d{d}", float(at), msisdn=f"91981234567{k}"), float(at - 600))
        for n, (k, d, at) in enumerate(entries)
    ]
    repeats = find_repeats(batch, [])
    firsts: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for n, (k, d, at) in enumerate(entries):
        window = [mid for when, mid in firsts.get((k, d), []) if when >= at - 600]
        if window:
            assert repeats[n] == window[0]
        else:
            assert n not in repeats
            firsts.setdefault((k, d), []).append((at, f"m{n}"))


def test_a_journal_looks_up_each_number_and_content_once_over_the_range_of_its_source_ids() -> None:
    batch = [
        (mo("a", "d1", 10.0), 5.0),
        (mo("b", "d1", 11.0), 4.0),  # same number and content: one lookup, the earliest since
        (mo("c", "d1", 11.0, msisdn="919812345679"), 5.0),
        (mo("d", "d2", 11.0), None),  # no window
        (Message("e", "56767", "919812345678", "HI", 1.0, "http", source_id="op-1"), None),  # HTTP
    ]
    lookups = repeat_lookups(batch)
    assert lookups == [
        ("919812345678", "c:d1:", "c:d1;", 4.0),
        ("919812345679", "c:d1:", "c:d1;", 5.0),
    ]
    low, high = lookups[0][1], lookups[0][2]
    assert low <= content_source_id("d1", 123) < high  # every source id of the content, by bytes
    assert not low <= content_source_id("d10", 123) < high and not low <= content_source_id("d", 1) < high


def test_an_smsc_message_id_is_its_own_family_and_is_looked_up_exactly() -> None:
    assert repeat_family("s:123") == "s:123" and repeat_family(None) is None
    assert repeat_family(content_source_id("d1", 5)) == repeat_family(content_source_id("d1", 9)) == "c:d1:"
    smsc = Message("again", "56767", "919812345678", "HI", 20.0, "smpp:b1", source_id="s:123")
    ((number, low, high, since),) = repeat_lookups([(smsc, 0.0)])
    assert (number, low, since) == ("919812345678", "s:123", 0.0)
    assert low <= "s:123" < high and not low <= "s:1234" < high and not low <= "s:12" < high
    earlier = [
        ("first", "919812345678", "s:123", 10.0),  # over another bind: same number, same SMSC id
        ("other", "919812345678", "s:1234", 10.0),
    ]
    assert find_repeats([(smsc, 0.0)], earlier) == {0: "first"}
    assert find_repeats([(smsc, 11.0)], earlier) == {}  # outside its window
