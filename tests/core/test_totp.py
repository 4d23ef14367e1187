"""TOTP (RFC 6238) and recovery codes of the portal, against the RFC's own test vectors."""

from __future__ import annotations

import pytest

from mogateway.core import totp

SECRET = b"12345678901234567890"  # RFC 6238 appendix B, SHA-1


@pytest.mark.parametrize(
    ("at", "code"),
    [
        (59, "94287082"),
        (1111111109, "07081804"),
        (1111111111, "14050471"),
        (1234567890, "89005924"),
        (2000000000, "69279037"),
        (20000000000, "65353130"),
    ],
)
def test_rfc_6238_vectors(at: int, code: str) -> None:
    assert totp.totp(SECRET, at, digits=8) == code


def test_a_code_matches_its_step_and_one_either_side_and_never_an_old_step() -> None:
    now = 1_700_000_000.0
    code = totp.totp(SECRET, now)
    step = totp.step_at(now)
    assert totp.matching_step(SECRET, code, now, 0) == step
    assert totp.matching_step(SECRET, code, now + 30, 0) == step  # the app's clock 30 s behind
    assert totp.matching_step(SECRET, code, now + 90, 0) is None  # too far
    assert totp.matching_step(SECRET, code, now, step) is None  # used already
    assert totp.matching_step(SECRET, "12345", now, 0) is None
    assert totp.matching_step(SECRET, f"{code[:3]} {code[3:]}", now, 0) == step


def test_base32_round_trip_and_the_uri_an_app_reads() -> None:
    text = totp.to_base32(SECRET)
    assert text == "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
    assert totp.from_base32(text.lower()) == SECRET
    uri = totp.otpauth_uri(SECRET, "ann@example.com", "mogateway")
    assert uri.startswith("otpauth://totp/mogateway:ann@example.com?secret=GEZDGNBVGY3TQOJQ")
    with pytest.raises(ValueError):
        totp.from_base32("not base32!")


def test_recovery_codes_are_hashed_case_and_dash_insensitively() -> None:
    code = totp.recovery_code(bytes(range(10)))
    assert len(code) == 11 and code[5] == "-"
    assert totp.recovery_hash(code) == totp.recovery_hash(code.upper().replace("-", ""))
    assert totp.recovery_hash(code) != totp.recovery_hash("abcde-fghij")
