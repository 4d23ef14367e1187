"""Bearer-token check for callback requests, in constant time, with several tokens for rotation.

To rotate without downtime an application accepts the old and the new token at once, the gateway is
switched to the new one, then the old one is removed. Every configured token is compared on every
request (no early exit), so the time taken says neither whether nor which token matched.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

__all__ = ["TokenVerifier", "bearer_token"]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``authorization: Bearer <token>`` header, or None when absent or malformed.

    The scheme is case-insensitive and surrounding whitespace is ignored (RFC 9110 / RFC 6750); a
    header with another scheme, no token, or a token containing whitespace yields None.
    """
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or any(ch.isspace() for ch in token):
        return None
    return token


class TokenVerifier:
    """Accepts a callback when its bearer token is one of the configured tokens."""

    __slots__ = ("_tokens",)

    def __init__(self, *tokens: str) -> None:
        cleaned = [t.strip() for t in tokens if t and t.strip()]
        if not cleaned:
            raise ValueError("TokenVerifier needs at least one non-empty token")
        # Bytes, because compare_digest on str refuses non-ASCII; utf-8 keeps any token comparable.
        self._tokens: tuple[bytes, ...] = tuple(t.encode() for t in cleaned)

    @classmethod
    def from_iterable(cls, tokens: Iterable[str]) -> TokenVerifier:
        """Build from a list (e.g. a comma-separated environment variable already split)."""
        return cls(*tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def __repr__(self) -> str:
        # Never show the tokens themselves.
        return f"TokenVerifier(<{len(self._tokens)} token(s)>)"

    def verify_token(self, token: str | None) -> bool:
        """True when ``token`` equals one of the configured tokens (constant time over all of them)."""
        candidate = (token or "").encode()
        matched = False
        for known in self._tokens:
            # `|` not `or`: every comparison runs whatever the earlier ones returned.
            matched |= hmac.compare_digest(candidate, known)
        return matched and token is not None

    def verify(self, authorization: str | None) -> bool:
        """True when an ``authorization`` header value carries a valid bearer token."""
        return self.verify_token(bearer_token(authorization))
