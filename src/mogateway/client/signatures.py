"""Verifying signed callbacks, for any framework: :func:`verify_signature` and :class:`SignatureVerifier`.

A client registered with signing gets ``x-mogateway-timestamp`` and ``x-mogateway-signature`` on every
callback (the rule is :mod:`mogateway.core.signing`, shared with the gateway). Verify them against the
**raw** body bytes, before parsing anything::

    from mogateway.client import SignatureError, verify_signature

    try:
        verify_signature(body, headers, os.environ["MOGATEWAY_SIGNING_SECRET"].split(","))
    except SignatureError as exc:
        return 401, exc.reason          # missing, malformed, stale, future or no_match

Several secrets are accepted at once (a rotation); every one is compared on every request in constant
time. A request older (or further ahead of this clock) than ``tolerance_s`` is refused, which is what
makes a recorded request useless for a replay; keep the application's clock synchronised.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from mogateway.core.signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SignatureError,
    SignatureFailure,
    check_signature,
)

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "HeaderSource",
    "SignatureError",
    "SignatureFailure",
    "SignatureVerifier",
    "as_signature_verifier",
    "header_values",
    "verify_signature",
]

#: How far a callback's timestamp may be from the receiver's clock, either way (Stripe's default too).
DEFAULT_TOLERANCE_S = 300.0

#: Request headers as any framework hands them: a mapping (dict, Starlette ``Headers``, werkzeug
#: ``Headers``) or pairs (ASGI's raw list of byte pairs). Names are matched case-insensitively.
HeaderSource: TypeAlias = Mapping[str, str] | Mapping[bytes, bytes] | Iterable[tuple[Any, Any]]


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes | bytearray) else str(value)


def header_values(headers: HeaderSource, name: str) -> list[str]:
    """Every value of header ``name`` (lower case) in ``headers``, in order; [] when absent."""
    items = headers.items() if isinstance(headers, Mapping) or hasattr(headers, "items") else headers
    return [_text(value) for key, value in items if _text(key).lower() == name]


def _single(headers: HeaderSource, name: str) -> str | None:
    values = header_values(headers, name)
    if len({v.strip() for v in values}) > 1:
        raise SignatureError(
            SignatureFailure.MALFORMED, f"{name} is sent more than once, with different values"
        )
    return values[0] if values else None


def _joined(headers: HeaderSource, name: str) -> str | None:
    # A repeated header is one comma-separated list (RFC 9110, 5.3), which is this header's own syntax.
    values = header_values(headers, name)
    return ",".join(values) if values else None


def _as_bytes(body: bytes | bytearray | memoryview | str) -> bytes:
    # A str body can only be the UTF-8 JSON the gateway sent, decoded by a framework: encoding it again
    # gives back the very bytes that were signed.
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


class SignatureVerifier:
    """Accepts a callback whose signature matches one of the configured signing secrets."""

    __slots__ = ("_clock", "_secrets", "tolerance_s")

    def __init__(
        self,
        *secrets: str,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the receiver's unix time (``time.time``; a test passes its own)."""
        cleaned = tuple(s.strip() for s in secrets if s and s.strip())
        if not cleaned:
            raise ValueError("SignatureVerifier needs at least one non-empty signing secret")
        if tolerance_s <= 0:
            raise ValueError("tolerance_s must be positive")
        self._secrets = cleaned
        self.tolerance_s = float(tolerance_s)
        self._clock = clock

    def __len__(self) -> int:
        return len(self._secrets)

    def __repr__(self) -> str:
        # Never show the secrets themselves.
        return f"SignatureVerifier(<{len(self._secrets)} secret(s)>, tolerance_s={self.tolerance_s:g})"

    def verify(
        self,
        body: bytes | bytearray | memoryview | str,
        headers: HeaderSource,
        *,
        now: float | None = None,
    ) -> int:
        """Return the verified timestamp, or raise :class:`SignatureError` (``.reason`` says why)."""
        return check_signature(
            _as_bytes(body),
            _single(headers, TIMESTAMP_HEADER),
            _joined(headers, SIGNATURE_HEADER),
            self._secrets,
            now=self._clock() if now is None else now,
            tolerance_s=self.tolerance_s,
        )


def as_signature_verifier(
    secrets: SignatureVerifier | str | Iterable[str] | None,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> SignatureVerifier | None:
    """A verifier from one secret or several (with ``tolerance_s``), a verifier as it is, None for None
    (no signature check)."""
    if secrets is None or isinstance(secrets, SignatureVerifier):
        return secrets
    if isinstance(secrets, str):
        return SignatureVerifier(secrets, tolerance_s=tolerance_s)
    return SignatureVerifier(*secrets, tolerance_s=tolerance_s)


def verify_signature(
    body: bytes | bytearray | memoryview | str,
    headers: HeaderSource,
    secrets: str | Iterable[str],
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Verify a signed callback: the raw ``body``, its ``headers`` (any mapping, any case) and your
    signing secret(s). Returns the verified timestamp (unix seconds); raises :class:`SignatureError`
    whose ``reason`` is ``missing``, ``malformed``, ``stale``, ``future`` or ``no_match``."""
    one_or_many = [secrets] if isinstance(secrets, str) else list(secrets)
    return SignatureVerifier(*one_or_many, tolerance_s=tolerance_s).verify(body, headers, now=now)
