"""Indian mobile numbering: normalise an msisdn, refuse what is not an Indian mobile, build ``sender``.

Operator and circle are resolved in order of trust: what the source says (ingest field, SMPP bind) →
a ported-numbers resolver → the series table shipped with the package (original allocatee only) → "".
A lower source only fills a field that is still empty, and only when it does not contradict a field a
higher source already gave (see :class:`SenderResolver`). ``docs/numbering.md`` is the operator's guide.

The hot path (a plain ``91XXXXXXXXXX`` string, then two dict lookups) touches neither ``re`` nor
``phonenumbers``; ``phonenumbers`` is only imported to name the country of a refused foreign number.
"""

from __future__ import annotations

import csv
import enum
import functools
import importlib.resources
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from mogateway.core.contract import Sender

__all__ = [
    "CIRCLES",
    "CURRENT_OPERATORS",
    "DEFUNCT_OPERATORS",
    "MAX_ID_CHARS",
    "Circle",
    "CsvPortedResolver",
    "NumberRejected",
    "NumberingDataError",
    "OperatorCircle",
    "PortedResolver",
    "SenderResolver",
    "SeriesTable",
    "circle_by_id",
    "normalize_circle",
    "normalize_msisdn",
    "normalize_operator",
    "split_msisdn",
]


# ------------------------------------------------------------------------------------------ msisdn


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


# ----------------------------------------------------------------------------------- circles, ops


@dataclass(frozen=True, slots=True)
class Circle:
    """One of the 22 licensed service areas: a stable ``id``, the common ``code``, a display name."""

    id: str
    code: str
    name: str
    covers: str = ""


#: The 22 telecom circles. Ids are part of the callback contract: never rename one.
CIRCLES: Final[tuple[Circle, ...]] = (
    Circle("andhra-pradesh", "AP", "Andhra Pradesh", "Andhra Pradesh and Telangana"),
    Circle("assam", "AS", "Assam"),
    Circle("bihar", "BR", "Bihar", "Bihar and Jharkhand"),
    Circle("delhi", "DL", "Delhi", "with Gurgaon, Faridabad, Noida and Ghaziabad"),
    Circle("gujarat", "GJ", "Gujarat"),
    Circle("haryana", "HR", "Haryana"),
    Circle("himachal-pradesh", "HP", "Himachal Pradesh"),
    Circle("jammu-kashmir", "JK", "Jammu & Kashmir", "with Ladakh"),
    Circle("karnataka", "KA", "Karnataka"),
    Circle("kerala", "KL", "Kerala", "with Lakshadweep"),
    Circle("kolkata", "KO", "Kolkata"),
    Circle("madhya-pradesh", "MP", "Madhya Pradesh", "Madhya Pradesh and Chhattisgarh"),
    Circle("maharashtra", "MH", "Maharashtra", "with Goa, without Mumbai"),
    Circle("mumbai", "MU", "Mumbai"),
    Circle("north-east", "NE", "North East", "the north-eastern states but Assam"),
    Circle("odisha", "OR", "Odisha"),
    Circle("punjab", "PB", "Punjab", "with Chandigarh"),
    Circle("rajasthan", "RJ", "Rajasthan"),
    Circle("tamil-nadu", "TN", "Tamil Nadu", "with Chennai"),
    Circle("up-east", "UE", "UP (East)", "eastern Uttar Pradesh"),
    Circle("up-west", "UW", "UP (West)", "western Uttar Pradesh and Uttarakhand"),
    Circle("west-bengal", "WB", "West Bengal", "with Sikkim and Andaman & Nicobar"),
)

