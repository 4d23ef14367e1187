"""Bearer tokens for the admin and ingest APIs, compared in constant time."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from mogateway.api.problems import ApiProblem

__all__ = ["bearer_of", "require_token"]


def bearer_of(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def require_token(request: Request, expected: str, what: str) -> None:
    """Raise a 401 problem unless the request carries ``expected`` as its bearer token."""
    given = bearer_of(request)
    if given is None:
        raise ApiProblem(401, f"missing bearer token (use the {what} token)", kind="unauthorized")
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise ApiProblem(401, f"wrong {what} token", kind="unauthorized")
