"""A callback endpoint without a framework: token, body limit, payload, handler, answer.

The ASGI, FastAPI and Flask adapters all delegate here, so the three give the same statuses:

* 401 (problem JSON, ``www-authenticate: Bearer``) when the bearer token is missing or wrong;
  checked before the body is read.
* 413 when the body is larger than ``max_body_bytes``.
* 401 (problem JSON with ``reason``) when the endpoint has signing secrets and the signature is
  missing, malformed, stale, from the future or matches none of them; checked on the raw body, before
  it is parsed and before the handler runs.
* 422 (problem JSON with ``field`` and ``reason``) when the body breaks the contract.
* 200 ``text/plain; charset=utf-8`` with the handler's answer; an empty body when it answers None/""
  or overruns its budget (the gateway then sends no reply).
* 500 (problem JSON, no internals) when the handler raises or returns something other than str/None.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mogateway.client.handler import BudgetExceeded, Handler, HandlerRunner, Reply
from mogateway.client.message import InboundMessage, InvalidPayload, parse_message
from mogateway.client.responses import CallbackResponse, no_reply, problem, reply
from mogateway.client.signatures import (
    DEFAULT_TOLERANCE_S,
    HeaderSource,
    SignatureError,
    SignatureVerifier,
    as_signature_verifier,
)
from mogateway.client.tokens import TokenVerifier
from mogateway.client.whatsapp_answer import WhatsAppAnswer

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_MAX_BODY_BYTES",
    "MESSAGE_ID_HEADER",
    "CallbackEndpoint",
    "as_verifier",
]

#: Default time a handler gets: well below the gateway's 30 s, leaving room for the network.
DEFAULT_BUDGET_S = 25.0
#: Default body limit. The longest MO (255 parts of UCS-2 text) is about 51 KB of UTF-8 JSON.
DEFAULT_MAX_BODY_BYTES = 128 * 1024
#: The gateway's id of the MO, the same on every retry.
MESSAGE_ID_HEADER = "x-mogateway-message-id"

logger = logging.getLogger("mogateway.client")


def as_verifier(tokens: TokenVerifier | str | Iterable[str]) -> TokenVerifier:
    """A TokenVerifier from a verifier, one token, or several tokens."""
    if isinstance(tokens, TokenVerifier):
        return tokens
    if isinstance(tokens, str):
        return TokenVerifier(tokens)
    return TokenVerifier(*tokens)


class CallbackEndpoint:
    """The behaviour of a callback endpoint, shared by every adapter."""

    def __init__(
        self,
        handler: Handler,
        tokens: TokenVerifier | str | Iterable[str],
        *,
        budget_s: float = DEFAULT_BUDGET_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_threads: int = 32,
        signing_secrets: SignatureVerifier | str | Iterable[str] | None = None,
        signature_tolerance_s: float = DEFAULT_TOLERANCE_S,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.verifier = as_verifier(tokens)
        #: None: callbacks are not signed (or the application does not check); see check_signature.
        self.signatures = as_signature_verifier(signing_secrets, tolerance_s=signature_tolerance_s)
        self.runner = HandlerRunner(handler, budget_s=budget_s, max_threads=max_threads)
        self.max_body_bytes = max_body_bytes

    @property
    def budget_s(self) -> float:
        """Seconds a handler gets before the endpoint answers "no reply" for it."""
        return self.runner.budget_s

    def close(self) -> None:
        """Release the handler's worker threads."""
        self.runner.close()

    # ------------------------------------------------------------------------- steps, in order

    def authorize(self, authorization: str | None) -> CallbackResponse | None:
        """None when the token is valid, else the 401 to send (before reading any body)."""
        if self.verifier.verify(authorization):
            return None
        detail = "missing bearer token" if not authorization else "invalid bearer token"
        return problem(401, detail, headers={"www-authenticate": "Bearer"})

    def check_signature(self, body: bytes, headers: HeaderSource) -> CallbackResponse | None:
        """None when the signature is valid (or no signing secret is configured), else the 401 to send."""
        if self.signatures is None:
            return None
        try:
            self.signatures.verify(body, headers)
        except SignatureError as exc:
            # The reason is said (the gateway records the answer), the expected signature never is.
            return problem(
                401, f"signature: {exc}", headers={"www-authenticate": "Bearer"}, reason=exc.reason.value
            )
        return None

    def too_large(self) -> CallbackResponse:
        """The 413 for a body over the limit."""
        return problem(413, f"body larger than {self.max_body_bytes} bytes")

    def declared_too_large(self, content_length: str | int | None) -> bool:
        """True when a content-length header already announces a body over the limit."""
        try:
            return content_length is not None and int(content_length) > self.max_body_bytes
        except ValueError:
            return False

    def parse(self, body: bytes, message_id: str | None) -> InboundMessage | CallbackResponse:
        """The message, or the 413/422 to send."""
        if len(body) > self.max_body_bytes:
            return self.too_large()
        try:
            return parse_message(body, message_id=message_id or "")
        except InvalidPayload as exc:
            return problem(422, str(exc), field=exc.field, reason=exc.reason)

    # ------------------------------------------------------------------------- whole requests

    async def respond(
        self,
        authorization: str | None,
        body: bytes,
        message_id: str | None = None,
        headers: HeaderSource = (),
    ) -> CallbackResponse:
        """The full answer to a request (asyncio servers); ``headers`` carry the signature."""
        return (
            self.authorize(authorization)
            or self.check_signature(body, headers)
            or await self.handle(body, message_id)
        )

    def respond_sync(
        self,
        authorization: str | None,
        body: bytes,
        message_id: str | None = None,
        headers: HeaderSource = (),
    ) -> CallbackResponse:
        """The full answer to a request (WSGI servers: blocks the calling thread)."""
        return (
            self.authorize(authorization)
            or self.check_signature(body, headers)
            or self.handle_sync(body, message_id)
        )

    async def handle(self, body: bytes, message_id: str | None = None) -> CallbackResponse:
        """The answer to an already authorized request (asyncio servers)."""
        parsed = self.parse(body, message_id)
        if isinstance(parsed, CallbackResponse):
            return parsed
        try:
            answer = await self.runner.run(parsed)
        except BudgetExceeded:
            return self._overrun(parsed)
        except Exception:
            return self._failed(parsed)
        return self._answer(answer, parsed)

    def handle_sync(self, body: bytes, message_id: str | None = None) -> CallbackResponse:
        """The answer to an already authorized request (WSGI servers: blocks the calling thread)."""
        parsed = self.parse(body, message_id)
        if isinstance(parsed, CallbackResponse):
            return parsed
        try:
            answer = self.runner.run_sync(parsed)
        except BudgetExceeded:
            return self._overrun(parsed)
        except Exception:
            return self._failed(parsed)
        return self._answer(answer, parsed)

    # ------------------------------------------------------------------------- outcomes

    @staticmethod
    def _answer(answer: Reply, message: InboundMessage) -> CallbackResponse:
        if isinstance(answer, WhatsAppAnswer):
            if message.channel == "whatsapp":
                return answer.response()
            logger.warning(
                "handler answered a WhatsApp answer to an SMS; answered no reply (message id %r)",
                message.message_id,
            )
            return no_reply()
        return reply(answer) if answer else no_reply()

    def _overrun(self, message: InboundMessage) -> CallbackResponse:
        # The message text and number stay out of logs (they are the subscriber's data).
        logger.warning(
            "handler overran its %.1f s budget; answered no reply (message id %r)",
            self.budget_s,
            message.message_id,
        )
        return no_reply()

    @staticmethod
    def _failed(message: InboundMessage) -> CallbackResponse:
        logger.exception("handler failed (message id %r)", message.message_id)
        return problem(500, "the application's handler failed")
