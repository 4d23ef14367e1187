"""SDK for applications that receive mogateway's callbacks.

Parse and check the payload (:func:`parse_message` -> :class:`InboundMessage`), verify the bearer token
(:class:`TokenVerifier`) and the signature of signed callbacks (:func:`verify_signature`,
:class:`SignatureVerifier`), read a WhatsApp message's ``whatsapp`` member as typed objects
(:class:`WhatsAppMessage`, ``mogateway.client.whatsapp``), route by keyword (:class:`KeywordRouter`)
and serve a handler as an endpoint: :class:`CallbackApp` (plain ASGI), ``mogateway.client.fastapi`` and
``mogateway.client.flask``. The framework adapters are imported from their own modules so that
FastAPI/Flask stay optional. A WhatsApp handler may answer buttons, lists, media and more
with :class:`WhatsAppAnswer`, and fetch a media message's media through the gateway with
:func:`fetch_media`.
"""

from __future__ import annotations

from mogateway.client.asgi import CallbackApp
from mogateway.client.endpoint import DEFAULT_BUDGET_S, DEFAULT_MAX_BODY_BYTES, CallbackEndpoint
from mogateway.client.handler import Handler, Reply
from mogateway.client.media import MediaError, fetch_media
from mogateway.client.message import InboundMessage, InvalidPayload, Sender, parse_message
from mogateway.client.responses import CallbackResponse
from mogateway.client.router import KeywordRouter
from mogateway.client.signatures import SignatureError, SignatureFailure, SignatureVerifier, verify_signature
from mogateway.client.tokens import TokenVerifier, bearer_token
from mogateway.client.whatsapp import WhatsAppMessage, parse_whatsapp
from mogateway.client.whatsapp_answer import RichAnswerError, WhatsAppAnswer

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_MAX_BODY_BYTES",
    "CallbackApp",
    "CallbackEndpoint",
    "CallbackResponse",
    "Handler",
    "InboundMessage",
    "InvalidPayload",
    "KeywordRouter",
    "MediaError",
    "Reply",
    "RichAnswerError",
    "Sender",
    "SignatureError",
    "SignatureFailure",
    "SignatureVerifier",
    "TokenVerifier",
    "WhatsAppMessage",
    "WhatsAppAnswer",
    "bearer_token",
    "fetch_media",
    "parse_message",
    "parse_whatsapp",
    "verify_signature",
]
