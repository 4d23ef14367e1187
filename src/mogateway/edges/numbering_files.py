"""Numbering tables read from files: the shipped series table, the ``series_csv`` and ``ported_csv`` settings.

Rules stated before the code (``docs/numbering.md``, "Loading your own data", is the operator's guide):

* Both files are UTF-8 CSV; a spreadsheet's byte-order mark is fine. Blank lines and lines starting
  with ``#`` are skipped, the header row is optional (its first cell is ``prefix`` or ``msisdn``),
  missing trailing columns count as empty, and more than three columns is an error.
* This module only reads: what a row *means* is judged by the core (:meth:`SeriesTable.from_rows`,
  :meth:`PortedTable.from_rows`), which is handed each row with its line in the file.
* Anything wrong stops with one :class:`NumberingDataError` naming the file and line
  (``/etc/mogateway/ported.csv:17: msisdn '+44…': not an Indian number…``); a file that cannot be
  opened names the file alone.
* ``series_csv`` replaces the shipped table, it is not merged with it. The shipped table
  (``mogateway/data/series_in.csv``) is read once per process.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import os
from collections.abc import Iterator
from typing import Final

from mogateway.core.numbering import (
    NumberedRow,
    NumberingDataError,
    PortedTable,
    SenderResolver,
    SeriesTable,
)

__all__ = ["SHIPPED_SERIES_FILE", "load_ported", "load_series", "sender_resolver", "shipped_series"]

#: The series table shipped in the package's ``data`` directory.
SHIPPED_SERIES_FILE: Final = "series_in.csv"
# prefix or msisdn, operator, circle
_COLUMNS: Final = 3


def sender_resolver(
    series_csv: str | os.PathLike[str] | None = None,
    ported_csv: str | os.PathLike[str] | None = None,
) -> SenderResolver:
    """The resolver the gateway settings describe: ``series_csv`` replaces the shipped table (it is
    not merged with it), ``ported_csv`` adds a ported-numbers list. Raises
    :class:`NumberingDataError` (one line naming the file and row) for a bad file."""
    series = load_series(series_csv) if series_csv else shipped_series()
    ported = load_ported(ported_csv) if ported_csv else None
    return SenderResolver(ported=ported, series=series)


def load_series(path: str | os.PathLike[str]) -> SeriesTable:
    """A ``prefix,operator,circle`` CSV file as a :class:`SeriesTable` (its ``source`` is the path)."""
    name = os.fspath(path)
    return SeriesTable.from_rows(_rows(name, "prefix"), source=name)


def load_ported(path: str | os.PathLike[str]) -> PortedTable:
    """An ``msisdn,operator,circle`` CSV file as a :class:`PortedTable` (its ``source`` is the path)."""
    name = os.fspath(path)
    return PortedTable.from_rows(_rows(name, "msisdn"), source=name)


@functools.cache
def shipped_series() -> SeriesTable:
    """The series table shipped with the package, read once; its ``source`` is "shipped"."""
    resource = importlib.resources.files("mogateway") / "data" / SHIPPED_SERIES_FILE
    with importlib.resources.as_file(resource) as path:
        table = load_series(path)
    table.source = "shipped"
    return table


def _rows(name: str, header: str) -> Iterator[NumberedRow]:
    """(line number, stripped cells) of each data row; skips blank lines, ``#`` comments and a header
    row whose first cell is ``header``."""
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
                if len(cells) > _COLUMNS:
                    raise NumberingDataError(name, line, f"{len(cells)} columns, expected at most {_COLUMNS}")
                key, operator, circle = cells + [""] * (_COLUMNS - len(cells))
                yield line, (key, operator, circle)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise NumberingDataError(
                name, reader.line_num, f"not a readable UTF-8 CSV file ({exc})"
            ) from None
