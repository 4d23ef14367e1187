"""The sender's msisdn: any written or SMPP form of an Indian mobile number → ``91XXXXXXXXXX``, or a refusal.

Rules stated before the code (``docs/numbering.md`` is the operator's guide, with every example):

* Accepted: ``919810012345``, ``9810012345``, ``09810012345``, ``+91 98100 12345``, ``0091 98100 12345``
  and ``+91 (0)98100 12345``; spaces, hyphens, dots, slashes and parentheses between digits are ignored.
* The SMPP type of number decides how digits are read: TON 1 international (the digits start with the
  country code), TON 2 national (a 12-digit ``91…`` is still accepted, SMSCs mislabel it), TON 5
  alphanumeric refused, anything else guessed from the form. NPI 0, 1 and 8 are telephone plans; any
  other is refused.
* Everything else is refused with :class:`NumberRejected`: a short ``reason`` (journal, 422 body) and a
  stable ``code`` (metrics). Digits without ``+`` are only called foreign when they make a valid number
  of another country; otherwise the reason is the length.
* The national number must start with 6–9. Fixed-line numbers starting 6–8 are not refused: the
  operator that delivered the MO knows its subscriber better than a pattern table does.

The hot path (a plain ``91XXXXXXXXXX`` string) touches neither ``re`` nor ``phonenumbers``;
``phonenumbers`` is only imported to name the country of a refused foreign number.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "TON_ALPHANUMERIC",
    "TON_INTERNATIONAL",
    "TON_NATIONAL",
    "TON_UNKNOWN",
    "NumberRejected",
    "normalize_msisdn",
    "split_msisdn",
]


class NumberRejected(ValueError):
    """An msisdn that is not an Indian mobile number.

    ``reason`` says why in a short sentence (journal, 422 body); ``code`` is a stable machine label
    with few values (metrics): ``empty``, ``too-long``, ``not-digits``, ``alphanumeric``,
    ``numbering-plan``, ``not-indian``, ``wrong-length``, ``m2m``, ``special-series``, ``not-mobile``.
    """

    def __init__(self, reason: str, code: str = "invalid") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


#: SMPP type of number (``source_addr_ton``) values that change how digits are read.
TON_UNKNOWN: Final = 0
TON_INTERNATIONAL: Final = 1
TON_NATIONAL: Final = 2
TON_ALPHANUMERIC: Final = 5
#: SMPP numbering plan indicators that can carry an msisdn: unknown, ISDN/E.164, national.
_TELEPHONE_NPIS: Final = frozenset({0, 1, 8})
_NPI_NAMES: Final = {
    3: "data (X.121)",
    4: "telex",
    6: "land mobile (E.212)",
    9: "private",
    10: "ERMES",
    14: "internet (IP)",
    18: "WAP client id",
}

_MOBILE_LEADS: Final = frozenset({"916", "917", "918", "919"})
# Longer than any written form of a number (+91 98100 12345 with generous separators); bounds the work.
_MAX_RAW_CHARS: Final = 40
_SEPARATORS: Final = re.compile(r"[\s\-.()/]")
_LENGTH_HINT: Final = "an Indian mobile number has 10 digits, 12 with the country code 91"


def normalize_msisdn(raw: str | int, *, ton: int | None = None, npi: int | None = None) -> str:
    """The 12-digit ``91XXXXXXXXXX`` form of an Indian mobile number, or :class:`NumberRejected`.

    Accepted: ``919810012345``, ``9810012345``, ``09810012345``, ``+91 98100 12345``, ``0091…``,
    ``+91 (0)98100-12345``, with spaces, hyphens, dots, slashes or parentheses between digits.
    ``ton``/``npi`` are the SMPP ``source_addr_ton``/``source_addr_npi``: TON 1 (international) means
    the digits start with the country code, so ``9810012345`` with TON 1 is refused (country code 98);
    TON 2 (national) reads the digits as a national number (a 12-digit ``91…`` is still accepted, as
    SMSCs mislabel it); TON 0 or ``None`` guesses from the form; TON 5 (alphanumeric) is refused.
    """
    # Fast path: the form nearly every source sends. No regex, no allocation but the return.
    if (
        type(raw) is str
        and len(raw) == 12
        and raw[:3] in _MOBILE_LEADS
        and raw.isdigit()
        and raw.isascii()
        and (ton is None or ton != TON_ALPHANUMERIC)
        and (npi is None or npi in _TELEPHONE_NPIS)
    ):
        return raw
    return _normalize_slow(raw, ton, npi)


def _normalize_slow(raw: str | int, ton: int | None, npi: int | None) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int) or (isinstance(raw, int) and raw < 0):
        raise NumberRejected("msisdn must be a string of digits", "not-digits")
    text = str(raw).strip()
    if not text:
        raise NumberRejected("msisdn is empty", "empty")
    if len(text) > _MAX_RAW_CHARS:
        raise NumberRejected(f"msisdn is too long ({len(text)} characters)", "too-long")
    if ton == TON_ALPHANUMERIC:
        raise NumberRejected("an alphanumeric sender (TON 5), not a mobile number", "alphanumeric")
    if npi is not None and npi not in _TELEPHONE_NPIS:
        plan = _NPI_NAMES.get(npi, f"NPI {npi}")
        raise NumberRejected(f"numbering plan {plan} is not a telephone numbering plan", "numbering-plan")

    digits = _SEPARATORS.sub("", text)
    international = ton == TON_INTERNATIONAL
    if digits.startswith("+"):
        digits, international = digits[1:], True
    elif digits.startswith("00"):
        # 00 is India's international access prefix: 0091… is +91….
        digits, international = digits[2:], True
    _require_ascii_digits(digits)

    if international:
        national = _after_country_code(digits)
    elif ton == TON_NATIONAL:
        national = _national_form(digits, explicit=True)
    else:
        national = _national_form(digits, explicit=False)
    return "91" + _check_national(national)


def _require_ascii_digits(digits: str) -> None:
    if digits.isdigit() and digits.isascii():
        return
    if not digits:
        raise NumberRejected("msisdn has no digits", "not-digits")
    if any(ch.isalpha() for ch in digits):
        raise NumberRejected("an alphanumeric sender id, not a mobile number", "alphanumeric")
    bad = next(ch for ch in digits if not (ch.isdigit() and ch.isascii()))
    raise NumberRejected(f"msisdn contains {bad!r}, which is not a digit", "not-digits")


def _after_country_code(digits: str) -> str:
    """The national part of an international-form number; anything but country code 91 is refused."""
    if not digits.startswith("91"):
        reason = _foreign_reason(digits, explicit=True) or "not an Indian number (only 91 is accepted)"
        raise NumberRejected(reason, "not-indian")
    return digits[2:]


def _national_form(digits: str, *, explicit: bool) -> str:
    """The national part of digits given without ``+``/``00`` (``explicit``: the source said TON 2)."""
    n = len(digits)
    if n == 12 and digits.startswith("91"):
        return digits[2:]
    if n == 10:
        return digits
    if n == 11 and digits.startswith("0"):
        return digits[1:]  # the national trunk prefix
    for lead in ("", "0", "91"):
        if n == 13 + len(lead) and digits.startswith(lead):
            _refuse_m2m(digits[len(lead) :])
    if not explicit and n >= 11:
        # Perhaps an international number written without "+": say so only when it is a real one.
        reason = _foreign_reason(digits, explicit=False)
        if reason:
            raise NumberRejected(reason, "not-indian")
    raise NumberRejected(f"wrong length: {n} digits ({_LENGTH_HINT})", "wrong-length")


def _refuse_m2m(national: str) -> None:
    """Refuse a 13-digit national number: the numbering of M2M (machine) SIMs, which send no MO."""
    if len(national) == 13 and not national.startswith("0"):
        raise NumberRejected("a 13-digit M2M (machine) number, not a mobile sender", "m2m")


def _check_national(national: str) -> str:
    """Check the national part after the country code; returns the 10 national digits."""
    if len(national) == 11 and national.startswith("0"):
        national = national[1:]  # "+91 (0)98100 12345", a common written form
    n = len(national)
    if n == 13:
        _refuse_m2m(national)
    if n != 10:
        raise NumberRejected(
            f"wrong length: {n} digits after the country code 91 (expected 10)", "wrong-length"
        )
    first = national[0]
    if first in "6789":
        return national
    if national.startswith("1600"):
        raise NumberRejected(
            "the 1600 series is for government voice calls, not a mobile sender", "special-series"
        )
    if national.startswith("1601"):
        raise NumberRejected(
            "the 1601 series is for regulated financial entities' voice calls, not a mobile sender",
            "special-series",
        )
    if national.startswith("140"):
        raise NumberRejected(
            "the 140 series is for telemarketing calls, not a mobile sender", "special-series"
        )
    if first == "0":
        raise NumberRejected("the national number must not start with 0 after the country code", "not-mobile")
    if first == "1":
        raise NumberRejected(
            "national number starts with 1 (a service or fixed-line number), not a mobile", "not-mobile"
        )
    raise NumberRejected(
        f"national number starts with {first} (a fixed-line number), not a mobile", "not-mobile"
    )


def _foreign_reason(digits: str, *, explicit: bool) -> str:
    """Why ``digits`` (international form without ``+``) is not Indian; "" when it is no real number.

    ``explicit``: the source marked the number international, so any country code but 91 is foreign
    even if the rest does not make a valid number.
    """
    import phonenumbers  # only on this error path: keeps import time and the hot path lean

    try:
        number = phonenumbers.parse("+" + digits, None)
    except phonenumbers.NumberParseException:
        return (
            "not an Indian number (no known country code; only country code 91 is accepted)"
            if explicit
            else ""
        )
    cc = number.country_code
    if cc is None or cc == 91:
        return ""
    if not explicit and not phonenumbers.is_valid_number(number):
        return ""
    # The country's main region (GB for 44, US for 1), not a dependency the digits may fall in.
    region = phonenumbers.region_code_for_country_code(cc)
    where = f", {region}" if region and region != "ZZ" else ""
    return f"not an Indian number (country code {cc}{where}; only 91 is accepted)"


def split_msisdn(msisdn: str) -> tuple[int, int, int]:
    """(cc, ndc, sn) of a normalised msisdn: 91, the first 4 national digits, the last 6."""
    return 91, int(msisdn[2:6]), int(msisdn[6:12])
