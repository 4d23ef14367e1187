"""The answers a callback endpoint gives, framework-free: the adapters only copy them onto the wire.

Errors are RFC 9457 problem documents (``application/problem+json``); a 422 also carries ``field`` and
``reason`` so the gateway's journal (and a human reading it) sees which member was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus

import orjson

__all__ = ["PLAIN_TEXT", "PROBLEM_JSON", "CallbackResponse", "no_reply", "problem", "reply"]

#: Content type of a reply; the gateway accepts text/plain with any charset, we always send utf-8.
PLAIN_TEXT = "text/plain; charset=utf-8"
PROBLEM_JSON = "application/problem+json"


@dataclass(frozen=True, slots=True)
class CallbackResponse:
    """Status, headers (lower-case names) and body of one answer."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def content_type(self) -> str:
        """The content-type header ("" when none)."""
        return self.headers.get("content-type", "")


def reply(text: str) -> CallbackResponse:
    """200 text/plain with ``text``: the gateway sends it to the subscriber as the session reply."""
    return CallbackResponse(200, text.encode("utf-8"), {"content-type": PLAIN_TEXT})


def no_reply() -> CallbackResponse:
    """200 text/plain with an empty body: the gateway sends nothing to the subscriber."""
    return CallbackResponse(200, b"", {"content-type": PLAIN_TEXT})


#: RFC 9110's names where Python's ``HTTPStatus`` phrases differ before 3.13 ("Unprocessable Entity"),
#: so an application answers the same problem document on every Python it runs on.
RFC9110_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def problem(
    status: int,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extensions: str,
) -> CallbackResponse:
    """A problem document for ``status`` (title is RFC 9110's status phrase, ``type`` is about:blank)."""
    document: dict[str, object] = {
        "type": "about:blank",
        "title": RFC9110_TITLES.get(status) or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **extensions,
    }
    return CallbackResponse(status, orjson.dumps(document), {"content-type": PROBLEM_JSON, **(headers or {})})
