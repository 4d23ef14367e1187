"""TokenVerifier: bearer parsing, rotation, and no early exit in the comparison."""

from __future__ import annotations

import hmac

import pytest

from mogateway.client import TokenVerifier, bearer_token


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("Bearer a b", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_header_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_several_tokens_are_valid_at_once_for_rotation() -> None:
    verifier = TokenVerifier("old-token", "new-token")
    assert verifier.verify("Bearer old-token")
    assert verifier.verify("Bearer new-token")
    assert not verifier.verify("Bearer other")
    assert not verifier.verify("Bearer old-token-x")
    assert not verifier.verify("Bearer ")
    assert not verifier.verify(None)
    assert not verifier.verify_token("")


def test_non_ascii_tokens_compare_without_error() -> None:
    verifier = TokenVerifier("tökén")
    assert verifier.verify("Bearer tökén")
    assert not verifier.verify("Bearer token")


def test_needs_a_token_and_never_shows_them() -> None:
    with pytest.raises(ValueError):
        TokenVerifier()
    with pytest.raises(ValueError):
        TokenVerifier("", "  ")
    assert "secret" not in repr(TokenVerifier("secret"))


def test_every_token_is_compared_whatever_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(b)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    verifier = TokenVerifier("first", "second", "third")
    for header in ("Bearer first", "Bearer third", "Bearer nope", None):
        calls.clear()
        verifier.verify(header)
        assert calls == [b"first", b"second", b"third"], header
