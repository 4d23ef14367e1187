"""The made-up MO's defaults, on their own so that reading them imports nothing: ``mogateway simulate``
shows them in its help (cli/simulate.py) without loading the payload helpers (``testing.payloads``,
which re-exports them)."""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_BUSINESS_NUMBER", "DEFAULT_MSISDN", "DEFAULT_SHORTCODE", "DEFAULT_TOKEN", "Channel"]

#: The channels a made-up MO can come by.
Channel = Literal["sms", "whatsapp"]

DEFAULT_MSISDN = "919812345678"
DEFAULT_SHORTCODE = "56767"
#: The business number a made-up WhatsApp MO was sent to (the fake Graph API's default number).
DEFAULT_BUSINESS_NUMBER = "919876543210"
#: The token the helpers put in ``authorization`` unless told otherwise (tests only!).
DEFAULT_TOKEN = "test-token"