# Other spellings sources use, beyond each circle's id, code and name. States that lie wholly inside one
# circle map to it (a source saying "Jharkhand" means the Bihar circle); "Uttar Pradesh" alone does not.
_CIRCLE_ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "andhra-pradesh": ("Telangana", "AP Telangana", "Andhra Pradesh and Telangana"),
    "bihar": ("Jharkhand", "Bihar Jharkhand", "BH"),
    "delhi": ("New Delhi", "Delhi NCR", "NCR"),
    "jammu-kashmir": ("Jammu and Kashmir", "J&K", "Ladakh"),
    "karnataka": ("KTK", "Bangalore", "Bengaluru"),
    "kerala": ("Lakshadweep",),
    "kolkata": ("KOL", "Calcutta", "Kolkata Metro"),
    "madhya-pradesh": ("Chhattisgarh", "MP Chhattisgarh", "MPCG"),
    "maharashtra": ("Goa", "Maharashtra Goa", "MAH"),
    "mumbai": ("Bombay", "MUM", "Mumbai Metro"),
    "north-east": (
        "Northeast",
        "NESA",
        "Arunachal Pradesh",
        "Manipur",
        "Meghalaya",
        "Mizoram",
        "Nagaland",
        "Tripura",
    ),
    "odisha": ("Orissa", "OD"),
    "punjab": ("Chandigarh",),
    "tamil-nadu": ("Chennai", "Madras", "TN Chennai"),
    "up-east": ("Uttar Pradesh East", "Uttar Pradesh (East)", "UPE", "UP-E"),
    "up-west": ("Uttar Pradesh West", "Uttar Pradesh (West)", "UPW", "UP-W", "Uttarakhand", "Uttaranchal"),
    "west-bengal": ("Sikkim", "Andaman and Nicobar", "Andaman & Nicobar"),
}

#: Operators that serve subscribers today.
CURRENT_OPERATORS: Final = ("jio", "airtel", "vi", "bsnl", "mtnl")
#: Operators that no longer exist and whose subscribers no one took over: every number they were
#: allotted has been ported away or returned, so a series table naming one says nothing about today.
DEFUNCT_OPERATORS: Final = frozenset({"aircel", "rcom", "videocon", "mts", "loop", "stel"})

# Legacy and formal names → the id of the operator that serves those subscribers now (mergers and
# acquisitions of the subscriber base), or the defunct operator's own id when no one took them over.
_OPERATOR_ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "jio": ("Reliance Jio", "Reliance Jio Infocomm", "RJIO", "RJIL", "Jio Infocomm"),
    # Tata Teleservices' consumer mobile (2019) and Telenor India (Telewings, brand Uninor; 2018).
    "airtel": (
        "Bharti Airtel",
        "Bharti",
        "Tata Docomo",
        "Docomo",
        "Tata",
        "Tata Teleservices",
        "TTSL",
        "Tata Indicom",
        "Telenor",
        "Telenor India",
        "Uninor",
        "Telewings",
    ),
    # Vodafone India and Idea Cellular merged in 2018; Hutch became Vodafone, Spice merged into Idea.
    "vi": (
        "Vodafone Idea",
        "Vodafone",
        "Idea",
        "Idea Cellular",
        "VIL",
        "Vodafone India",
        "Hutch",
        "Hutchison Essar",
        "Spice",
        "Spice Telecom",
    ),
    "bsnl": ("BSNL MOBILE", "BSNL GSM", "CellOne", "Bharat Sanchar Nigam"),
    "mtnl": ("MTNL Mobile", "Dolphin", "MTNL Dolphin", "Mahanagar Telephone Nigam"),
    # Defunct: closed without a successor for their subscribers (who had to port out).
    "aircel": ("Dishnet",),
    "rcom": (
        "Reliance Communications",
        "Reliance GSM",
        "Reliance CDMA",
        "Reliance Mobile",
        "Reliance Telecom",
    ),
    "videocon": ("Videocon Telecom", "Videocon Telecommunications"),
    "mts": ("MTS India", "Sistema Shyam", "Sistema Shyam TeleServices"),
    "loop": ("Loop Mobile", "BPL Mobile"),
    "stel": ("S Tel", "S-Tel"),
}


def _compact(text: str) -> str:
    """Lookup key: case-folded letters and digits only, ``&`` read as "and" ("UP (East)" → "upeast")."""
    return "".join(ch for ch in text.casefold().replace("&", "and") if ch.isalnum())


