"""The ``sender`` object: operator and circle of a normalised msisdn, from the most trusted source.

Rules stated before the code:

* Order of trust: what the source says (ingest fields, the SMPP bind's configuration) → a ported-numbers
  resolver → the series table (original allocatee only) → "".
* A lower source only fills a field that is still empty, and only when it contradicts no field a higher
  source already gave: a ported entry (airtel, delhi) gives the circle to a source that said "airtel"
  but not to one that said "jio".
* A number the ported resolver knows is never looked up in the series table (the series names its
  original allocatee, stale for a ported number), and a series entry naming a defunct operator is
  ignored.
* Lookups are dictionary reads only: this runs for every MO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol, TypeAlias

from mogateway.core.contract import Sender
from mogateway.core.immutable import immutable
from mogateway.core.numbering.msisdn import NumberRejected, normalize_msisdn, split_msisdn
from mogateway.core.numbering.names import DEFUNCT_OPERATORS, normalize_circle, normalize_operator

__all__ = [
    "NumberedRow",
    "NumberingDataError",
    "OperatorCircle",
    "PortedResolver",
    "PortedTable",
    "SenderResolver",
    "SeriesTable",
]


@immutable
class OperatorCircle:
    """What one source knows about a number; "" for a field it does not know."""

    operator: str = ""
    circle: str = ""


class PortedResolver(Protocol):
    """Knows where a ported number lives now (a list of ported numbers, an MNP query...).

    ``lookup`` gets a normalised msisdn and returns None when the number is not known to be ported.
    It runs synchronously for every MO, so it must answer from memory; a network MNP/HLR query needs
    its own cache in front.
    """

    def lookup(self, msisdn: str) -> OperatorCircle | None: ...


class NumberingDataError(ValueError):
    """A series or ported-numbers table that cannot be used; the message names its source and line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


#: One data row of a table and where it came from: ``(line, (key, operator, circle))``. The key is a
#: series prefix or an msisdn; a cell the source left empty is "". ``line`` only names the row in a
#: :class:`NumberingDataError` (rows built in code can be numbered with ``enumerate(rows, 1)``).
NumberedRow: TypeAlias = tuple[int, tuple[str, str, str]]


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
    def from_rows(cls, rows: Iterable[NumberedRow], source: str = "") -> SeriesTable:
        """A table from ``(line, (prefix, operator, circle))`` rows (names normalised to ids).

        Each prefix is 4 or 5 digits and appears once. Raises :class:`NumberingDataError` naming
        ``source`` and the line of the first bad row.
        """
        entries: dict[str, OperatorCircle] = {}
        lines: dict[str, int] = {}
        pair = _Interner()
        for line, (prefix, operator, circle) in rows:
            if len(prefix) not in (4, 5) or not (prefix.isdigit() and prefix.isascii()):
                raise NumberingDataError(source, line, f"prefix {prefix!r} is not 4 or 5 digits")
            if prefix in entries:
                raise NumberingDataError(
                    source, line, f"prefix {prefix} already given on line {lines[prefix]}"
                )
            entries[prefix], lines[prefix] = pair(operator, circle), line
        return cls(entries, source=source)

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        """The entry for a normalised msisdn's longest matching prefix, or None."""
        entries = self._entries
        found = entries.get(msisdn[2:7])
        return found if found is not None else entries.get(msisdn[2:6])

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"SeriesTable({len(self)} prefixes from {self.source or 'memory'})"


class PortedTable:
    """Ported numbers held in memory (a :class:`PortedResolver`): where each listed number lives now.

    Built from ``(line, (msisdn, operator, circle))`` rows: the msisdn in any accepted form, operator
    and circle names normalised to ids, either may be empty. A later row for the same number wins (a
    list that grows by appending port events). A number listed with neither operator nor circle is
    known to be ported to an unknown place: it still stops the series table from answering.
    """

    def __init__(self, source: str = "") -> None:
        #: Where the list came from (a path), for logs and errors.
        self.source = source
        # int keys: about half the memory of 12-character strings for lists of millions of numbers.
        self._entries: dict[int, OperatorCircle] = {}

    @classmethod
    def from_rows(cls, rows: Iterable[NumberedRow], source: str = "") -> PortedTable:
        """A table from ``(line, (msisdn, operator, circle))`` rows. Raises :class:`NumberingDataError`
        naming ``source`` and the line of the first msisdn that is not an Indian mobile number."""
        table = cls(source)
        entries = table._entries
        pair = _Interner()
        for line, (raw, operator, circle) in rows:
            try:
                msisdn = normalize_msisdn(raw)
            except NumberRejected as exc:
                raise NumberingDataError(source, line, f"msisdn {raw!r}: {exc.reason}") from None
            entries[int(msisdn)] = pair(operator, circle)
        return table

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        """Where the ported number lives now, or None when it is not in the list."""
        return self._entries.get(int(msisdn))

    def __len__(self) -> int:
        return len(self._entries)


# ----------------------------------------------------------------------------------------- sender


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
    are normalised to ids) → the ``ported`` resolver → the ``series`` table (None: no table) → "".
    A lower source fills only fields that are still empty, and only when it contradicts nothing
    already known: a ported entry saying (airtel, delhi) gives the circle to a source that said
    "airtel" but not to one that said "jio". A number the ported resolver knows is never looked up in
    the series table (the series names its original allocatee, which is stale for a ported number),
    and a series entry naming a defunct operator is ignored.
    """

    def __init__(self, ported: PortedResolver | None = None, *, series: SeriesTable | None) -> None:
        # ``series`` has no default: the shipped table is read from a file (edges.numbering_files), and a
        # resolver silently without one would send every sender's operator as "".
        self._ported = ported
        self._series = series

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
