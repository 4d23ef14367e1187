"""India's DLT rules for a reply, as data and pure functions: ids, templates, matching, the chain hash.

Rules stated before the code:

* A principal entity id (PE id) and a content template id are 19 ASCII digits.
* A template is the text registered on a DLT portal. Each variable in it is written ``{#var#}``
  (exactly so: every portal writes it in lower case) and stands for 1 to ``var_max`` characters of any
  kind (TRAI's rule is 30). Since the variable-tagging directions, portals also write typed variables
  in the text — ``{#numeric#}`` (also ``{#number#}``), ``{#alphanumeric#}``, ``{#url#}``, ``{#urlott#}``,
  ``{#cbn#}``, ``{#email#}`` — which are variables of the same length limit whose characters are
  restricted (:data:`VARIABLE_KINDS`). Any other ``{#…#}``, or a near miss such as ``{#var}`` or
  ``{#VAR#}``, is refused: an operator's scrubber would read it as fixed text, and a template that can
  never match is better refused at registration than discovered when replies are blocked.
* A template must have some fixed text (portals refuse templates made only of variables) and at most
  :data:`MAX_TEMPLATE_CHARS` characters.
* A reply matches a template when it equals the template's text with each variable replaced by 1 to
  ``var_max`` characters of its kind; the fixed text is compared exactly, character for character.
  The template text first gets what the reply got: the same ``\\n`` unescaping (when the client's replies
  get it) and the removal of surrounding whitespace.
* When several templates match, the most specific wins: fewest variables, then the longest fixed text,
  then the fewest untyped ``{#var#}`` (a typed variable is narrower), then the smallest template id (so
  every node picks the same one).
* Matching takes time linear in the reply's length, whatever the reply: the positions at which each
  variable may end are tracked as one set of bits (an integer), never by backtracking, so an adversarial
  reply cannot make it slow the way a regular expression with several ``.{1,30}`` can.
* The telemarketer chain hash is the SHA-256 of ``"<PE id>,<TM id>"``, as lowercase hex.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from mogateway.core.contract import unescape_reply
from mogateway.core.immutable import immutable

__all__ = [
    "DEFAULT_VAR_MAX",
    "DltIds",
    "DltInvalid",
    "MAX_TEMPLATE_CHARS",
    "Match",
    "Miss",
    "Template",
    "TemplateSet",
    "VARIABLE_KINDS",
    "chain_hash",
    "check_dlt_id",
    "check_tm_id",
    "parse_template",
]

#: TRAI's limit on the characters one variable may hold.
DEFAULT_VAR_MAX: Final = 30
#: The longest template text the portals accept.
MAX_TEMPLATE_CHARS: Final = 2000

_ID = re.compile(r"\A[0-9]{19}\Z")
_TM_CHAIN = re.compile(r"\A[0-9]{1,30}(,[0-9]{1,30}){0,9}\Z")
# Everything that looks like a placeholder, right or wrong: {#...#} and the usual near misses of {#var#}.
_PLACEHOLDER_LIKE = re.compile(r"\{#[^{}#\n]{0,30}#\}|\{[#\s]*var[#\s]*\}|##var##", re.IGNORECASE)


def _digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def _alphanumeric(ch: str) -> bool:
    # Letters of any script; a combining mark (a Devanagari vowel sign) belongs to its letter.
    return ch.isalnum() or unicodedata.category(ch) in ("Mn", "Mc")


def _callback_number(ch: str) -> bool:
    return "0" <= ch <= "9" or ch in "+-"


def _no_space(ch: str) -> bool:
    return not ch.isspace()


#: Variable name → (characters it may hold (None: any), what that is, for people).
VARIABLE_KINDS: Final[dict[str, tuple[Callable[[str], bool] | None, str]]] = {
    "var": (None, "any characters"),
    "numeric": (_digit, "digits 0-9"),
    "number": (_digit, "digits 0-9"),
    "alphanumeric": (_alphanumeric, "letters and digits"),
    "url": (_no_space, "a link without spaces"),
    "urlott": (_no_space, "a link without spaces"),
    "cbn": (_callback_number, "a phone number (digits, + and -)"),
    "email": (_no_space, "an address without spaces"),
}
_PLACEHOLDERS: Final = {f"{{#{name}#}}": name for name in VARIABLE_KINDS}


class DltInvalid(ValueError):
    """A malformed DLT id or template; ``field`` names what was wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def check_dlt_id(value: str, field: str = "template_id") -> str:
    """``value`` when it is a DLT id (19 digits), else DltInvalid naming ``field``."""
    if not isinstance(value, str) or not _ID.match(value):
        shown = value if isinstance(value, str) else type(value).__name__
        raise DltInvalid(field, f"{shown!r} is not a DLT id (19 digits)")
    return value


def check_tm_id(value: str) -> str:
    """A telemarketer id, or a chain of them separated by commas (digits only)."""
    if not _TM_CHAIN.match(value):
        raise DltInvalid("dlt_tm_id", f"{value!r} is not a telemarketer id (digits; a chain separated by ,)")
    return value


