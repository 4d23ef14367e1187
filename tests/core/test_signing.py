"""The signing rule as pure functions: golden headers (computed outside the code, with OpenSSL), every
failure reason in the order the rule states, and properties over arbitrary bodies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway import __version__
from mogateway.core.contract import callback_headers
from mogateway.core.signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SignatureError,
    SignatureFailure,
    check_signature,
    sign,
    signature_headers,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
SECRET = "fixture-signing-secret-0123456789-abcdef"
NEW_SECRET = "fixture-signing-secret-NEW-9876543210-fedcba"
AT = 1659954031


def golden_headers(name: str) -> dict[str, str]:
    template = json.loads((FIXTURES / name).read_text())
    return {
        k: v.format(token="tok-123", version=__version__, message_id="mid-1") for k, v in template.items()
    }


def signed_callback_headers(secrets: list[str]) -> dict[str, str]:
    body = (FIXTURES / "basic_ms.json").read_bytes()
    headers = callback_headers("tok-123", "mid-1", __version__)
    headers.update(signature_headers(secrets, AT, body))
    return headers


def test_signed_headers_are_the_golden_ones_in_order() -> None:
    expected = golden_headers("signed_headers.json")
    headers = signed_callback_headers([SECRET])
    assert headers == expected
    assert list(headers) == list(expected)


def test_during_a_rotation_both_signatures_are_sent_newest_first() -> None:
    expected = golden_headers("signed_rotation_headers.json")
    assert signed_callback_headers([NEW_SECRET, SECRET]) == expected


def test_the_unsigned_headers_are_a_prefix_of_the_signed_ones() -> None:
    plain = golden_headers("headers.json")
    signed = golden_headers("signed_headers.json")
    assert list(signed.items())[: len(plain)] == list(plain.items())
    assert set(signed) - set(plain) == {TIMESTAMP_HEADER, SIGNATURE_HEADER}


# ------------------------------------------------------------------------------------------ verify

BODY = (FIXTURES / "basic_ms.json").read_bytes()
GOOD = signature_headers([SECRET], AT, BODY)


def check(
    body: bytes = BODY,
    timestamp: str | None = GOOD[TIMESTAMP_HEADER],
    signature: str | None = GOOD[SIGNATURE_HEADER],
    secrets: tuple[str, ...] = (SECRET,),
    now: float = AT + 1,
    tolerance_s: float = 300,
) -> int:
    return check_signature(body, timestamp, signature, secrets, now=now, tolerance_s=tolerance_s)


def reason_of(**kw: object) -> SignatureFailure:
    with pytest.raises(SignatureError) as caught:
        check(**kw)  # type: ignore[arg-type]
    return caught.value.reason


def test_a_good_signature_returns_its_timestamp() -> None:
    assert check() == AT


@pytest.mark.parametrize(
    "kw", [{"timestamp": None}, {"signature": None}, {"timestamp": " "}, {"signature": ""}]
)
def test_a_missing_header_is_missing(kw: dict[str, object]) -> None:
    assert reason_of(**kw) is SignatureFailure.MISSING


@pytest.mark.parametrize(
    "kw",
    [
        {"timestamp": "16599540.31"},
        {"timestamp": "-1659954031"},
        {"timestamp": "1659954031a"},
        {"timestamp": "١٦٥٩٩٥٤٠٣١"},  # Arabic-Indic digits: isdigit() but not ASCII
        {"timestamp": "9" * 13},
        {"signature": "sha256=" + "0" * 64},  # no v1 entry at all
        {"signature": "v1"},
        {"signature": "v1=" + "0" * 63},
        {"signature": "v1=" + "g" * 64},
        {"signature": ",".join(["v1=" + "0" * 64] * 9)},
    ],
)
def test_a_header_of_the_wrong_shape_is_malformed(kw: dict[str, object]) -> None:
    assert reason_of(**kw) is SignatureFailure.MALFORMED


def test_a_changed_body_timestamp_or_secret_matches_nothing() -> None:
    assert reason_of(body=BODY.replace(b"HELLO", b"HELLP")) is SignatureFailure.NO_MATCH
    assert reason_of(timestamp=str(AT + 1), now=AT) is SignatureFailure.NO_MATCH
    assert reason_of(secrets=("another-secret",)) is SignatureFailure.NO_MATCH


def test_stale_and_future_are_said_only_of_authentic_requests() -> None:
    assert check(now=AT + 300) == AT  # the tolerance itself is still accepted
    assert reason_of(now=AT + 301) is SignatureFailure.STALE
    assert reason_of(now=AT - 301) is SignatureFailure.FUTURE
    # A forged old request is "no_match", not "stale": the signature is judged first.
    assert reason_of(body=b"{}", now=AT + 10_000) is SignatureFailure.NO_MATCH


def test_any_of_several_secrets_and_any_of_several_signatures_verifies() -> None:
    rotation = signature_headers([NEW_SECRET, SECRET], AT, BODY)[SIGNATURE_HEADER]
    assert check(signature=rotation, secrets=(SECRET,)) == AT
    assert check(signature=rotation, secrets=(NEW_SECRET,)) == AT
    assert check(secrets=("old-one", SECRET)) == AT
    # Other schemes are skipped (scheme names are case-sensitive: "V1" is another one); hex case is not.
    mixed = f"v0=abc, v2=whatever , V1={'0' * 64}, v1={sign(SECRET, AT, BODY).upper()}"
    assert check(signature=mixed) == AT
    assert reason_of(signature=mixed.replace(", v1=", ", v9=")) is SignatureFailure.MALFORMED


def test_the_error_says_why_and_never_what_was_expected() -> None:
    with pytest.raises(SignatureError) as caught:
        check(body=b"{}")
    assert str(caught.value).startswith("no_match: ")
    assert sign(SECRET, AT, b"{}") not in str(caught.value)


def test_programming_errors_are_not_signature_errors() -> None:
    with pytest.raises(ValueError, match="secret"):
        check(secrets=())
    with pytest.raises(ValueError, match="secret"):
        check(secrets=("",))
    with pytest.raises(ValueError, match="tolerance"):
        check(tolerance_s=0)
    with pytest.raises(ValueError):
        sign("", AT, BODY)
    with pytest.raises(ValueError):
        signature_headers([], AT, BODY)


# ------------------------------------------------------------------------------------------ properties

secrets_st = st.text(min_size=1, max_size=64).filter(lambda s: s.strip() == s and s != "")
timestamps = st.integers(min_value=0, max_value=10**11)


@given(body=st.binary(max_size=2048), secret=secrets_st, at=timestamps)
def test_sign_then_verify_round_trips(body: bytes, secret: str, at: int) -> None:
    headers = signature_headers([secret], at, body)
    assert headers[TIMESTAMP_HEADER] == str(at)
    signed = check_signature(
        body, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], [secret], now=at, tolerance_s=1
    )
    assert signed == at


@given(body=st.binary(min_size=1, max_size=2048), secret=secrets_st, at=timestamps, data=st.data())
def test_any_single_byte_change_of_the_body_fails(
    body: bytes, secret: str, at: int, data: st.DataObject
) -> None:
    headers = signature_headers([secret], at, body)
    index = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    flip = data.draw(st.integers(min_value=1, max_value=255))
    changed = bytearray(body)
    changed[index] ^= flip
    with pytest.raises(SignatureError) as caught:
        check_signature(
            bytes(changed),
            headers[TIMESTAMP_HEADER],
            headers[SIGNATURE_HEADER],
            [secret],
            now=at,
            tolerance_s=1,
        )
    assert caught.value.reason is SignatureFailure.NO_MATCH
