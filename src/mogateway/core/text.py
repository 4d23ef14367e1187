"""SMS text: which alphabet a text needs, how many parts it takes, and its bytes in each alphabet.

GSM-7 is counted in septets (characters of the extension table take two: ESC + code), 160 in a single
SMS and 153 per part of a long one (the 6-byte UDH eats 7 septets). UCS-2 is counted in UTF-16 code
units, 70 single and 67 per part; a character outside the BMP takes two units and is never split.

SMPP carries GSM-7 as *unpacked* septets (one septet per octet), so :func:`gsm7_encode` never packs.
``data_coding`` 0 means "the SMSC's default alphabet", which differs per link; :func:`decode_short_message`
takes that meaning as an argument. Data codings that carry no text (8-bit data, compressed, pictogram)
are returned as lowercase hex so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from mogateway.core.immutable import immutable

__all__ = [
    "GSM7_BASIC",
    "GSM7_EXTENSION",
    "DecodedText",
    "DefaultAlphabet",
    "SmsParts",
    "TextEncodeError",
    "count_parts",
    "decode_short_message",
    "encode_text",
    "fit_parts",
    "gsm7_decode",
    "gsm7_encode",
    "gsm7_septets",
    "split_text",
    "ucs2_decode",
    "ucs2_encode",
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
_EXTENSION_SET: Final = frozenset(GSM7_EXTENSION)
_GSM7_SET: Final = _BASIC_SET | _EXTENSION_SET

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
    chars = set(text)
    if chars <= _BASIC_SET:
        return len(text)
    if chars <= _GSM7_SET:
        return len(text) + sum(text.count(ch) for ch in chars & _EXTENSION_SET)
    return None


def _ucs2_units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


@immutable
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


# ------------------------------------------------------------------------------------ byte codecs

DefaultAlphabet = Literal["gsm7", "latin1", "ascii"]
Alphabet = Literal["gsm7", "latin1", "ascii", "ucs2"]


class TextEncodeError(ValueError):
    """A character the chosen alphabet cannot carry."""


_GSM7_INDEX: Final = {ch: i for i, ch in enumerate(GSM7_BASIC) if ch != "\x1b"}
_GSM7_EXT_DECODE: Final = {code: ch for ch, code in GSM7_EXTENSION.items()}
_ESC: Final = 0x1B
#: str.translate tables of the codec: a character -> the Latin-1 character of its septet (ESC and the
#: septet for the extension table), and a septet -> its character.
_GSM7_ENCODE_TABLE: Final = {
    **{ord(ch): chr(code) for ch, code in _GSM7_INDEX.items()},
    **{ord(ch): chr(_ESC) + chr(code) for ch, code in GSM7_EXTENSION.items() if ch not in _GSM7_INDEX},
}
_GSM7_ENCODABLE: Final = frozenset(_GSM7_INDEX) | frozenset(GSM7_EXTENSION)
_GSM7_DECODE_TABLE: Final = {code: ch for code, ch in enumerate(GSM7_BASIC)}
_SEPTET_OF_OCTET: Final = bytes(b & 0x7F for b in range(256))  # the top bit is ignored


def gsm7_encode(text: str) -> bytes:
    """Unpacked GSM-7 septets of ``text`` (extension characters as ESC + code)."""
    if not _GSM7_ENCODABLE.issuperset(text):
        bad = next(ch for ch in text if ch not in _GSM7_ENCODABLE)
        raise TextEncodeError(f"{bad!r} is not in the GSM-7 alphabet")
    # One C pass: every character becomes the Latin-1 character of its septet (or ESC + septet).
    return text.translate(_GSM7_ENCODE_TABLE).encode("latin-1")


def gsm7_decode(data: bytes) -> str:
    """Text of unpacked GSM-7 septets. Never fails: the top bit is ignored, an unknown escape shows
    the basic character (as 3GPP 23.038 asks) and a trailing lone ESC is dropped."""
    septets = data.translate(_SEPTET_OF_OCTET)
    if b"\x1b" not in septets:  # no escapes (the usual case): a table lookup per septet, in C
        return septets.decode("latin-1").translate(_GSM7_DECODE_TABLE)
    out: list[str] = []
    escaped = False
    for code in septets:
        if escaped:
            escaped = False
            ext = _GSM7_EXT_DECODE.get(code)
            out.append(ext if ext is not None else GSM7_BASIC[code] if code != _ESC else " ")
        elif code == _ESC:
            escaped = True
        else:
            out.append(GSM7_BASIC[code])
    return "".join(out)


def ucs2_encode(text: str) -> bytes:
    """UTF-16BE (UCS-2 as handsets read it; characters beyond the BMP become surrogate pairs)."""
    return text.encode("utf-16-be", errors="surrogatepass")


def ucs2_decode(data: bytes) -> str:
    """Text of UTF-16BE bytes; a trailing odd byte or a lone surrogate becomes U+FFFD."""
    if len(data) % 2:
        return data[:-1].decode("utf-16-be", errors="replace") + "\ufffd"
    return data.decode("utf-16-be", errors="replace")


def encode_text(text: str, alphabet: Alphabet) -> bytes:
    """``text`` in ``alphabet``; raises :class:`TextEncodeError` when a character does not fit."""
    if alphabet == "gsm7":
        return gsm7_encode(text)
    if alphabet == "ucs2":
        return ucs2_encode(text)
    try:
        return text.encode("latin-1" if alphabet == "latin1" else "ascii")
    except UnicodeEncodeError as exc:
        raise TextEncodeError(f"{text[exc.start]!r} is not in {alphabet}") from None


@immutable
class DecodedText:
    """A short message as text. ``binary`` means ``text`` is the lowercase hex of the octets."""

    text: str
    alphabet: str
    binary: bool = False


def _alphabet_of(data_coding: int, default: DefaultAlphabet) -> str:
    """The alphabet a data_coding names (SMPP 3.4 §5.2.19 and 3GPP 23.038 coding groups)."""
    if data_coding == 0x00:
        return default
    simple = {0x01: "ascii", 0x03: "latin1", 0x05: "shift_jis", 0x06: "iso8859_5", 0x07: "iso8859_8"}
    if data_coding in simple:
        return simple[data_coding]
    if data_coding < 0x10:  # SMPP's own values; 0x02, 0x04 octets, 0x09 pictogram, 0x0D JIS X 0212
        return {0x08: "ucs2", 0x0A: "iso2022_jp", 0x0E: "euc_kr"}.get(data_coding, "binary")
    group = data_coding >> 4
    if group <= 0x3:  # general data coding: bit 5 compressed, bits 3-2 the alphabet
        if data_coding & 0x20:
            return "binary"
        return {0: "gsm7", 1: "binary", 2: "ucs2"}.get((data_coding >> 2) & 0x3, "binary")
    if group in (0xC, 0xD):  # message waiting indication, GSM-7
        return "gsm7"
    if group == 0xE:  # message waiting indication, UCS-2
        return "ucs2"
    if group == 0xF:  # data coding / message class: bit 2 chooses 8-bit data
        return "binary" if data_coding & 0x04 else "gsm7"
    return "binary"  # reserved coding groups


def decode_short_message(data: bytes, data_coding: int, default: DefaultAlphabet = "gsm7") -> DecodedText:
    """Decode the octets of a short message by ``data_coding`` (``default``: what 0 means here)."""
    alphabet = _alphabet_of(data_coding, default)
    if alphabet == "gsm7":
        return DecodedText(gsm7_decode(data), "gsm7")
    if alphabet == "ucs2":
        return DecodedText(ucs2_decode(data), "ucs2")
    if alphabet == "binary":
        return DecodedText(data.hex(), "binary", binary=True)
    codec = {"latin1": "latin-1", "ascii": "latin-1"}.get(alphabet, alphabet)
    # ASCII links sometimes send 8-bit bytes anyway; Latin-1 keeps them readable instead of failing.
    return DecodedText(data.decode(codec, errors="replace"), alphabet)


def _one_unit(_ch: str) -> int:
    return 1


def split_text(text: str, alphabet: Alphabet, per_part: int) -> list[str]:
    """Cut ``text`` into chunks of at most ``per_part`` units of ``alphabet``.

    Units are septets for GSM-7 (an extension character counts two and is never cut from its
    escape), UTF-16 code units for UCS-2 (a surrogate pair is never cut) and octets otherwise.
    """
    if per_part < 2:
        raise ValueError("per_part must be at least 2")
    size: Callable[[str], int] = (
        _septets_of if alphabet == "gsm7" else _ucs2_units if alphabet == "ucs2" else _one_unit
    )

    chunks: list[str] = []
    start = 0
    used = 0
    for index, ch in enumerate(text):
        n = size(ch) or 1
        if used + n > per_part:
            chunks.append(text[start:index])
            start, used = index, 0
        used += n
    if start < len(text) or not chunks:
        chunks.append(text[start:])
    return chunks