def chain_hash(pe_id: str, tm_id: str) -> str:
    """The PE→telemarketer chain hash: SHA-256 of ``"<PE id>,<TM id>"``, lowercase hex."""
    return hashlib.sha256(f"{pe_id},{tm_id}".encode("ascii")).hexdigest()


@immutable
class DltIds:
    """What a matched reply carries to the operator: the client's PE id and the template's id."""

    pe_id: str
    template_id: str


# ------------------------------------------------------------------------------------------ templates


@immutable
class Template:
    """A registered template, split into its fixed pieces around its variables.

    ``fixed`` has one piece more than ``kinds``: fixed[0] kind[0] fixed[1] … kind[k-1] fixed[k].
    """

    template_id: str
    text: str
    fixed: tuple[str, ...]
    kinds: tuple[str, ...]

    @property
    def variables(self) -> int:
        return len(self.kinds)

    @property
    def fixed_chars(self) -> int:
        return sum(len(piece) for piece in self.fixed)

    def specificity(self) -> tuple[int, int, int, str]:
        """Sort key: the most specific template first."""
        return (self.variables, -self.fixed_chars, self.kinds.count("var"), self.template_id)

    def match(self, reply: str, var_max: int = DEFAULT_VAR_MAX) -> bool:
        """Whether ``reply`` is this template with each variable filled by 1 to ``var_max`` characters."""
        return _matches(self, reply, var_max, typed=True)


def parse_template(template_id: str, text: str, *, unescape_newlines: bool = False) -> Template:
    """Check and split a template. Raises DltInvalid (field ``template_id`` or ``text``)."""
    check_dlt_id(template_id)
    if not isinstance(text, str):
        raise DltInvalid("text", "must be a string")
    if unescape_newlines:
        text = unescape_reply(text)
    text = text.strip()
    if not text:
        raise DltInvalid("text", "is empty")
    if len(text) > MAX_TEMPLATE_CHARS:
        raise DltInvalid(
            "text", f"has {len(text)} characters; DLT templates have at most {MAX_TEMPLATE_CHARS}"
        )
    fixed: list[str] = []
    kinds: list[str] = []
    start = 0
    for found in _PLACEHOLDER_LIKE.finditer(text):
        kind = _PLACEHOLDERS.get(found.group(0))
        if kind is None:
            raise DltInvalid(
                "text",
                f"{found.group(0)!r} at character {found.start() + 1} is not a DLT variable; variables are "
                "written {#var#} (or a tagged kind: " + ", ".join(sorted(_PLACEHOLDERS)) + ")",
            )
        fixed.append(text[start : found.start()])
        kinds.append(kind)
        start = found.end()
    fixed.append(text[start:])
    if not any(piece.strip() for piece in fixed):
        raise DltInvalid("text", "has no fixed text; DLT templates cannot be only variables")
    return Template(template_id, text, tuple(fixed), tuple(kinds))


# ------------------------------------------------------------------------------------------- matching


def _occurrences(reply: str, piece: str, full: int) -> int:
    """Bit i set when ``piece`` occurs in ``reply`` at position i (every position for an empty piece)."""
    if not piece:
        return full
    bits = 0
    find = reply.find
    at = find(piece)
    while at >= 0:
        bits |= 1 << at
        at = find(piece, at + 1)
    return bits


def _class_bits(reply: str, allowed: Callable[[str], bool] | None) -> int:
    """Bit i set when reply[i] may be inside a variable of this kind."""
    if allowed is None:
        return (1 << len(reply)) - 1
    return int("".join("1" if allowed(ch) else "0" for ch in reversed(reply)) or "0", 2)


def _matches(
    template: Template, reply: str, var_max: int, *, typed: bool, classes: dict[str, int] | None = None
) -> bool:
    """The matcher. ``classes`` caches the kinds' character bits of this reply across templates."""
    fixed = template.fixed
    n = len(reply)
    first, last = fixed[0], fixed[-1]
    kinds = template.kinds
    if not kinds:
        return reply == first
    # Cheap refusals first: the length window, and the fixed text at both ends.
    least = template.fixed_chars + len(kinds)
    if not least <= n <= least + len(kinds) * (var_max - 1):
        return False
    if not reply.startswith(first) or not reply.endswith(last):
        return False
    full = (1 << (n + 1)) - 1
    if classes is None:
        classes = {}
    # Bit p of ``starts`` set: the text before this variable can end at p.
    starts = 1 << len(first)
    for index, kind in enumerate(kinds):
        key = kind if typed else "var"
        inside = classes.get(key)
        if inside is None:
            inside = classes[key] = _class_bits(reply, VARIABLE_KINDS[key][0])
        # After L steps, ``run`` holds p+L for every start p whose next L characters fit the kind.
        ends = 0
        run = starts
        for _ in range(var_max):
            run = (run & inside) << 1
            if not run:
                break
            ends |= run
        piece = fixed[index + 1]
        starts = (ends & _occurrences(reply, piece, full)) << len(piece)
        starts &= full
        if not starts:
            return False
    return bool(starts >> n & 1)


