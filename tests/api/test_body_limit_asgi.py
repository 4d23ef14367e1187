"""BodyLimit at the ASGI level, with a server side that behaves exactly like uvicorn's ``receive``.

uvicorn hands the body over in chunks; once the last one (``more_body`` false) was handed over, a further
``receive()`` waits until the response is complete (or the client goes away) and then says
``http.disconnect``. The middleware must therefore never wait for more body after the last chunk.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from mogateway.api.limits import BodyLimit

LIMIT = 1000


class UvicornLikeServer:
    """Feeds ``chunks`` to the app; after the last one, ``receive`` blocks until the response is sent."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.sent: list[dict[str, Any]] = []
        self.receives = 0
        self._response_complete = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        self.receives += 1
        if self.chunks:
            body = self.chunks.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(self.chunks)}
        await self._response_complete.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self._response_complete.set()

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])


async def reads_the_whole_body(scope: Any, receive: Any, send: Any) -> None:
    body = await Request(scope, receive).body()
    await Response(b"read %d bytes" % len(body))(scope, receive, send)


def scope(headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/inbound", "headers": headers or []}


async def call(server: UvicornLikeServer, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    app = BodyLimit(reads_the_whole_body, LIMIT, {})
    async with asyncio.timeout(2):  # the bug this guards against was a wait that never ended
        await app(scope(headers), server.receive, server.send)


async def test_a_chunked_body_that_passes_the_limit_in_its_last_chunk_is_413_at_once() -> None:
    server = UvicornLikeServer([b"x" * 600, b"x" * 600])  # over the limit only with the last chunk
    await call(server)
    assert server.status == 413
    assert orjson.loads(server.sent[1]["body"])["status"] == 413
    assert server.receives == 2  # nothing was waited for after the last chunk


async def test_a_single_final_chunk_over_the_limit_is_413_at_once() -> None:
    server = UvicornLikeServer([b"x" * (LIMIT + 1)])
    await call(server)
    assert server.status == 413 and server.receives == 1


async def test_a_body_that_passes_the_limit_early_is_drained_before_the_413() -> None:
    server = UvicornLikeServer([b"x" * 1200, b"y" * 100, b"z" * 100])
    await call(server)
    assert server.status == 413
    assert server.chunks == []  # the rest was read and thrown away, so the client sees the answer


async def test_a_body_at_the_limit_reaches_the_route() -> None:
    server = UvicornLikeServer([b"x" * 500, b"x" * 500])
    await call(server)
    assert server.status == 200 and server.sent[1]["body"] == b"read 1000 bytes"


async def test_an_announced_oversized_body_is_refused_before_the_route_reads_it() -> None:
    server = UvicornLikeServer([b"x" * 800, b"x" * 800])
    await call(server, [(b"content-length", b"1600")])
    assert server.status == 413 and server.chunks == []
