"""Circle and operator ids: the fixed table, the aliases sources use, and open-ended pass-through."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.numbering import (
    CIRCLES,
    CURRENT_OPERATORS,
    DEFUNCT_OPERATORS,
    circle_by_id,
    normalize_circle,
    normalize_operator,
)

CIRCLE_IDS = [
    "andhra-pradesh", "assam", "bihar", "delhi", "gujarat", "haryana", "himachal-pradesh",
    "jammu-kashmir", "karnataka", "kerala", "kolkata", "madhya-pradesh", "maharashtra", "mumbai",
    "north-east", "odisha", "punjab", "rajasthan", "tamil-nadu", "up-east", "up-west", "west-bengal",
]  # fmt: skip


def test_the_22_circles_have_the_documented_stable_ids() -> None:
    assert [c.id for c in CIRCLES] == CIRCLE_IDS
    assert len({c.code for c in CIRCLES}) == 22


@pytest.mark.parametrize("circle", CIRCLES, ids=lambda c: c.id)
def test_each_circle_is_found_by_id_code_and_name(circle: object) -> None:
    from mogateway.core.numbering import Circle

    assert isinstance(circle, Circle)
    for spelling in (circle.id, circle.code, circle.code.lower(), circle.name, circle.name.upper()):
        assert normalize_circle(spelling) == circle.id, spelling
    assert circle_by_id(circle.id) is circle


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("UP East", "up-east"),
        ("UE", "up-east"),
        ("up_east", "up-east"),
        ("UP (East)", "up-east"),
        ("Uttar Pradesh (West)", "up-west"),
        ("UPW", "up-west"),
        ("Uttarakhand", "up-west"),
        ("DL", "delhi"),
        ("Delhi NCR", "delhi"),
        ("MU", "mumbai"),
        ("Bombay", "mumbai"),
        ("KO", "kolkata"),
        ("Jammu & Kashmir", "jammu-kashmir"),
        ("Jammu and Kashmir", "jammu-kashmir"),
        ("J&K", "jammu-kashmir"),
        ("Orissa", "odisha"),
        ("OR", "odisha"),
        ("Chennai", "tamil-nadu"),
        ("Jharkhand", "bihar"),
        ("Chhattisgarh", "madhya-pradesh"),
        ("Goa", "maharashtra"),
        ("Telangana", "andhra-pradesh"),
        ("Northeast", "north-east"),
        ("Sikkim", "west-bengal"),
        ("  north east  ", "north-east"),
    ],
)
def test_circle_aliases(text: str, expected: str) -> None:
    assert normalize_circle(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Uttar Pradesh", "uttar-pradesh"),  # ambiguous between east and west: passed through
        ("Some New Circle", "some-new-circle"),
        ("Zone_7 / North", "zone-7-north"),
        ("", ""),
        ("   ", ""),
        (None, ""),
    ],
)
def test_unknown_circles_pass_through_lowercase_hyphenated(text: str | None, expected: str) -> None:
    assert normalize_circle(text) == expected


def test_circle_by_id_knows_only_the_22() -> None:
    assert circle_by_id("uttar-pradesh") is None
    assert circle_by_id("delhi") is not None and circle_by_id("delhi").code == "DL"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Reliance Jio", "jio"),
        ("JIO", "jio"),
        ("Airtel", "airtel"),
        ("Bharti Airtel", "airtel"),
        ("Tata Docomo", "airtel"),
        ("Telenor", "airtel"),
        ("Uninor", "airtel"),
        ("Telewings", "airtel"),
        ("Vodafone", "vi"),
        ("Idea", "vi"),
        ("Vodafone Idea", "vi"),
        ("Vi", "vi"),
        ("BSNL MOBILE", "bsnl"),
        ("bsnl", "bsnl"),
        ("MTNL", "mtnl"),
        ("Aircel", "aircel"),
        ("Reliance Communications", "rcom"),
        ("RCOM", "rcom"),
        ("Videocon", "videocon"),
        ("MTS", "mts"),
        ("Loop Mobile", "loop"),
        ("S TEL", "stel"),
        ("Reliance", "reliance"),  # ambiguous: Jio or RCom
        ("Brand-New Telco", "brand-new-telco"),
        ("", ""),
        (None, ""),
    ],
)
def test_operator_names_map_to_current_ids(text: str | None, expected: str) -> None:
    assert normalize_operator(text) == expected


def test_current_ids_are_fixed_points_and_defunct_ids_are_not_current() -> None:
    for op in CURRENT_OPERATORS:
        assert normalize_operator(op) == op
    assert not DEFUNCT_OPERATORS & set(CURRENT_OPERATORS)
    for op in DEFUNCT_OPERATORS:
        assert normalize_operator(op) == op


_ID = re.compile(r"\A(?:[^\W_]+(?:-[^\W_]+)*)?\Z")


@given(st.text(max_size=80))
def test_normalised_names_are_lowercase_hyphenated_bounded_and_stable(text: str) -> None:
    for normalize in (normalize_circle, normalize_operator):
        result = normalize(text)
        assert _ID.match(result), result
        assert result == result.casefold()
        assert len(result) <= 64
        assert normalize(result) == result


def test_operator_guide_lists_every_circle_and_operator_as_the_code_does() -> None:
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "numbering.md").read_text(encoding="utf-8")
    for circle in CIRCLES:
        assert f"| `{circle.id}` | {circle.code} | {circle.name} |" in guide, circle.id
    for op in (*CURRENT_OPERATORS, *sorted(DEFUNCT_OPERATORS)):
        assert f"| `{op}` |" in guide, op