@immutable
class Match:
    """The template a reply matched."""

    template: Template

    @property
    def template_id(self) -> str:
        return self.template.template_id


@immutable
class Miss:
    """Why a reply does not match one template (for people: simulate, the timeline of a blocked reply)."""

    template_id: str
    reason: str
    closeness: int  # characters of fixed text that agree at the ends; more is closer


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by bisection over slice comparisons (done in C, not per character)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _shown(text: str, limit: int = 24) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _explain(template: Template, reply: str, var_max: int) -> Miss:
    fixed = template.fixed
    first, last = fixed[0], fixed[-1]
    head = _common_prefix(reply, first if template.kinds else template.text)
    tail = _common_prefix(reply[::-1], last[::-1]) if template.kinds else 0
    closeness = head + tail
    tid = template.template_id
    if not template.kinds:
        where = head + 1
        return Miss(
            tid,
            f"the reply differs from the template at character {where}: "
            f"the template has {_shown(template.text[head:])}, the reply {_shown(reply[head:])}",
            closeness,
        )
    if head < len(first):
        return Miss(
            tid,
            f"the reply differs from the template at character {head + 1}: "
            f"the template has {_shown(first[head:])}, the reply {_shown(reply[head:])}",
            closeness,
        )
    if tail < len(last):
        return Miss(
            tid,
            f"the end of the reply differs from the template's: it should end with {_shown(last, 40)}",
            closeness,
        )
    if _matches(template, reply, max(var_max, len(reply)), typed=True):
        return Miss(tid, f"a variable would need more than {var_max} characters", closeness)
    if _matches(template, reply, var_max, typed=False):
        typed = sorted({k for k in template.kinds if k != "var"})
        kinds = ", ".join(f"{{#{k}#}} ({VARIABLE_KINDS[k][1]})" for k in typed)
        return Miss(tid, f"a typed variable holds characters its kind does not allow: {kinds}", closeness)
    if _matches(template, reply, max(var_max, len(reply)), typed=False):
        return Miss(
            tid,
            f"a variable would need more than {var_max} characters, or characters its kind does not allow",
            closeness,
        )
    missing = next(
        (piece for piece in fixed[1:-1] if piece and piece not in reply[len(first) : len(reply) - len(last)]),
        None,
    )
    if missing is not None:
        return Miss(tid, f"the fixed text {_shown(missing, 40)} is not in the reply", closeness)
    return Miss(tid, "the fixed text between the variables differs or comes in another order", closeness)


@dataclass(slots=True)
class TemplateSet:
    """One client's templates, compiled once and ordered most specific first."""

    templates: tuple[Template, ...]
    var_max: int = DEFAULT_VAR_MAX
    _by_first_char: dict[str, tuple[Template, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def compile(
        cls,
        items: Iterable[tuple[str, str]],
        *,
        var_max: int = DEFAULT_VAR_MAX,
        unescape_newlines: bool = True,
    ) -> TemplateSet:
        """From ``(template_id, text)`` pairs. Raises DltInvalid for a malformed one."""
        parsed = [parse_template(tid, text, unescape_newlines=unescape_newlines) for tid, text in items]
        parsed.sort(key=Template.specificity)
        return cls(tuple(parsed), var_max)

    def __post_init__(self) -> None:
        # Most templates start with fixed text: only those starting with the reply's first character (and
        # those starting with a variable) need to be tried.
        grouped: dict[str, list[Template]] = {}
        for template in self.templates:
            grouped.setdefault(template.fixed[0][:1], []).append(template)
        self._by_first_char = {key: tuple(group) for key, group in grouped.items()}

    def __len__(self) -> int:
        return len(self.templates)

    def _candidates(self, reply: str) -> Sequence[Template]:
        own = self._by_first_char.get(reply[:1], ())
        anywhere = self._by_first_char.get("", ())
        if not anywhere:
            return own
        if not own:
            return anywhere
        return sorted((*own, *anywhere), key=Template.specificity)

    def match(self, reply: str) -> Match | None:
        """The most specific template ``reply`` matches, or None."""
        var_max = self.var_max
        classes: dict[str, int] = {}
        for template in self._candidates(reply):
            if _matches(template, reply, var_max, typed=True, classes=classes):
                return Match(template)
        return None

    def explain(self, reply: str, limit: int = 3) -> list[Miss]:
        """Why ``reply`` matches none of the templates: the closest ``limit`` of them, closest first.

        Closeness (fixed text agreeing at both ends) is cheap and computed for every template; the
        reasons, which may run the matcher again, only for the closest."""
        backwards = reply[::-1]

        def closeness(t: Template) -> int:
            if not t.kinds:
                return _common_prefix(reply, t.text)
            return _common_prefix(reply, t.fixed[0]) + _common_prefix(backwards, t.fixed[-1][::-1])

        closest = heapq.nsmallest(limit, self.templates, key=lambda t: (-closeness(t), t.template_id))
        return [_explain(t, reply, self.var_max) for t in closest]