#: Longest id made from an unknown value: ids travel in every callback body.
MAX_ID_CHARS: Final = 64


def _hyphenated(text: str) -> str:
    """An unknown value as a lowercase hyphenated id: "Some New Op" → "some-new-op".

    Made of the same characters as :func:`_compact`, so normalising an id again gives it back.
    """
    words: list[str] = []
    word: list[str] = []
    for ch in text.casefold().replace("&", " and "):
        if ch.isalnum():
            word.append(ch)
        elif word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return "-".join(words)[:MAX_ID_CHARS].rstrip("-")


def _alias_index(entries: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    index: dict[str, str] = {}
    for target, names in entries.items():
        for name in (target, *names):
            key = _compact(name)
            if index.setdefault(key, target) != target:
                raise AssertionError(f"alias {name!r} names both {index[key]!r} and {target!r}")
    return index


_CIRCLE_INDEX: Final = _alias_index({c.id: (c.code, c.name, *_CIRCLE_ALIASES.get(c.id, ())) for c in CIRCLES})
_OPERATOR_INDEX: Final = _alias_index(_OPERATOR_ALIASES)
_CIRCLES_BY_ID: Final = {c.id: c for c in CIRCLES}


@functools.lru_cache(maxsize=4096)
def normalize_circle(text: str | None) -> str:
    """The circle id for an id, name or code ("UP East", "UE", "up_east" → "up-east").

    Never refuses: an unknown value comes back lowercase hyphenated ("Uttar Pradesh" → "uttar-pradesh",
    at most :data:`MAX_ID_CHARS`); ``None`` or blank → "".
    """
    if not text or not text.strip():
        return ""
    return _CIRCLE_INDEX.get(_compact(text)) or _hyphenated(text)


@functools.lru_cache(maxsize=4096)
def normalize_operator(text: str | None) -> str:
    """The operator id for a current or legacy name ("Vodafone" → "vi", "Tata Docomo" → "airtel").

    Never refuses: an unknown value comes back lowercase hyphenated (at most :data:`MAX_ID_CHARS`);
    ``None`` or blank → "".
    "Reliance" alone is ambiguous (Jio or Reliance Communications) and passes through as "reliance".
    """
    if not text or not text.strip():
        return ""
    return _OPERATOR_INDEX.get(_compact(text)) or _hyphenated(text)


def circle_by_id(circle_id: str) -> Circle | None:
    """The :class:`Circle` with this id, or None for an id outside the 22 (the list is open)."""
    return _CIRCLES_BY_ID.get(circle_id)


# ------------------------------------------------------------------------------------------ tables


@dataclass(frozen=True, slots=True)
class OperatorCircle:
    """What one source knows about a number; "" for a field it does not know."""

    operator: str = ""
    circle: str = ""


class PortedResolver(Protocol):
    """Knows where a ported number lives now (a CSV list, an MNP query...).

    ``lookup`` gets a normalised msisdn and returns None when the number is not known to be ported.
    It runs synchronously for every MO, so it must answer from memory; a network MNP/HLR query needs
    its own cache in front.
    """

    def lookup(self, msisdn: str) -> OperatorCircle | None: ...


class NumberingDataError(ValueError):
    """A series or ported-numbers file that cannot be used; the message names the file and line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _csv_rows(path: str | os.PathLike[str], header: str, max_columns: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, stripped cells) of each data row; skips blank lines, ``#`` comments and a header
    row whose first cell is ``header``."""
    name = os.fspath(path)
    try:
        # utf-8-sig: spreadsheets put a byte-order mark in front of the header.
        handle = open(name, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise NumberingDataError(name, 0, f"cannot read ({exc.strerror or exc})") from None
    with handle:
        reader = csv.reader(handle, strict=True)  # a stray quote is an error, not data
        first = True
        try:
            for cells in reader:
                line = reader.line_num
                cells = [c.strip() for c in cells]
                if not any(cells) or cells[0].startswith("#"):
                    continue
                if first and cells[0].casefold() == header:
                    first = False
                    continue
                first = False
                if len(cells) > max_columns:
                    raise NumberingDataError(
                        name, line, f"{len(cells)} columns, expected at most {max_columns}"
                    )
                yield line, cells + [""] * (max_columns - len(cells))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise NumberingDataError(
                name, reader.line_num, f"not a readable UTF-8 CSV file ({exc})"
            ) from None


class _Interner:
    """Shares one OperatorCircle per distinct pair: large tables repeat a few dozen pairs."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, str], OperatorCircle] = {}

    def __call__(self, operator: str, circle: str) -> OperatorCircle:
        key = (normalize_operator(operator), normalize_circle(circle))
        found = self._pairs.get(key)
        if found is None:
            found = self._pairs[key] = OperatorCircle(*key)
        return found


class SeriesTable:
    """Operator (and circle, when known) of number series: 4- or 5-digit prefixes of the national number.

    A lookup takes the longest matching prefix (5 digits, then 4): 72290 and 72298 may belong to
    different operators within the 7229 series. A row with an empty operator and circle records that a
    5-digit block is *not* its 4-digit series' operator without saying whose it is.
    """

    def __init__(self, entries: Mapping[str, OperatorCircle], source: str = "") -> None:
        for prefix in entries:
            if len(prefix) not in (4, 5) or not (prefix.isdigit() and prefix.isascii()):
                raise ValueError(f"series prefix {prefix!r} is not 4 or 5 digits")
        self._entries: dict[str, OperatorCircle] = dict(entries)
        #: Where the table came from (a path, or "shipped"), for logs and errors.
        self.source = source

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> SeriesTable:
        """Load a ``prefix,operator,circle`` CSV (header optional; names normalised to ids).

        Raises :class:`NumberingDataError` naming the file and line of the first bad row.
        """
        name = os.fspath(path)
        entries: dict[str, OperatorCircle] = {}
        lines: dict[str, int] = {}
        pair = _Interner()
        for line, (prefix, operator, circle) in _csv_rows(name, "prefix", 3):
            if len(prefix) not in (4, 5) or not (prefix.isdigit() and prefix.isascii()):
                raise NumberingDataError(name, line, f"prefix {prefix!r} is not 4 or 5 digits")
            if prefix in entries:
                raise NumberingDataError(name, line, f"prefix {prefix} already given on line {lines[prefix]}")
            entries[prefix], lines[prefix] = pair(operator, circle), line
        return cls(entries, source=name)

    @classmethod
    def shipped(cls) -> SeriesTable:
        """The table shipped with the package (``mogateway/data/series_in.csv``), loaded once."""
        return _shipped_series()

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        """The entry for a normalised msisdn's longest matching prefix, or None."""
        entries = self._entries
        found = entries.get(msisdn[2:7])
        return found if found is not None else entries.get(msisdn[2:6])

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"SeriesTable({len(self)} prefixes from {self.source or 'memory'})"


SHIPPED_SERIES_FILE: Final = "series_in.csv"


@functools.cache
def _shipped_series() -> SeriesTable:
    resource = importlib.resources.files("mogateway") / "data" / SHIPPED_SERIES_FILE
    with importlib.resources.as_file(resource) as path:
        table = SeriesTable.from_csv(path)
    table.source = "shipped"
    return table


class CsvPortedResolver:
    """Ported numbers from a CSV ``msisdn,operator,circle`` (header optional; msisdn in any accepted
    form; operator and circle names normalised to ids; either may be empty).

    A later row for the same number wins (a list that grows by appending port events). A number listed
    with neither operator nor circle is known to be ported to an unknown place: it still stops the
    series table from answering. Raises :class:`NumberingDataError` naming the file and line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        # int keys: about half the memory of 12-character strings for lists of millions of numbers.
        self._entries: dict[int, OperatorCircle] = {}
        pair = _Interner()
        for line, (raw, operator, circle) in _csv_rows(self.path, "msisdn", 3):
            try:
                msisdn = normalize_msisdn(raw)
            except NumberRejected as exc:
                raise NumberingDataError(self.path, line, f"msisdn {raw!r}: {exc.reason}") from None
            self._entries[int(msisdn)] = pair(operator, circle)

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        """Where the ported number lives now, or None when it is not in the list."""
        return self._entries.get(int(msisdn))

    def __len__(self) -> int:
        return len(self._entries)


# ----------------------------------------------------------------------------------------- sender


class _Default(enum.Enum):
    TOKEN = 0


_SHIPPED: Final = _Default.TOKEN
_UNKNOWN: Final = OperatorCircle()


def _agrees(known: OperatorCircle, other: OperatorCircle) -> bool:
    """True when ``other`` contradicts no field ``known`` already has."""
    return (not known.operator or not other.operator or known.operator == other.operator) and (
        not known.circle or not other.circle or known.circle == other.circle
    )


def _fill(known: OperatorCircle, other: OperatorCircle) -> OperatorCircle:
    if known is _UNKNOWN:
        return other
    if not _agrees(known, other):
        return known
    return OperatorCircle(known.operator or other.operator, known.circle or other.circle)


class SenderResolver:
    """Builds the ``sender`` object, filling operator and circle from the most trusted source.

    Order of trust: the values the source gives (ingest fields, the SMPP bind's configuration; names
    are normalised to ids) → the ``ported`` resolver → the ``series`` table (default: the shipped one;
    None: no table) → "". A lower source fills only fields that are still empty, and only when it
    contradicts nothing already known: a ported entry saying (airtel, delhi) gives the circle to a
    source that said "airtel" but not to one that said "jio". A number the ported resolver knows is
    never looked up in the series table (the series names its original allocatee, which is stale
    for a ported number), and a series entry naming a defunct operator is ignored.
    """

    def __init__(
        self,
        ported: PortedResolver | None = None,
        series: SeriesTable | Literal[_Default.TOKEN] | None = _SHIPPED,
    ) -> None:
        self._ported = ported
        self._series = SeriesTable.shipped() if series is _SHIPPED else series

    @classmethod
    def from_files(
        cls,
        series_csv: str | os.PathLike[str] | None = None,
        ported_csv: str | os.PathLike[str] | None = None,
    ) -> SenderResolver:
        """A resolver from the gateway settings: ``series_csv`` replaces the shipped table (it is
        not merged with it), ``ported_csv`` loads a :class:`CsvPortedResolver`. Raises
        :class:`NumberingDataError` (one line naming the file and row) for a bad file."""
        series = SeriesTable.from_csv(series_csv) if series_csv else SeriesTable.shipped()
        ported = CsvPortedResolver(ported_csv) if ported_csv else None
        return cls(ported=ported, series=series)

    @property
    def series(self) -> SeriesTable | None:
        """The series table in use (None when disabled)."""
        return self._series

    def resolve(self, msisdn: str, operator: str | None = None, circle: str | None = None) -> OperatorCircle:
        """Operator and circle of a normalised msisdn, given what the source said (may be None/"")."""
        if operator or circle:
            known = OperatorCircle(normalize_operator(operator), normalize_circle(circle))
        else:
            known = _UNKNOWN
        if known.operator and known.circle:
            return known
        if self._ported is not None:
            ported = self._ported.lookup(msisdn)
            if ported is not None:
                return _fill(known, ported)
        if self._series is not None:
            found = self._series.lookup(msisdn)
            if found is not None and found.operator not in DEFUNCT_OPERATORS:
                return _fill(known, found)
        return known if (known.operator or known.circle) else _UNKNOWN

    def sender(self, msisdn: str, operator: str | None = None, circle: str | None = None) -> Sender:
        """The ``sender`` object for a normalised msisdn (see :func:`normalize_msisdn`)."""
        cc, ndc, sn = split_msisdn(msisdn)
        found = self.resolve(msisdn, operator, circle)
        return Sender(cc=cc, ndc=ndc, sn=sn, operator=found.operator, circle=found.circle)
