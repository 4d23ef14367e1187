"""Contract-exact callback requests for tests: the very bytes and headers the gateway sends.

    body, headers = make_callback("BAL", token="s3cret")
    response = client.post("/sms", content=body, headers=headers)

Bodies come from :func:`mogateway.core.contract.callback_body` and headers from
:func:`~mogateway.core.contract.callback_headers` (and :func:`~mogateway.core.signing.signature_headers`
for a signed callback), and ``sender`` is derived from the msisdn as the gateway derives it, so a test
built on these helpers tests against the real payload.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from mogateway import __version__
from mogateway.client.message import InboundMessage, parse_message
from mogateway.core import contract
from mogateway.core.contract import TsunixUnit
from mogateway.core.message import Message, check_business_number
from mogateway.core.numbering import normalize_msisdn
from mogateway.core.signing import signature_headers
from mogateway.core.whatsapp import parse_webhook, stored_only
from mogateway.core.whatsapp_member import member_json
from mogateway.edges.numbering_files import sender_resolver
from mogateway.testing.defaults import (
    DEFAULT_BUSINESS_NUMBER,
    DEFAULT_MSISDN,
    DEFAULT_SHORTCODE,
    DEFAULT_TOKEN,
    Channel,
)

__all__ = [
    "Channel",
    "DEFAULT_BUSINESS_NUMBER",
    "DEFAULT_MSISDN",
    "DEFAULT_SHORTCODE",
    "DEFAULT_TOKEN",
    "make_callback",
    "make_message",
    "make_mo",
    "new_message_id",
    "whatsapp_fields",
]


def new_message_id() -> str:
    """A fresh message id, shaped like a test one so it is never mistaken for a gateway id."""
    return f"test-{uuid.uuid4().hex}"


def make_mo(
    message: str = "HELLO",
    *,
    msisdn: str = DEFAULT_MSISDN,
    shortcode: str = DEFAULT_SHORTCODE,
    operator: str = "",
    circle: str = "",
    at: datetime | None = None,
    message_id: str = "",
    channel: Channel = "sms",
    whatsapp_message: Mapping[str, Any] | None = None,
) -> Message:
    """The MO as the gateway holds it. ``msisdn`` may be in any Indian form ("+91 98123-45678").

    ``channel="whatsapp"``: a WhatsApp MO (``shortcode`` is then the business number's digits, the
    origin ``whatsapp:simulated``), whose callback has ``"channel"`` and the typed ``whatsapp`` member.
    The message is ``whatsapp_message`` (Meta's message object, e.g. from
    ``mogateway.testing.fake_graph.webhooks``; its text then replaces ``message``) or a text of
    ``message``; either is read as the gateway reads a webhook (:func:`whatsapp_fields`).

    Raises ValueError (``NumberRejected``) for a number the gateway would refuse, and for a shortcode
    that is not digits (or not a business number, for WhatsApp), a naive ``at``, or a WhatsApp message
    the gateway stores without calling back (a removed reaction, a system notice).
    """
    number = normalize_msisdn(msisdn)
    origin, source_id = "http", None
    notes: tuple[str, ...] = ()
    whatsapp: str | None = None
    if channel == "whatsapp":
        try:
            shortcode = check_business_number(shortcode)
        except ValueError as exc:
            raise ValueError(f"business number (shortcode) {exc}") from None
        raw = whatsapp_message
        if raw is None:
            raw = {"from": number, "id": f"wamid.SIMULATED{uuid.uuid4().hex.upper()}", "type": "text"}
            raw = {**raw, "timestamp": str(int(time.time())), "text": {"body": message}}
        message, source_id, notes, whatsapp = whatsapp_fields(raw, shortcode)
        origin = "whatsapp:simulated"
    elif not shortcode.isdigit() or not shortcode.isascii():
        raise ValueError(f"shortcode must be digits, got {shortcode!r}")
    moment = datetime.now(UTC) if at is None else at
    if moment.tzinfo is None:
        raise ValueError("at must be an aware datetime (a naive one has no defined instant)")
    return Message(
        id=message_id,
        shortcode=shortcode,
        msisdn=number,
        text=message,
        received_at=moment.timestamp(),
        sender=sender_resolver().sender(number, operator, circle),
        origin=origin,
        source_id=source_id,
        notes=notes,
        whatsapp=whatsapp,
    )


def whatsapp_fields(
    raw: Mapping[str, Any], business_number: str, profile_name: str = "Test User"
) -> tuple[str, str, tuple[str, ...], str]:
    """``(text, wamid, notes, member)`` of Meta's message object ``raw`` as the gateway takes it: the
    message posted in a webhook body, read by the gateway's own parse (``core.whatsapp``: the text,
    the type note the dispatcher reads) and ``core.whatsapp_member`` (the callback's member).

    Raises ValueError for a message the gateway stores without calling back, with the gateway's
    reason."""
    body = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "simulated",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": business_number,
                                "phone_number_id": "simulated",
                            },
                            "contacts": [{"profile": {"name": profile_name}, "wa_id": raw.get("from", "")}],
                            "messages": [dict(raw)],
                        },
                    }
                ],
            }
        ],
    }
    hook = parse_webhook(orjson.dumps(body))
    if len(hook.messages) != 1:
        reasons = "; ".join(u.reason for u in hook.unread) or "not a message"
        raise ValueError(f"the gateway would not take this WhatsApp message: {reasons}")
    (m,) = hook.messages
    refused = stored_only(m)
    if refused is not None:
        raise ValueError(f"the gateway never calls back this message: {refused}")
    return m.text, m.wamid, (f"whatsapp {m.type}",), member_json(m.raw, m.profile_name)


def make_callback(
    message: str = "HELLO",
    *,
    msisdn: str = DEFAULT_MSISDN,
    shortcode: str = DEFAULT_SHORTCODE,
    operator: str = "",
    circle: str = "",
    at: datetime | None = None,
    tsunix_unit: TsunixUnit = "ms",
    token: str = DEFAULT_TOKEN,
    message_id: str | None = None,
    signing_secret: str | Sequence[str] | None = None,
    signed_at: int | None = None,
    channel: Channel = "sms",
    whatsapp_message: Mapping[str, Any] | None = None,
) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` of the callback the gateway would POST for this MO.

    With ``signing_secret`` (one, or several newest first as during a rotation) the callback is signed
    as the gateway signs it, at ``signed_at`` (unix seconds; default now).
    """
    mo = make_mo(
        message,
        msisdn=msisdn,
        shortcode=shortcode,
        operator=operator,
        circle=circle,
        at=at,
        channel=channel,
        whatsapp_message=whatsapp_message,
    )
    headers = contract.callback_headers(token, message_id or new_message_id(), __version__)
    body = contract.callback_body(mo, tsunix_unit)
    if signing_secret is not None:
        secrets = [signing_secret] if isinstance(signing_secret, str) else list(signing_secret)
        when = int(time.time()) if signed_at is None else signed_at
        headers.update(signature_headers(secrets, when, body))
    return body, headers


def make_message(
    message: str = "HELLO",
    *,
    msisdn: str = DEFAULT_MSISDN,
    shortcode: str = DEFAULT_SHORTCODE,
    operator: str = "",
    circle: str = "",
    at: datetime | None = None,
    tsunix_unit: TsunixUnit = "ms",
    message_id: str = "",
) -> InboundMessage:
    """An :class:`InboundMessage` for calling a handler directly in a unit test (no HTTP)."""
    mo = make_mo(message, msisdn=msisdn, shortcode=shortcode, operator=operator, circle=circle, at=at)
    # Through the real body, so what the handler sees is what the endpoint would have parsed.
    return parse_message(contract.callback_body(mo, tsunix_unit), message_id=message_id)
