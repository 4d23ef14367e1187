"""Reading the content-template CSV a DLT portal exports, row by row, with a reason for every refusal.

Rules stated before the code:

* Encoding: UTF-8 (a byte-order mark is fine) or UTF-16 with its byte-order mark (Excel's "Unicode
  text"). Anything else is refused as a whole rather than guessed: a Hindi template read in the wrong
  code page would be registered wrong and never match.
* The delimiter is sniffed among ``,`` ``;`` tab and ``|``. The header row is the first row (of the first
  20) that names a template id column and a template text column; portals put report titles above it.
  Column names are compared ignoring case, spaces and punctuation, through :data:`COLUMNS`.
* A row is imported when its id is a DLT id, its text is a valid template (core.dlt), its status (when
  the file has a status column) says approved or active, and its entity id (when the file has one and
  the client has a PE id) is the client's. Every other row is refused with the reason and its line.
* An id Excel turned into a number (``1.10716E+18``) is refused with that explanation; an id written as
  text the Excel way (``'1107…`` or ``="1107…"``) is read as the id.
* The same id twice with the same text is one template; with another text, the later row is refused.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from mogateway.core.dlt import DltInvalid, Template, check_dlt_id, parse_template
from mogateway.core.immutable import immutable

__all__ = ["COLUMNS", "CsvRefusal", "CsvTemplates", "DltCsvError", "decode_csv", "read_dlt_csv"]


class DltCsvError(ValueError):
    """The file as a whole cannot be read (encoding, no header row)."""


#: Our column → the normalised header names portals use for it.
COLUMNS: Final[dict[str, frozenset[str]]] = {
    "template_id": frozenset(
        {
            "templateid",
            "contenttemplateid",
            "dlttemplateid",
            "dltcontenttemplateid",
            "templateidno",
            "ctid",
            "tempid",
            "dltctid",
            "registeredtemplateid",
        }
    ),
    "text": frozenset(
        {
            "templatecontent",
            "content",
            "contenttemplate",
            "message",
            "templatemessage",
            "templatetext",
            "messagecontent",
            "text",
            "template",
            "body",
            "smscontent",
            "approvedcontent",
            "templatebody",
        }
    ),
    "status": frozenset({"status", "templatestatus", "approvalstatus", "state", "currentstatus"}),
    "entity_id": frozenset(
        {"entityid", "peid", "principalentityid", "dltentityid", "dltpeid", "entity", "peidno"}
    ),
    "name": frozenset({"templatename", "name", "contenttemplatename"}),
}
_APPROVED: Final = frozenset({"approved", "approve", "active", "verified", "live", "enabled"})
_EXCEL_NUMBER = re.compile(r"\A\d(\.\d+)?[eE]\+?\d+\Z")
_HEADER_SEARCH_ROWS: Final = 20
# One line with its ending, cut as io.StringIO(text, newline="") cuts them: csv needs \r\n, \r and \n
# kept to read a quoted cell that spans lines, and no cut at the other breaks str.splitlines() knows
# (\x85, \u2028...), which are text inside a cell.
_LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@immutable
class CsvRefusal:
    """A row that was not imported, and why."""

    line: int
    template_id: str
    reason: str


@dataclass(slots=True)
class CsvTemplates:
    """What a file holds: the templates to import, the rows refused, and what was read where."""

    templates: list[tuple[int, Template]] = field(default_factory=list)  # (line, template)
    refused: list[CsvRefusal] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)  # our column -> the file's header
    entity_ids: set[str] = field(default_factory=set)  # entity ids the file names
    rows: int = 0


def decode_csv(data: bytes) -> str:
    """The text of a CSV file; DltCsvError when it is neither UTF-8 nor UTF-16 with a BOM."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise DltCsvError(f"the file says UTF-16 but is not: {exc.reason} at byte {exc.start}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DltCsvError(
            f"the file is not UTF-8 (byte {exc.start}); export it as 'CSV UTF-8' and import it again"
        ) from None
    if "\x00" in text:  # UTF-16 without its byte-order mark decodes as "UTF-8" full of NULs
        raise DltCsvError("the file looks like UTF-16 without a byte-order mark; export it as 'CSV UTF-8'")
    return text


def _norm(header: str) -> str:
    return "".join(ch for ch in header.casefold() if ch.isalnum())


