"""How many SMS a reply needs (GSM-7 160/153 septets, UCS-2 70/67 units) and how it is cut to fit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.text import GSM7_BASIC, GSM7_EXTENSION, count_parts, fit_parts

HINDI = "न"  # one UCS-2 unit
EMOJI = "👋"  # two UCS-2 units (a surrogate pair)


@pytest.mark.parametrize(
    ("text", "encoding", "units", "parts"),
    [
        ("", "gsm7", 0, 1),
        ("a" * 160, "gsm7", 160, 1),
        ("a" * 161, "gsm7", 161, 2),
        ("a" * 306, "gsm7", 306, 2),
        ("a" * 307, "gsm7", 307, 3),
        ("€" * 80, "gsm7", 160, 1),  # extension characters take two septets
        ("€" * 81, "gsm7", 162, 2),
        ("a\nb", "gsm7", 3, 1),
        (HINDI * 70, "ucs2", 70, 1),
        (HINDI * 71, "ucs2", 71, 2),
        (HINDI * 134, "ucs2", 134, 2),
        (HINDI * 135, "ucs2", 135, 3),
        (EMOJI * 35, "ucs2", 70, 1),
        (EMOJI * 36, "ucs2", 72, 2),
        ("a" * 159 + HINDI, "ucs2", 160, 3),  # one non-GSM character turns the whole text to UCS-2
    ],
)
def test_count_parts(text: str, encoding: str, units: int, parts: int) -> None:
    info = count_parts(text)
    assert (info.encoding, info.units, info.parts) == (encoding, units, parts)


def test_fit_parts_keeps_a_short_text() -> None:
    assert fit_parts("hello", 1) == ("hello", False)
    assert fit_parts("a" * 306, 2) == ("a" * 306, False)


@pytest.mark.parametrize(
    ("text", "max_parts", "kept"),
    [
        ("a" * 161, 1, "a" * 160),
        ("a" * 400, 2, "a" * 306),
        (HINDI * 200, 2, HINDI * 134),
        (HINDI * 71, 1, HINDI * 70),
        ("€" * 100, 1, "€" * 80),
        ("a" + "€" * 100, 1, "a" + "€" * 79),  # the escape pair is never split: 1 + 158 septets
        ("a" + EMOJI * 40, 1, "a" + EMOJI * 34),  # a surrogate pair is never split: 1 + 68 units
    ],
)
def test_fit_parts_cuts_at_the_budget_without_splitting_characters(
    text: str, max_parts: int, kept: str
) -> None:
    assert fit_parts(text, max_parts) == (kept, True)
    assert count_parts(kept).parts <= max_parts


def test_fit_parts_needs_at_least_one_part() -> None:
    with pytest.raises(ValueError):
        fit_parts("x", 0)


_GSM_CHARS = [c for c in GSM7_BASIC if c != "\x1b"] + list(GSM7_EXTENSION)


@given(
    st.text(alphabet=st.sampled_from([*_GSM_CHARS, HINDI, EMOJI, "é", "ü"]), max_size=1200),
    st.integers(min_value=1, max_value=8),
)
def test_fit_parts_result_always_fits_and_is_a_prefix(text: str, max_parts: int) -> None:
    kept, truncated = fit_parts(text, max_parts)
    assert text.startswith(kept)
    assert count_parts(kept).parts <= max_parts
    assert truncated is (kept != text)
    if truncated:
        # as much as fits was kept: one more character would not fit
        assert count_parts(text[: len(kept) + 1]).parts > max_parts or (
            count_parts(text).encoding != count_parts(text[: len(kept) + 1]).encoding
        )
