"""The inbound message as a client application sees it, parsed from the callback body.

Parsing is the contract's (:func:`mogateway.core.contract.parse_callback_body`): the gateway and the SDK
share one definition of the payload. This module only adds the shape an application wants to hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from mogateway.client.whatsapp import WhatsAppMessage, parse_whatsapp
from mogateway.core import contract
from mogateway.core.contract import TsunixUnit
from mogateway.core.message import Message, Sender

__all__ = ["InboundMessage", "InvalidPayload", "Sender", "parse_message"]


class InvalidPayload(contract.PayloadError):
    """A callback body that breaks the contract; ``field`` names the member, ``reason`` says why."""

    @classmethod
    def from_payload_error(cls, error: contract.PayloadError) -> InvalidPayload:
        """Wrap the contract's error so applications catch one SDK type."""
        return cls(error.field, error.reason)


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One MO delivered to the application: the gateway's :class:`~mogateway.core.message.Message`
    (``mo``), with the ``tsunix`` number as it was sent and the unit its magnitude says it is.

    ``sender`` is a :class:`~mogateway.core.message.Sender` (``cc``, ``ndc``, ``sn`` as numbers,
    ``sn_digits`` with its 6 digits restored, ``operator``, ``circle``). ``time`` is an aware UTC
    datetime taken from ``tsiso``. ``message_id`` is the gateway's id for this MO (header
    ``x-mogateway-message-id``), the same on every retry, so an application can deduplicate; it is ""
    when the request carried none.

    ``whatsapp`` is the body's ``whatsapp`` member as typed objects (``message.whatsapp.image.id``,
    ``mogateway.client.whatsapp``), None for an SMS.
    """

    mo: Message
    tsunix: int
    tsunix_unit: TsunixUnit
    whatsapp: WhatsAppMessage | None = None

    @property
    def shortcode(self) -> str:
        return self.mo.shortcode

    @property
    def msisdn(self) -> str:
        return self.mo.msisdn

    @property
    def message(self) -> str:
        """The text the person sent (the body's ``message``)."""
        return self.mo.text

    @property
    def channel(self) -> str:
        """``sms``, or ``whatsapp`` for a body with ``"channel": "whatsapp"`` (``shortcode`` is then the
        business number's digits)."""
        return self.mo.channel

    @property
    def sender(self) -> Sender:
        assert self.mo.sender is not None  # parsing guarantees it
        return self.mo.sender

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.mo.received_at, UTC)

    @property
    def message_id(self) -> str:
        return self.mo.id

    @property
    def msisdn_number(self) -> int:
        """The msisdn as the number the body carries (``919812345678``)."""
        return int(self.msisdn)

    @property
    def shortcode_number(self) -> int:
        """The shortcode as the number the body carries."""
        return int(self.shortcode)

    @property
    def tsunix_ms(self) -> int:
        """``tsunix`` in milliseconds, whatever unit it was sent in."""
        return self.tsunix if self.tsunix_unit == "ms" else self.tsunix * 1000

    @property
    def keyword(self) -> str:
        """The first word of the message in upper case ("" for a blank message): what routers match."""
        words = self.message.split(maxsplit=1)
        return words[0].upper() if words else ""

    @property
    def argument(self) -> str:
        """The message after its first word, stripped ("BAL  savings " -> "savings")."""
        words = self.message.split(maxsplit=1)
        return words[1].strip() if len(words) > 1 else ""

    @classmethod
    def from_mo(cls, mo: Message, *, tsunix_unit: TsunixUnit = "ms") -> InboundMessage:
        """Wrap a message the application already holds (e.g. in the gateway's own tests)."""
        sent = contract.tsunix(datetime.fromtimestamp(mo.received_at, UTC), tsunix_unit)
        return cls(mo, sent, tsunix_unit, _typed(None if mo.whatsapp is None else orjson.loads(mo.whatsapp)))


def _typed(member: Any) -> WhatsAppMessage | None:
    if member is None:
        return None
    try:
        return parse_whatsapp(member)
    except contract.PayloadError as exc:
        raise InvalidPayload.from_payload_error(exc) from None


def _unit_of(sent: int, time: datetime) -> TsunixUnit:
    # The contract accepted ``sent`` as either unit by magnitude; whichever unit lands within a second
    # of tsiso is the one it was read in (no second copy of the contract's threshold here).
    return "ms" if abs(sent - contract.tsunix(time, "ms")) < 1000 else "s"


def parse_message(body: bytes | str, *, message_id: str = "") -> InboundMessage:
    """Parse a callback body; raises :class:`InvalidPayload` naming the first bad field."""
    try:
        mo = contract.parse_callback_body(body, message_id=message_id)
    except contract.PayloadError as exc:
        raise InvalidPayload.from_payload_error(exc) from None
    # The message does not keep the number as sent nor the member as objects; the body was just
    # validated, so reading it again cannot fail.
    data: dict[str, Any] = orjson.loads(body)
    sent = int(data["tsunix"])
    unit = _unit_of(sent, datetime.fromtimestamp(mo.received_at, UTC))
    return InboundMessage(mo, sent, unit, _typed(data.get("whatsapp")))
