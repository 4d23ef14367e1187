"""The callback endpoint for Flask (WSGI): a blueprint with one POST route.

    app.register_blueprint(callback_blueprint(handle, tokens=["s3cret"], path="/sms"))
    app.register_blueprint(callback_blueprint(handle, tokens=["s3cret"], signing_secrets=["whsec..."]))

The handler runs on the endpoint's worker threads so the budget holds even in a sync server: the
request thread waits at most ``budget_s`` and then answers "no reply".
"""

from __future__ import annotations

from collections.abc import Iterable

from flask import Blueprint, Response, request

from mogateway.client.endpoint import (
    DEFAULT_BUDGET_S,
    DEFAULT_MAX_BODY_BYTES,
    MESSAGE_ID_HEADER,
    CallbackEndpoint,
)
from mogateway.client.handler import Handler
from mogateway.client.responses import CallbackResponse
from mogateway.client.signatures import DEFAULT_TOLERANCE_S, SignatureVerifier
from mogateway.client.tokens import TokenVerifier

__all__ = ["callback_blueprint"]


def _to_response(answer: CallbackResponse) -> Response:
    response = Response(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response.headers[name] = value
    return response


def _read_limited(limit: int) -> bytes | None:
    """The request body, or None when it is over ``limit`` (never reads more than limit + 1 bytes)."""
    # The stream is already bounded by content-length (werkzeug's LimitedStream) or by the chunked
    # decoder, so one bounded read cannot block past the body.
    data: bytes = request.stream.read(limit + 1)
    return None if len(data) > limit else data


def callback_blueprint(
    handler: Handler,
    tokens: TokenVerifier | str | Iterable[str],
    *,
    path: str = "/",
    name: str = "mogateway_callback",
    url_prefix: str | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    signing_secrets: SignatureVerifier | str | Iterable[str] | None = None,
    signature_tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> Blueprint:
    """A blueprint answering POST ``path`` with ``handler`` (register it with ``app.register_blueprint``)."""
    endpoint = CallbackEndpoint(
        handler,
        tokens,
        budget_s=budget_s,
        max_body_bytes=max_body_bytes,
        signing_secrets=signing_secrets,
        signature_tolerance_s=signature_tolerance_s,
    )
    blueprint = Blueprint(name, __name__, url_prefix=url_prefix)

    @blueprint.post(path)
    def inbound_sms() -> Response:
        refused = endpoint.authorize(request.headers.get("authorization"))
        if refused is not None:
            return _to_response(refused)
        if endpoint.declared_too_large(request.content_length):
            return _to_response(endpoint.too_large())
        body = _read_limited(endpoint.max_body_bytes)
        if body is None:
            return _to_response(endpoint.too_large())
        refused = endpoint.check_signature(body, request.headers)
        if refused is not None:
            return _to_response(refused)
        return _to_response(endpoint.handle_sync(body, request.headers.get(MESSAGE_ID_HEADER)))

    return blueprint
