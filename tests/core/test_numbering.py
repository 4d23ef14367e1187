"""normalize_msisdn: every form operators send is accepted, everything else refused with its reason."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.numbering import NumberRejected, normalize_msisdn, split_msisdn

NATIONAL = "9810012345"
MSISDN = "91" + NATIONAL


@pytest.mark.parametrize(
    "raw",
    [
        "919810012345",
        "9810012345",
        "09810012345",
        "+919810012345",
        "+91 98100 12345",
        "+91-98100-12345",
        "+91.98100.12345",
        "+91 (981) 001-2345",
        "+91 (0)98100 12345",
        "0091 98100 12345",
        "00919810012345",
        "098100 12345",
        "  919810012345\n",
        "\t98100\u00a012345",  # a no-break space from a spreadsheet
        "91/9810012345",
    ],
)
def test_accepted_forms_normalise_to_twelve_digits(raw: str) -> None:
    assert normalize_msisdn(raw) == MSISDN


def test_an_int_is_read_as_its_digits() -> None:
    assert normalize_msisdn(919810012345) == MSISDN
    assert normalize_msisdn(9810012345) == MSISDN


@pytest.mark.parametrize(
    ("raw", "ton"),
    [
        ("919810012345", 1),
        ("+919810012345", 1),
        ("00919810012345", 1),
        ("9810012345", 2),
        ("09810012345", 2),
        ("919810012345", 2),  # SMSCs that label an international number national
        ("919810012345", 0),
        ("9810012345", 0),
        ("9810012345", 4),  # subscriber number: read like unknown
    ],
)
def test_smpp_type_of_number_is_honoured(raw: str, ton: int) -> None:
    assert normalize_msisdn(raw, ton=ton, npi=1) == MSISDN


@pytest.mark.parametrize("npi", [None, 0, 1, 8])
def test_telephone_numbering_plans_are_accepted(npi: int | None) -> None:
    assert normalize_msisdn("919810012345", npi=npi) == MSISDN
    assert normalize_msisdn("9810012345", npi=npi) == MSISDN


@pytest.mark.parametrize("lead", "6789")
def test_every_mobile_leading_digit_is_accepted(lead: str) -> None:
    assert normalize_msisdn(f"{lead}123456789") == f"91{lead}123456789"


@pytest.mark.parametrize(
    ("raw", "kwargs", "code", "reason"),
    [
        ("", {}, "empty", "msisdn is empty"),
        ("   ", {}, "empty", "msisdn is empty"),
        ("9" * 41, {}, "too-long", "too long (41 characters)"),
        ("+", {}, "not-digits", "has no digits"),
        ("98100*12345", {}, "not-digits", "contains '*'"),
        ("+91 98100 1234#", {}, "not-digits", "contains '#'"),
        ("९८१००१२३४५", {}, "not-digits", "which is not a digit"),  # Devanagari digits
        ("AIRTEL", {}, "alphanumeric", "alphanumeric sender id"),
        ("VK-HDFCBK", {}, "alphanumeric", "alphanumeric sender id"),
        ("9810012345", {"ton": 5}, "alphanumeric", "TON 5"),
        ("9810012345", {"npi": 9}, "numbering-plan", "numbering plan private"),
        ("9810012345", {"npi": 6}, "numbering-plan", "land mobile (E.212)"),
        ("9810012345", {"npi": 42}, "numbering-plan", "NPI 42"),
        ("+447911123456", {}, "not-indian", "country code 44, GB"),
        ("00447911123456", {}, "not-indian", "country code 44, GB"),
        ("447911123456", {}, "not-indian", "country code 44, GB"),
        ("14155552671", {}, "not-indian", "country code 1, US"),
        ("+1 415 555 2671", {}, "not-indian", "country code 1, US"),
        ("+9771234", {}, "not-indian", "country code 977"),  # explicit "+": any other code is foreign
        ("+999123456", {}, "not-indian", "no known country code"),
        ("9810012345", {"ton": 1}, "not-indian", "country code 98"),
        ("447911123456", {"ton": 1}, "not-indian", "country code 44"),
        ("981001234", {}, "wrong-length", "9 digits"),
        ("98100123456", {}, "wrong-length", "11 digits"),
        ("98100123456", {"ton": 2}, "wrong-length", "11 digits"),
        ("919810012345678", {"ton": 2}, "m2m", "13-digit M2M"),
        ("+91 98100", {}, "wrong-length", "5 digits after the country code 91"),
        ("+91 98100 123456", {}, "wrong-length", "11 digits after the country code 91"),
        ("5591234567890", {}, "m2m", "13-digit M2M"),
        ("05591234567890", {}, "m2m", "13-digit M2M"),
        ("915591234567890", {}, "m2m", "13-digit M2M"),
        ("+91 5591234567890", {}, "m2m", "13-digit M2M"),
        ("0919810012345", {}, "wrong-length", "13 digits"),  # not M2M: national numbers never start with 0
        ("+91 0559123456789", {}, "wrong-length", "13 digits after the country code 91"),
        ("1600123456", {}, "special-series", "1600 series is for government"),
        ("+91 1600 123 456", {}, "special-series", "1600 series"),
        ("911601123456", {}, "special-series", "1601 series is for regulated financial"),
        ("1401234567", {}, "special-series", "140 series is for telemarketing"),
        ("+91 140 123 4567", {}, "special-series", "140 series"),
        ("1800123456", {}, "not-mobile", "starts with 1"),
        ("+91 0123456789", {}, "not-mobile", "must not start with 0"),
        ("2223456789", {}, "not-mobile", "starts with 2 (a fixed-line number)"),
        ("915123456789", {}, "not-mobile", "starts with 5"),
    ],
)
def test_refusals_carry_a_precise_reason(raw: str, kwargs: dict[str, int], code: str, reason: str) -> None:
    with pytest.raises(NumberRejected) as caught:
        normalize_msisdn(raw, **kwargs)
    assert caught.value.code == code
    assert reason in caught.value.reason
    assert str(caught.value) == caught.value.reason


@pytest.mark.parametrize("raw", [None, 9.81e9, True, b"919810012345", -919810012345])
def test_values_that_are_not_text_are_refused_not_crashed_on(raw: object) -> None:
    with pytest.raises(NumberRejected) as caught:
        normalize_msisdn(raw)  # type: ignore[arg-type]
    assert caught.value.code == "not-digits"


def test_split_gives_cc_ndc_and_sn_without_leading_zeros() -> None:
    assert split_msisdn("919810012345") == (91, 9810, 12345)
    assert split_msisdn("919810000007") == (91, 9810, 7)


# --------------------------------------------------------------------------------------- properties

nationals = st.from_regex(r"\A[6-9][0-9]{9}\Z")
separator = st.sampled_from(["", " ", "-", ".", "  ", " - "])


@given(national=nationals, sep=separator, form=st.sampled_from(["91", "", "0", "+91", "0091", "+91 (0)"]))
def test_every_written_form_of_a_mobile_normalises_to_the_same_msisdn(
    national: str, sep: str, form: str
) -> None:
    written = form + sep + national[:5] + sep + national[5:]
    assert normalize_msisdn(written) == "91" + national


@given(national=nationals)
def test_normalised_msisdn_is_a_fixed_point_and_splits_back(national: str) -> None:
    msisdn = normalize_msisdn(national)
    assert normalize_msisdn(msisdn) == msisdn
    cc, ndc, sn = split_msisdn(msisdn)
    assert f"{cc}{ndc:04d}{sn:06d}" == msisdn


_RESULT = re.compile(r"\A91[6-9][0-9]{9}\Z")


@given(
    raw=st.one_of(st.text(max_size=50), st.from_regex(r"\A[+0-9 ()\-.]{0,20}\Z")),
    ton=st.one_of(st.none(), st.integers(0, 7)),
    npi=st.one_of(st.none(), st.integers(0, 18)),
)
def test_any_input_gives_a_mobile_msisdn_or_a_reasoned_refusal(
    raw: str, ton: int | None, npi: int | None
) -> None:
    try:
        result = normalize_msisdn(raw, ton=ton, npi=npi)
    except NumberRejected as exc:
        assert exc.reason and exc.code
        assert len(exc.reason) < 120
    else:
        assert _RESULT.match(result)
