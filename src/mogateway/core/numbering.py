"""Indian mobile numbering: normalise an msisdn, refuse what is not an Indian mobile, build ``sender``.

Operator and circle are resolved in order of trust: what the source says (ingest field, SMPP bind) →
a ported-numbers resolver → the series table shipped with the package (original allocatee only) → "".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Protocol

from mogateway.core.contract import Sender

__all__ = [
    "NumberRejected",
    "OperatorCircle",
    "PortedResolver",
    "SenderResolver",
    "normalize_msisdn",
    "split_msisdn",
]


class NumberRejected(ValueError):
    """An msisdn that is not an Indian mobile number; ``reason`` says why in words for the journal."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class OperatorCircle:
    operator: str = ""
    circle: str = ""


class PortedResolver(Protocol):
    """Knows where a ported number lives now (a CSV list, an MNP query...)."""

    def lookup(self, msisdn: str) -> OperatorCircle | None: ...


_SEPARATORS: Final = re.compile(r"[\s\-().]")


def normalize_msisdn(raw: str) -> str:
    """The 12-digit ``91XXXXXXXXXX`` form of an Indian mobile number, or NumberRejected."""
    text = _SEPARATORS.sub("", raw.strip())
    if text.startswith("+"):
        text = text[1:]
        if not text.startswith("91"):
            raise NumberRejected("not an Indian number (country code is not 91)")
    elif text.startswith("0091"):
        text = text[2:]
    if not text.isdigit() or not text.isascii():
        raise NumberRejected("msisdn must contain only digits")
    if len(text) == 11 and text.startswith("0"):
        text = "91" + text[1:]
    elif len(text) == 10:
        text = "91" + text
    if len(text) != 12:
        raise NumberRejected(f"not an Indian mobile number ({len(text)} digits)")
    if not text.startswith("91"):
        raise NumberRejected("not an Indian number (country code is not 91)")
    if text[2] not in "6789":
        raise NumberRejected("not an Indian mobile number (national number must start with 6-9)")
    return text


def split_msisdn(msisdn: str) -> tuple[int, int, int]:
    """(cc, ndc, sn) of a normalised msisdn: 91, the first 4 national digits, the last 6."""
    return 91, int(msisdn[2:6]), int(msisdn[6:12])


class SenderResolver:
    """Builds the ``sender`` object, filling operator and circle from the most trusted source."""

    def __init__(self, ported: PortedResolver | None = None) -> None:
        self._ported = ported

    def sender(self, msisdn: str, operator: str | None = None, circle: str | None = None) -> Sender:
        cc, ndc, sn = split_msisdn(msisdn)
        op, ci = operator or "", circle or ""
        if not (op and ci) and self._ported is not None:
            found = self._ported.lookup(msisdn)
            if found is not None:
                op, ci = op or found.operator, ci or found.circle
        return Sender(cc=cc, ndc=ndc, sn=sn, operator=op, circle=ci)
