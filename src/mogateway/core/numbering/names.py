"""Operator and circle ids: the 22 licensed circles, current and legacy operator names, open pass-through.

Rules stated before the code:

* Circle ids are part of the callback contract: they never change. :func:`normalize_circle` accepts the
  id, the code, the name or an alias, in any case and with any separators ("UP East", "UE", "up_east",
  "UP (East)" → ``up-east``).
* Operators are open-ended: :func:`normalize_operator` maps known names to ids, and a legacy name to the
  operator that took over its **subscribers**; defunct operators with no such successor keep ids of
  their own rather than being guessed into a current one.
* Neither refuses: an unknown value is passed through lowercase hyphenated (at most
  :data:`MAX_ID_CHARS`), so a new operator needs no code change; ``None`` or blank gives "".
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final

from mogateway.core.immutable import immutable

__all__ = [
    "CIRCLES",
    "CURRENT_OPERATORS",
    "DEFUNCT_OPERATORS",
    "MAX_ID_CHARS",
    "Circle",
    "circle_by_id",
    "normalize_circle",
    "normalize_operator",
]


@immutable
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
