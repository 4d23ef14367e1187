"""The answer to a WebSocket handshake: 403, without loading a WebSocket library.

The gateway serves no WebSocket. uvicorn's default (``ws="auto"``) loads the ``websockets`` package in
every worker at start, hands each handshake to it, and it asks the application, which has no WebSocket
route and refuses: 403. ``ws="none"`` would load nothing but answer the handshake as a plain HTTP request
and log two warnings for each (one of them advice to install a WebSocket library): anyone could fill
the log. This protocol, given to uvicorn as its WebSocket protocol (``cli/serve.py``), gives the same
403 the gateway always gave, at once, and closes the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

__all__ = ["WebSocketRefusal"]

_REFUSAL = (
    b"HTTP/1.1 403 Forbidden\r\n",
    b"connection: close\r\ncontent-length: 0\r\ncontent-type: text/plain; charset=utf-8\r\n\r\n",
)


class WebSocketRefusal(asyncio.Protocol):
    """Takes over a connection whose request asked to become a WebSocket: answers 403 (with the
    server's default headers: its date) and closes it; anything more the client sends is dropped."""

    def __init__(self, *, config: Any, server_state: Any, app_state: Any) -> None:
        self._default_headers: list[tuple[bytes, bytes]] = list(server_state.default_headers)
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is one without subclassing it

    def data_received(self, data: bytes) -> None:
        """The first call carries the handshake's head (uvicorn passes it on): answer it."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        head = b"".join(name + b": " + value + b"\r\n" for name, value in self._default_headers)
        transport.write(_REFUSAL[0] + head + _REFUSAL[1])
        transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
