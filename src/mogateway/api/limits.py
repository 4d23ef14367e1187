"""A body size limit for every request, enforced before the body reaches a route (pure ASGI)."""

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

    def __init__(self, app: Any, default: int, per_path: dict[str, int]) -> None:
        self.app = app
        self.default = default
        self.per_path = per_path

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope["path"], self.default)
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

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
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