def _columns(row: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for index, header in enumerate(row):
        name = _norm(header)
        for ours, names in COLUMNS.items():
            if name in names and ours not in found:
                found[ours] = index
    return found


def _header_line(text: str) -> tuple[int, str] | None:
    """Where the header row starts and its delimiter: the first of the first rows that one of the
    delimiters splits into a template id column and a text column. Title rows above the header have no
    delimiter in them, and the sniffer, given them, fails and would fall back to commas."""
    at = 0
    for number, line in enumerate(_lines(text)):
        if number >= _HEADER_SEARCH_ROWS:
            break
        for delimiter in ",;\t|":
            where = _columns(next(csv.reader([line], delimiter=delimiter), []))
            if "template_id" in where and "text" in where:
                return at, delimiter
        at += len(line)
    return None


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    header = _header_line(text)
    start, delimiters = header if header is not None else (0, ",;\t|")
    try:
        return csv.Sniffer().sniff(text[start : start + 8192], delimiters=delimiters)
    except csv.Error:
        if header is None:
            return csv.excel
        return type("HeaderDialect", (csv.excel,), {"delimiter": header[1]})


def _lines(text: str) -> Iterator[str]:
    return (match.group() for match in _LINE.finditer(text))


def _cell(row: list[str], index: int | None) -> str:
    return row[index].strip() if index is not None and index < len(row) else ""


def _template_id(raw: str) -> str:
    value = raw.strip()
    if value.startswith('="') and value.endswith('"'):  # Excel's way of keeping a number as text
        value = value[2:-1]
    return value.lstrip("'").strip()


def read_dlt_csv(text: str, *, pe_id: str | None = None, unescape_newlines: bool = False) -> CsvTemplates:
    """The templates of a DLT portal's CSV export. DltCsvError when no header row is found.

    ``pe_id``: the client's PE id, to refuse rows of another entity. ``unescape_newlines``: check the
    templates as the client's replies are compared (the stored text stays as the file has it).
    """
    reader = csv.reader(_lines(text), _dialect(text))
    rows = iter(reader)
    where: dict[str, int] = {}
    header: list[str] = []
    try:
        for _ in range(_HEADER_SEARCH_ROWS):
            candidate = next(rows)
            where = _columns(candidate)
            if "template_id" in where and "text" in where:
                header = candidate
                break
    except StopIteration:
        pass
    except csv.Error as exc:
        raise DltCsvError(f"the file is not readable CSV: {exc}") from None
    if not header:
        raise DltCsvError(
            "no header row naming a template id column and a template text column in the first "
            f"{_HEADER_SEARCH_ROWS} rows (looked for e.g. 'Template ID' and 'Template Content')"
        )
    out = CsvTemplates(columns={ours: header[index] for ours, index in where.items()})
    seen: dict[str, tuple[int, str]] = {}
    try:
        last = reader.line_num
        for row in rows:
            line, last = last + 1, reader.line_num  # where the row starts (a quoted cell spans lines)
            if not any(cell.strip() for cell in row):
                continue
            out.rows += 1
            _read_row(row, line, where, pe_id, unescape_newlines, seen, out)
    except csv.Error as exc:
        raise DltCsvError(f"line {reader.line_num}: the file is not readable CSV: {exc}") from None
    return out


def _read_row(
    row: list[str],
    line: int,
    where: dict[str, int],
    pe_id: str | None,
    unescape_newlines: bool,
    seen: dict[str, tuple[int, str]],
    out: CsvTemplates,
) -> None:
    raw_id = _cell(row, where.get("template_id"))
    template_id = _template_id(raw_id)
    text = row[where["text"]] if where["text"] < len(row) else ""

    def refuse(reason: str) -> None:
        out.refused.append(CsvRefusal(line, template_id, reason))

    if _EXCEL_NUMBER.match(template_id):
        refuse(f"the id {template_id} is a number Excel rounded; export the id column as text")
        return
    try:
        check_dlt_id(template_id)
    except DltInvalid as exc:
        refuse(exc.reason)
        return
    status = _cell(row, where.get("status"))
    if "status" in where and status.casefold() not in _APPROVED:
        refuse(f"status {status or '(empty)'!r}: only approved or active templates are imported")
        return
    entity = _template_id(_cell(row, where.get("entity_id")))
    if entity:
        out.entity_ids.add(entity)
        if pe_id is not None and entity != pe_id:
            refuse(f"belongs to entity {entity}, not this client's PE id {pe_id}")
            return
    try:
        template = parse_template(template_id, text, unescape_newlines=unescape_newlines)
    except DltInvalid as exc:
        refuse(f"template {exc.reason}")
        return
    stored = parse_template(template_id, text) if unescape_newlines else template
    earlier = seen.get(template_id)
    if earlier is not None:
        if earlier[1] != stored.text:
            refuse(f"the same id is on line {earlier[0]} with another text")
        return
    seen[template_id] = (line, stored.text)
    out.templates.append((line, stored))
