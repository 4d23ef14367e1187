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
from collections.abc import Sequence
from datetime import UTC, datetime

from mogateway import __version__
from mogateway.client.message import InboundMessage, parse_message
from mogateway.core import contract
from mogateway.core.contract import TsunixUnit
from mogateway.core.message import Message, check_business_number
from mogateway.core.numbering import normalize_msisdn
from mogateway.core.signing import signature_headers
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
) -> Message:
    """The MO as the gateway holds it. ``msisdn`` may be in any Indian form ("+91 98123-45678").

    ``channel="whatsapp"``: a WhatsApp MO (``shortcode`` is then the business number's digits, the
    origin ``whatsapp:simulated`` and the source id a made-up wamid), whose callback has ``"channel"``.

    Raises ValueError (``NumberRejected``) for a number the gateway would refuse, and for a shortcode
    that is not digits (or not a business number, for WhatsApp) or a naive ``at``.
    """
    number = normalize_msisdn(msisdn)
    origin, source_id = "http", None
    if channel == "whatsapp":
        try:
            shortcode = check_business_number(shortcode)
        except ValueError as exc:
            raise ValueError(f"business number (shortcode) {exc}") from None
        origin, source_id = "whatsapp:simulated", f"wamid.SIMULATED{uuid.uuid4().hex.upper()}"
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
    )


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
) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` of the callback the gateway would POST for this MO.

    With ``signing_secret`` (one, or several newest first as during a rotation) the callback is signed
    as the gateway signs it, at ``signed_at`` (unix seconds; default now).
    """
    mo = make_mo(
        message, msisdn=msisdn, shortcode=shortcode, operator=operator, circle=circle, at=at, channel=channel
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
