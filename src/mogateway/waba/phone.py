"""Turning what a user types ("+91 98765 43210") into Graph's ``cc`` and ``phone_number`` fields."""

from __future__ import annotations

from dataclasses import dataclass

import phonenumbers


class PhoneError(ValueError):
    """The text is not an international phone number."""


@dataclass(frozen=True)
class PhoneNumber:
    """A number split the way the migration call wants it."""

    cc: str
    """Country calling code, digits only ("91")."""
    national: str
    """National significant number without country code or plus ("9876543210")."""

    @property
    def e164(self) -> str:
        """``+<cc><national>``."""
        return f"+{self.cc}{self.national}"

    @property
    def digits(self) -> str:
        """``<cc><national>``, used to name the default state file."""
        return f"{self.cc}{self.national}"


def parse_phone(text: str) -> PhoneNumber:
    """Parse an international number; spaces, dashes and brackets are allowed, the ``+`` is required.

    The migration guide asks for the number *without* the country code in ``phone_number``, so the
    national significant number is kept apart from the country code here.
    """
    cleaned = text.strip()
    if not cleaned.startswith("+"):
        raise PhoneError(
            f"{text!r}: give the number in international form with '+', e.g. \"+91 98765 43210\""
        )
    try:
        parsed = phonenumbers.parse(cleaned, None)
    except phonenumbers.NumberParseException as exc:
        raise PhoneError(f"{text!r} is not a phone number: {exc}") from None
    if not phonenumbers.is_possible_number(parsed):
        raise PhoneError(f"{text!r} has the wrong length for country code +{parsed.country_code}")
    return PhoneNumber(cc=str(parsed.country_code), national=phonenumbers.national_significant_number(parsed))
