"""Fixtures of the fake Graph API: apps, tokens, WABAs, numbers and behaviour knobs.

The built-in default lets a user rehearse a migration with ``mogateway waba fake-graph`` and the
token ``rehearsal-token``: the destination WABA has no subscribed app (so the tool shows how it
subscribes one), and a few numbers each rehearse a classic failure.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

DEST_WABA = "102290129340398"
SOURCE_WABA = "104996122399160"
UNPAID_WABA = "109000000000001"
APP_ID = "1234567890123456"
OLD_APP_ID = "6543210987654321"
TOKEN = "rehearsal-token"
BUSINESS_ID = "5550001"
CLOUD_PHONE_NUMBER_ID = "106540352242922"
CLOUD_DISPLAY_NUMBER = "919876543210"

DEFAULT_KNOBS: dict[str, Any] = {
    "phone_number_format": "strict",  # strict: phone_number is national only; lenient: cc prefix allowed
    "twofa_check_at": "register",  # or "initiate": refuse the migration while two-step is on
    "code_ttl_s": 600,
    "max_verify_attempts": 5,
    "request_code_max": 5,
    "request_code_window_s": 3600,
    "register_latency_s": 0,
    "pin_max_guesses": 5,  # wrong PINs before 133008
    "pin_min_interval_s": 0,  # >0: two register calls closer than this → 133009
    "verify_callback_uri": True,  # an override is taken only if the URL answers the handshake (as Meta)
}


def _number(national: str, **overrides: Any) -> dict[str, Any]:
    number: dict[str, Any] = {
        "cc": "91",
        "national": national,
        "home_waba": SOURCE_WABA,
        "phone_id": "1065403522" + national[-5:],
        "platform_type": "CLOUD_API",
        "status": "CONNECTED",
        "verified_name": "Acme Shop",
        "name_status": "APPROVED",
        "pending_name_change": False,
        "two_step_enabled": False,
        "two_step_pin": None,
        "is_test_number": False,
        "in_use_business_app": False,
        "deleted_until": None,
        "sms_deliverable": True,
        "voice_deliverable": True,
        "business_id": BUSINESS_ID,
        "codes": [],  # codes to hand out first (deterministic rehearsals and tests); then random
    }
    number.update(overrides)
    return number


def _waba(**overrides: Any) -> dict[str, Any]:
    waba: dict[str, Any] = {
        "name": "Acme",
        "business_id": BUSINESS_ID,
        "review_status": "APPROVED",
        "business_verified": True,
        "payment_method": True,
        "messaging_for_approved": True,
        "subscribed_apps": [],
        "templates": [],
        "template_limit": 250,
    }
    waba.update(overrides)
    return waba


def default_fixtures() -> dict[str, Any]:
    """A fresh copy of the built-in rehearsal world."""
    return copy.deepcopy(_DEFAULT)


_DEFAULT: dict[str, Any] = {
    "apps": {
        APP_ID: {"name": "Rehearsal App", "link": "https://example.com/rehearsal"},
        OLD_APP_ID: {"name": "Old Provider App", "link": "https://example.com/old"},
    },
    "tokens": {
        TOKEN: {
            "app_id": APP_ID,
            "type": "SYSTEM_USER",
            "scopes": ["whatsapp_business_management", "whatsapp_business_messaging"],
            "waba_ids": [DEST_WABA, UNPAID_WABA],
            "expires_at": 0,
            "valid": True,
        },
        "expiring-token": {
            "app_id": APP_ID,
            "type": "USER",
            "scopes": ["whatsapp_business_management", "whatsapp_business_messaging"],
            "waba_ids": [DEST_WABA],
            "expires_in_s": 3600,
            "valid": True,
        },
        "messaging-only-token": {
            "app_id": APP_ID,
            "type": "SYSTEM_USER",
            "scopes": ["whatsapp_business_messaging"],
            "waba_ids": [DEST_WABA],
            "expires_at": 0,
            "valid": True,
        },
    },
    "wabas": {
        DEST_WABA: _waba(name="Acme (own Cloud API)"),
        UNPAID_WABA: _waba(name="Acme (no payment method)", payment_method=False),
        SOURCE_WABA: _waba(
            name="Acme (old provider)",
            subscribed_apps=[{"app_id": OLD_APP_ID}],
            templates=[
                {
                    "id": "9001",
                    "name": "order_update",
                    "language": "en_US",
                    "category": "UTILITY",
                    "status": "APPROVED",
                    "quality": "GREEN",
                },
                {
                    "id": "9002",
                    "name": "promo_diwali",
                    "language": "en_US",
                    "category": "MARKETING",
                    "status": "APPROVED",
                    "quality": "YELLOW",
                },
                {
                    "id": "9003",
                    "name": "otp_login",
                    "language": "en_US",
                    "category": "AUTHENTICATION",
                    "status": "REJECTED",
                    "quality": "UNKNOWN",
                },
            ],
        ),
    },
    "numbers": {
        "919876543210": _number("9876543210"),
        "919876543211": _number("9876543211", two_step_enabled=True, two_step_pin="246810"),
        "919876543212": _number("9876543212", name_status="PENDING_REVIEW"),
        "919876543213": _number("9876543213", sms_deliverable=False),
    },
    # Numbers already on the Cloud API, ready for /messages (the example number).
    "cloud_numbers": {
        CLOUD_PHONE_NUMBER_ID: {
            "display_phone_number": CLOUD_DISPLAY_NUMBER,
            "waba_id": DEST_WABA,
            "registered": True,
        }
    },
    "knobs": dict(DEFAULT_KNOBS),
}


def load_fixtures(path: Path) -> dict[str, Any]:
    """Read fixtures from a JSON file; missing sections and knobs take the built-in defaults."""
    with path.open("rb") as fh:
        data = json.loads(fh.read(4 << 20))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: fixtures must be a JSON object")
    return normalize(data)


def normalize(data: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults so the world can rely on every key being present."""
    out = copy.deepcopy(data)
    for section in ("apps", "tokens", "wabas", "numbers", "cloud_numbers"):
        out.setdefault(section, {})
    for waba_id, waba in out["wabas"].items():
        out["wabas"][waba_id] = _waba(**waba)
    for e164, number in out["numbers"].items():
        base = _number(number.get("national", e164[-10:]))
        base.update(number)
        out["numbers"][e164] = base
    out["knobs"] = {**DEFAULT_KNOBS, **(out.get("knobs") or {})}
    return out
