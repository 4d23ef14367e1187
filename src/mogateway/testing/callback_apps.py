"""Callback applications for tests (well and badly behaved) and real servers to run them on loopback.

    with serve_asgi(answer_app(b"hi", delay_s=5)) as url:   # a slow application on 127.0.0.1
        ...

The apps are plain ASGI; ``serve_asgi`` runs one on uvicorn and ``serve_wsgi`` a WSGI app on werkzeug's
threaded server, each in a background thread on a free port, stopped when the block ends.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mogateway.client.asgi import Receive, Scope, Send

__all__ = [
    "RecordedRequest",
    "RecordingApp",
    "answer_app",
    "serve_asgi",
    "serve_wsgi",
]

_STARTUP_S = 10.0


async def _drain(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            break
        chunks.append(event.get("body", b""))
        if not event.get("more_body", False):
            break
    return b"".join(chunks)


async def _skip_lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        await send({"type": event["type"] + ".complete"})
        if event["type"] == "lifespan.shutdown":
            return


def answer_app(
    body: bytes = b"OK",
    *,
    status: int = 200,
    content_type: str | None = "text/plain; charset=utf-8",
    delay_s: float = 0.0,
) -> Any:
    """An ASGI app giving the same answer to every request, after ``delay_s``: e.g. a slow one,
    one answering 500, one with ``application/json``, one with an empty body."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _skip_lifespan(receive, send)
            return
        await _drain(receive)
        if delay_s:
            await asyncio.sleep(delay_s)
        headers = [(b"content-length", str(len(body)).encode())]
        if content_type is not None:
            headers.append((b"content-type", content_type.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request an application received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RecordingApp:
    """An ASGI app that records every request and answers ``answer`` as text/plain."""

    answer: bytes = b""
    requests: list[RecordedRequest] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _skip_lifespan(receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.requests.append(RecordedRequest(scope["method"], scope["path"], headers, await _drain(receive)))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": self.answer})


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve_asgi(app: Any, *, graceful_s: int = 1) -> Iterator[str]:
    """Run ``app`` on uvicorn on 127.0.0.1 (free port) in a thread; yields the base URL."""
    import uvicorn

    sock = _loopback_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, loop="asyncio", log_level="warning", access_log=False, timeout_graceful_shutdown=graceful_s
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _STARTUP_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(graceful_s + 5)
        sock.close()


@contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    """Run a WSGI ``app`` on werkzeug's threaded server on 127.0.0.1 (free port); yields the base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
