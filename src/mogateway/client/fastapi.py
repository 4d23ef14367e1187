"""The callback endpoint for FastAPI: a ready router, or a dependency for a route of your own.

Ready router (token, signature, limits, budget, statuses all handled)::

    app.include_router(callback_router(handle, tokens=["s3cret"], path="/sms"))
    app.include_router(callback_router(handle, tokens=["s3cret"], signing_secrets=["whsec..."]))

Dependency (you write the route and answer with :func:`reply_response`; no budget is applied)::

    verified = message_dependency(tokens=["s3cret"])

    @app.post("/sms")
    async def sms(message: InboundMessage = Depends(verified)) -> Response:
        return reply_response(f"You said: {message.message}")

Rejections from the dependency are raised as :class:`CallbackRejected`, an ``HTTPException`` whose
``detail`` is the problem document; :func:`install_problem_responses` renders them as
``application/problem+json`` exactly as the router does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response

from mogateway.client.endpoint import (
    DEFAULT_BUDGET_S,
    DEFAULT_MAX_BODY_BYTES,
    MESSAGE_ID_HEADER,
    CallbackEndpoint,
)
from mogateway.client.handler import Handler
from mogateway.client.message import InboundMessage
from mogateway.client.responses import CallbackResponse, no_reply, reply
from mogateway.client.signatures import DEFAULT_TOLERANCE_S, SignatureVerifier
from mogateway.client.tokens import TokenVerifier
from mogateway.client.whatsapp_answer import WhatsAppAnswer

__all__ = [
    "CallbackRejected",
    "callback_router",
    "install_problem_responses",
    "message_dependency",
    "reply_response",
]


def _to_response(answer: CallbackResponse) -> Response:
    return Response(
        content=answer.body,
        status_code=answer.status,
        headers={k: v for k, v in answer.headers.items() if k != "content-type"},
        media_type=answer.content_type or None,
    )


def reply_response(text: str | WhatsAppAnswer | None) -> Response:
    """200 text/plain with ``text``, or an empty body (no reply) for None/"", or a rich WhatsApp answer
    (``application/json``, for a WhatsApp callback only)."""
    if isinstance(text, WhatsAppAnswer):
        return _to_response(text.response())
    return _to_response(reply(text) if text else no_reply())


async def _verified_body(request: Request, endpoint: CallbackEndpoint) -> bytes | CallbackResponse:
    """The body of a request with a valid token and signature, else the refusal to send (401, 413)."""
    refused = endpoint.authorize(request.headers.get("authorization"))
    if refused is not None:
        return refused
    body = await _read_limited(request, endpoint)
    if body is None:
        return endpoint.too_large()
    return endpoint.check_signature(body, request.headers) or body


async def _read_limited(request: Request, endpoint: CallbackEndpoint) -> bytes | None:
    """The body, or None when it is over the limit (read no further than the limit)."""
    if endpoint.declared_too_large(request.headers.get("content-length")):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > endpoint.max_body_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def callback_router(
    handler: Handler,
    tokens: TokenVerifier | str | Iterable[str],
    *,
    path: str = "/",
    budget_s: float = DEFAULT_BUDGET_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    include_in_schema: bool = True,
    signing_secrets: SignatureVerifier | str | Iterable[str] | None = None,
    signature_tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> APIRouter:
    """An ``APIRouter`` with one POST route at ``path`` answering callbacks with ``handler``."""
    endpoint = CallbackEndpoint(
        handler,
        tokens,
        budget_s=budget_s,
        max_body_bytes=max_body_bytes,
        signing_secrets=signing_secrets,
        signature_tolerance_s=signature_tolerance_s,
    )
    router = APIRouter()

    @router.post(
        path,
        include_in_schema=include_in_schema,
        summary="Inbound SMS callback from mogateway",
        response_class=Response,
        responses={
            200: {"content": {"text/plain": {}}, "description": "The reply (empty: no reply)"},
            401: {"description": "Missing or wrong bearer token, or a bad signature"},
            413: {"description": "Body too large"},
            422: {"description": "Body breaks the callback contract"},
        },
    )
    async def inbound_sms(request: Request) -> Response:
        body = await _verified_body(request, endpoint)
        if isinstance(body, CallbackResponse):
            return _to_response(body)
        return _to_response(await endpoint.handle(body, request.headers.get(MESSAGE_ID_HEADER)))

    return router


class CallbackRejected(HTTPException):
    """A callback the dependency refused; ``problem`` is the answer to send."""

    def __init__(self, problem: CallbackResponse) -> None:
        super().__init__(status_code=problem.status, detail=problem.body.decode(), headers=problem.headers)
        self.problem = problem


def message_dependency(
    tokens: TokenVerifier | str | Iterable[str],
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    signing_secrets: SignatureVerifier | str | Iterable[str] | None = None,
    signature_tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> Callable[[Request], Awaitable[InboundMessage]]:
    """A FastAPI dependency giving the verified, parsed :class:`InboundMessage` (or CallbackRejected)."""

    async def _never_called(_: InboundMessage) -> None:
        return None

    # Only the verifiers and the parser of the endpoint are used here; the handler is the user's route.
    endpoint = CallbackEndpoint(
        _never_called,
        tokens,
        max_body_bytes=max_body_bytes,
        signing_secrets=signing_secrets,
        signature_tolerance_s=signature_tolerance_s,
    )

    async def inbound_message(request: Request) -> InboundMessage:
        body = await _verified_body(request, endpoint)
        if isinstance(body, CallbackResponse):
            raise CallbackRejected(body)
        parsed = endpoint.parse(body, request.headers.get(MESSAGE_ID_HEADER))
        if isinstance(parsed, CallbackResponse):
            raise CallbackRejected(parsed)
        return parsed

    return inbound_message


def install_problem_responses(app: FastAPI) -> None:
    """Render :class:`CallbackRejected` as the problem document instead of FastAPI's ``{"detail"}``."""

    async def render(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, CallbackRejected)
        return _to_response(exc.problem)

    app.add_exception_handler(CallbackRejected, render)
