"""Signed callbacks: the one rule the gateway signs with and the SDK verifies with.

Rules stated here, before the code:

* A signed callback carries two headers besides the contract's own:
  ``x-mogateway-timestamp: <unix seconds>`` (ASCII digits) and
  ``x-mogateway-signature: v1=<signature>``, where the signature is the lowercase hex HMAC-SHA256 whose
  key is the signing secret's UTF-8 bytes and whose message is the timestamp's digits, a ``.``, then the
  raw body bytes exactly as sent.
* During a secret rotation the header carries several ``v1=`` entries, comma-separated, the newest
  secret's first. Entries of another scheme (``v0=``, ``v2=``) are skipped, so a later scheme can be
  sent next to this one.
* A receiver accepts a callback when one ``v1`` value equals the HMAC under one of its secrets (every
  pair compared in constant time, no early exit) and the timestamp is within ``tolerance_s`` of its own
  clock. The signature is checked before the timestamp, so "stale" is only ever said of an authentic
  request: a replay, or a receiver whose clock is wrong.

No I/O and no clock here: the caller passes the time.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

__all__ = [
    "MAX_SIGNATURES",
    "SCHEME",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "SignatureError",
    "SignatureFailure",
    "check_signature",
    "sign",
    "signature_headers",
    "signed_message",
]

TIMESTAMP_HEADER: Final = "x-mogateway-timestamp"
SIGNATURE_HEADER: Final = "x-mogateway-signature"
#: The only signature scheme so far: HMAC-SHA256 over ``<timestamp>.<body>``, lowercase hex.
SCHEME: Final = "v1"
#: A header with more ``v1`` values than this is malformed (the gateway sends two at most): it bounds
#: the work one request can ask for.
MAX_SIGNATURES: Final = 8
# Unix seconds fit in 11 digits until the year 5138; more is not a timestamp but a way to make big ints.
_MAX_TIMESTAMP_DIGITS: Final = 12
_HEX_LENGTH: Final = 64
_HEX: Final = frozenset("0123456789abcdef")


class SignatureFailure(enum.StrEnum):
    """Why a signed callback was refused."""

    MISSING = "missing"  # no timestamp or no signature header
    MALFORMED = "malformed"  # a header that does not have the shape above
    STALE = "stale"  # authentic, but the timestamp is older than the tolerance
    FUTURE = "future"  # authentic, but the timestamp is ahead of the receiver's clock by more
    NO_MATCH = "no_match"  # no v1 value is the HMAC under any of the secrets


class SignatureError(ValueError):
    """A callback whose signature does not verify; ``reason`` says which rule it broke."""

    def __init__(self, reason: SignatureFailure, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def signed_message(timestamp: int, body: bytes) -> bytes:
    """The bytes the HMAC is computed over: ``<timestamp>.`` then the body."""
    return b"%d." % timestamp + body


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``v1`` signature of ``body`` sent at ``timestamp`` (lowercase hex HMAC-SHA256)."""
    if not secret:
        raise ValueError("a signing secret must not be empty")
    return hmac.new(secret.encode("utf-8"), signed_message(timestamp, body), hashlib.sha256).hexdigest()


def signature_headers(secrets: Sequence[str], timestamp: int, body: bytes) -> dict[str, str]:
    """The two headers of a signed callback; ``secrets`` newest first (several during a rotation)."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    if timestamp < 0:
        raise ValueError("a timestamp is unix seconds, never negative")
    value = ",".join(f"{SCHEME}={sign(secret, timestamp, body)}" for secret in secrets)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: value}


def _parse_timestamp(value: str) -> int:
    text = value.strip()
    if not text or not text.isascii() or not text.isdigit() or len(text) > _MAX_TIMESTAMP_DIGITS:
        raise SignatureError(SignatureFailure.MALFORMED, f"{TIMESTAMP_HEADER} must be unix seconds")
    return int(text)


def _parse_signatures(value: str) -> list[bytes]:
    found: list[bytes] = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        scheme, equals, signature = entry.partition("=")
        if not equals:
            raise SignatureError(SignatureFailure.MALFORMED, f"{SIGNATURE_HEADER} entries are scheme=value")
        if scheme.strip() != SCHEME:
            continue
        signature = signature.strip().lower()
        if len(signature) != _HEX_LENGTH or not _HEX.issuperset(signature):
            raise SignatureError(
                SignatureFailure.MALFORMED, f"a {SCHEME} signature is {_HEX_LENGTH} hexadecimal digits"
            )
        found.append(signature.encode("ascii"))
    if not found:
        raise SignatureError(SignatureFailure.MALFORMED, f"{SIGNATURE_HEADER} has no {SCHEME} signature")
    if len(found) > MAX_SIGNATURES:
        raise SignatureError(
            SignatureFailure.MALFORMED, f"{SIGNATURE_HEADER} has more than {MAX_SIGNATURES} signatures"
        )
    return found


def check_signature(
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    secrets: Sequence[str],
    *,
    now: float,
    tolerance_s: float,
) -> int:
    """Verify a callback from its body and its two header values; returns the verified timestamp.

    Raises :class:`SignatureError` with the first rule broken, in this order: a header missing, a
    header malformed, no matching signature, then the timestamp too old or too far ahead of ``now``.
    """
    if not secrets or not all(secrets):
        raise ValueError("at least one signing secret is needed to verify, and none may be empty")
    if tolerance_s <= 0:
        raise ValueError("tolerance_s must be positive")
    if timestamp is None or not timestamp.strip():
        raise SignatureError(SignatureFailure.MISSING, f"no {TIMESTAMP_HEADER} header")
    if signature is None or not signature.strip():
        raise SignatureError(SignatureFailure.MISSING, f"no {SIGNATURE_HEADER} header")
    sent_at = _parse_timestamp(timestamp)
    given = _parse_signatures(signature)

    message = signed_message(sent_at, body)
    matched = False
    for secret in secrets:
        expected = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest().encode("ascii")
        for candidate in given:
            # `|` not `or`: every pair is compared whatever the earlier ones gave, so the time taken
            # says neither whether nor which secret matched.
            matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        raise SignatureError(SignatureFailure.NO_MATCH, "no signature matches the body and timestamp")

    age = now - sent_at
    if age > tolerance_s:
        raise SignatureError(
            SignatureFailure.STALE, f"timestamp is {age:.0f} s old, more than the {tolerance_s:g} s allowed"
        )
    if -age > tolerance_s:
        raise SignatureError(
            SignatureFailure.FUTURE,
            f"timestamp is {-age:.0f} s ahead of this clock, more than the {tolerance_s:g} s allowed",
        )
    return sent_at
