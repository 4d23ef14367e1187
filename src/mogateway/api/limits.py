"""A body size limit for every request, enforced before the body reaches a route (pure ASGI).

A body announced larger than the limit (content-length) is refused before the route runs. A body without
content-length (chunked) is counted while the route reads it; the chunk that passes the limit raises out
of the route and the middleware answers 413 instead. Either way the rest of the refused body is read and
thrown away first (up to 1 MiB), so the client sees the 413 rather than a reset - but only if there is a
rest: once the server's last chunk (``more_body`` false) has been received, another ``receive()`` would
wait for a disconnect that only comes after the response, which has not been sent yet.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["BodyLimit"]

Scope = dict[str, Any]


class _TooLarge(BaseException):
    """Raised from ``receive`` when a streamed body passes the limit.

    A BaseException on purpose: the app's catch-all ``Exception`` handler would otherwise catch it, log a
    traceback and answer 500 before the 413 below could be sent.
    """


class BodyLimit:
    """Refuses bodies larger than the limit for their path (413 problem), by header and while streaming."""

    def __init__(
        self, app: Any, default: int, per_path: dict[str, int], per_suffix: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.default = default
        self.per_path = per_path
        self.per_suffix = per_suffix or {}  # paths with an id inside: /v1/clients/{id}/dlt-templates/import

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        limit = self.per_path.get(path)
        if limit is None:
            limit = next((n for end, n in self.per_suffix.items() if path.endswith(end)), self.default)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > limit
                except ValueError:
                    too_big = True
                if too_big:
                    await _drain(receive)
                    await _refuse(send, limit)
                    return
        received = 0
        started = False
        body_complete = False  # the last chunk was received: there is nothing left to drain

        async def limited_receive() -> Any:
            nonlocal received, body_complete
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_complete = not message.get("more_body", False)
                if received > limit:
                    raise _TooLarge
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                if not body_complete:
                    await _drain(receive)
                await _refuse(send, limit)


#: A refused body up to this size is read and thrown away before answering: a client still writing
#: its body when the server answers and closes gets a connection reset instead of the 413.
_DRAIN_AT_MOST = 1024 * 1024


async def _drain(receive: Any) -> None:
    drained = 0
    while drained <= _DRAIN_AT_MOST:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(send: Any, limit: int) -> None:
    body = orjson.dumps(
        {
            "type": "urn:mogateway:problem:too-large",
            "title": "Content too large",
            "status": 413,
            "detail": f"request body larger than {limit} bytes",
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/problem+json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})
