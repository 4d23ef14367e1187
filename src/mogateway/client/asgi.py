"""The callback endpoint as a plain ASGI application (no framework): run it with any ASGI server.

    app = CallbackApp(handle, tokens=["s3cret"])      # uvicorn module:app
    app = CallbackApp(handle, tokens=["s3cret"], signing_secrets=["whsec..."])  # signed callbacks

Every path answers (the callback URL is whatever was registered) unless ``path`` is given; only POST is
allowed. The token is checked before the body is read, and the body is read up to the limit only; with
``signing_secrets`` the signature is checked on that body before the handler runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, TypeAlias

from mogateway.client.endpoint import (
    DEFAULT_BUDGET_S,
    DEFAULT_MAX_BODY_BYTES,
    MESSAGE_ID_HEADER,
    CallbackEndpoint,
)
from mogateway.client.handler import Handler
from mogateway.client.responses import CallbackResponse, problem
from mogateway.client.signatures import DEFAULT_TOLERANCE_S, SignatureVerifier
from mogateway.client.tokens import TokenVerifier

__all__ = ["CallbackApp"]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]


class CallbackApp:
    """An ASGI 3 application answering the gateway's callbacks with ``handler``."""

    def __init__(
        self,
        handler: Handler,
        tokens: TokenVerifier | str | Iterable[str],
        *,
        budget_s: float = DEFAULT_BUDGET_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        path: str | None = None,
        signing_secrets: SignatureVerifier | str | Iterable[str] | None = None,
        signature_tolerance_s: float = DEFAULT_TOLERANCE_S,
    ) -> None:
        self.endpoint = CallbackEndpoint(
            handler,
            tokens,
            budget_s=budget_s,
            max_body_bytes=max_body_bytes,
            signing_secrets=signing_secrets,
            signature_tolerance_s=signature_tolerance_s,
        )
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not ours: returning without accepting closes them
        response = await self._respond(scope, receive)
        if response is not None:
            await _send(send, response)

    async def _respond(self, scope: Scope, receive: Receive) -> CallbackResponse | None:
        if self.path is not None and scope.get("path") != self.path:
            return problem(404, "no callback endpoint at this path")
        if scope.get("method") != "POST":
            return problem(405, "callbacks are POST requests", headers={"allow": "POST"})
        headers = _headers(scope)
        refused = self.endpoint.authorize(headers.get("authorization"))
        if refused is not None:
            return refused
        if self.endpoint.declared_too_large(headers.get("content-length")):
            return self.endpoint.too_large()
        try:
            body = await _read_body(receive, self.endpoint.max_body_bytes)
        except _ClientGone:
            return None
        if body is None:
            return self.endpoint.too_large()
        return self.endpoint.check_signature(body, scope.get("headers", ())) or await self.endpoint.handle(
            body, headers.get(MESSAGE_ID_HEADER)
        )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                self.endpoint.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class _ClientGone(Exception):
    """The client disconnected before sending its whole body: nobody is left to answer."""


def _headers(scope: Scope) -> dict[str, str]:
    # First occurrence wins; ASGI header names are already lower-case bytes.
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return headers


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None when it grows past ``limit``; _ClientGone when the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise _ClientGone
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not event.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, response: CallbackResponse) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
    headers.append((b"content-length", str(len(response.body)).encode()))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})
