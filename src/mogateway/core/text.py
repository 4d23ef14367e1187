"""SMS text arithmetic: which alphabet a text needs and how many parts it takes.

GSM-7 is counted in septets (characters of the extension table take two: ESC + code), 160 in a single
SMS and 153 per part of a long one (the 6-byte UDH eats 7 septets). UCS-2 is counted in UTF-16 code
units, 70 single and 67 per part; a character outside the BMP takes two units and is never split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "GSM7_BASIC",
    "GSM7_EXTENSION",
    "SmsParts",
    "count_parts",
    "fit_parts",
    "gsm7_septets",
]

#: The GSM 03.38 default alphabet, indexed by septet value (0x1B is the escape to the extension table).
GSM7_BASIC: Final = (
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
#: The extension table: character -> septet that follows ESC.
GSM7_EXTENSION: Final = {
    "\f": 0x0A,
    "^": 0x14,
    "{": 0x28,
    "}": 0x29,
    "\\": 0x2F,
    "[": 0x3C,
    "~": 0x3D,
    "]": 0x3E,
    "|": 0x40,
    "€": 0x65,
}
_BASIC_SET: Final = frozenset(GSM7_BASIC) - {"\x1b"}

Encoding = Literal["gsm7", "ucs2"]

_LIMITS: Final[dict[str, tuple[int, int]]] = {"gsm7": (160, 153), "ucs2": (70, 67)}


def _septets_of(ch: str) -> int:
    if ch in _BASIC_SET:
        return 1
    if ch in GSM7_EXTENSION:
        return 2
    return 0


def gsm7_septets(text: str) -> int | None:
    """Septets ``text`` needs in GSM-7, or None when a character is not in the alphabet."""
    total = 0
    for ch in text:
        n = _septets_of(ch)
        if n == 0:
            return None
        total += n
    return total


def _ucs2_units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


@dataclass(frozen=True, slots=True)
class SmsParts:
    """How a text travels as SMS: its alphabet, its length in that alphabet's units, and its parts."""

    encoding: Encoding
    units: int
    parts: int


def _parts_for(units: int, encoding: Encoding) -> int:
    single, multi = _LIMITS[encoding]
    if units <= single:
        return 1
    return -(-units // multi)


def count_parts(text: str) -> SmsParts:
    """The alphabet (GSM-7 when every character fits, else UCS-2) and the number of SMS parts."""
    septets = gsm7_septets(text)
    if septets is not None:
        return SmsParts("gsm7", septets, _parts_for(septets, "gsm7"))
    units = sum(_ucs2_units(ch) for ch in text)
    return SmsParts("ucs2", units, _parts_for(units, "ucs2"))


def fit_parts(text: str, max_parts: int) -> tuple[str, bool]:
    """Cut ``text`` so that it fits in ``max_parts`` SMS; returns the text and whether it was cut.

    The cut never splits an escape sequence or a surrogate pair. The alphabet is decided on the whole
    text, so a UCS-2 text stays UCS-2 even if its kept prefix would fit GSM-7.
    """
    if max_parts < 1:
        raise ValueError("max_parts must be at least 1")
    info = count_parts(text)
    if info.parts <= max_parts:
        return text, False
    single, multi = _LIMITS[info.encoding]
    budget = single if max_parts == 1 else multi * max_parts
    size = _septets_of if info.encoding == "gsm7" else _ucs2_units
    used = 0
    for index, ch in enumerate(text):
        used += size(ch)
        if used > budget:
            return text[:index], True
    return text, False
