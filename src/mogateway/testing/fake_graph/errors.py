"""Graph's error envelope, as the fake answers it (shape and HTTP statuses per Meta's tables)."""

from __future__ import annotations

import secrets
from typing import Any

# HTTP status Meta answers for a code (older copy of Meta's table; the tool must not rely on it).
_STATUS = {
    0: 401,
    190: 401,
    104: 400,
    3: 500,
    10: 403,
    4: 400,
    17: 400,
    32: 400,
    613: 400,
    80007: 400,
    80008: 400,
    100: 400,
    1: 500,
    2: 503,
    131000: 500,
    133000: 500,
    133004: 503,
    368: 403,
    131031: 403,
}


def http_status_for(code: int) -> int:
    """The HTTP status Graph uses for ``code``."""
    if code in _STATUS:
        return _STATUS[code]
    if 200 <= code <= 299:
        return 403
    return 400


def trace_id() -> str:
    """A random fbtrace_id-like token."""
    return secrets.token_urlsafe(16)[:23]


class FakeGraphError(Exception):
    """An error the fake answers with Meta's envelope."""

    def __init__(
        self,
        code: int,
        title: str,
        *,
        subcode: int | None = None,
        details: str | None = None,
        user_title: str | None = None,
        user_msg: str | None = None,
        is_transient: bool = False,
        http_status: int | None = None,
        type: str | None = None,
    ) -> None:
        super().__init__(title)
        self.code = code
        self.title = title
        self.subcode = subcode
        self.details = details
        self.user_title = user_title
        self.user_msg = user_msg
        self.is_transient = is_transient
        self.http_status = http_status or http_status_for(code)
        self.type = type or ("GraphMethodException" if (code, subcode) == (100, 33) else "OAuthException")

    def envelope(self, fbtrace_id: str) -> dict[str, Any]:
        """The JSON body: ``{"error": {...}}``."""
        error: dict[str, Any] = {
            "message": f"(#{self.code}) {self.title}",
            "type": self.type,
            "code": self.code,
            "is_transient": self.is_transient,
            "fbtrace_id": fbtrace_id,
        }
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        if self.user_title:
            error["error_user_title"] = self.user_title
        if self.user_msg:
            error["error_user_msg"] = self.user_msg
        if self.details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": self.details}
        return {"error": error}


def not_found(object_id: str, method: str = "get") -> FakeGraphError:
    """100/33: wrong id or no access."""
    return FakeGraphError(
        100,
        f"Unsupported {method} request. Object with ID '{object_id}' does not exist, cannot be loaded due "
        "to missing permissions, or does not support this operation.",
        subcode=33,
    )


def invalid_parameter(details: str) -> FakeGraphError:
    """100: a missing or invalid parameter."""
    return FakeGraphError(100, "Invalid parameter", details=details)


def migration_error(user_title: str, user_msg: str = "", *, details: str | None = None) -> FakeGraphError:
    """100/2388103: one of the "cannot migrate" variants."""
    return FakeGraphError(
        100,
        "Invalid parameter",
        subcode=2388103,
        user_title=user_title,
        user_msg=user_msg or user_title,
        details=details or user_msg or user_title,
    )
