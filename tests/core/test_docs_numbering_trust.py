"""docs/numbering.md's order of trust and its data files, as written.

The rules of "order of trust" are claims about which operator and circle a callback's ``sender`` gets;
each example is taken from the doc and answered by the real resolver (``mogateway.core.numbering``). The
sample ``series_csv`` and ``ported_csv`` files of "Loading your own data" are written to files as the
doc shows them and loaded by the real loader (``mogateway.edges.numbering_files``) through the settings
the doc names; the bad-row error the doc quotes is what ``mogateway serve`` prints for that row. One real
``mogateway serve`` with both sample files shows the answers reach the callback's ``sender``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from markdown_doc import MarkdownDoc
from mogateway.config import ConfigError, load_settings
from mogateway.core.numbering import (
    DEFUNCT_OPERATORS,
    NumberingDataError,
    OperatorCircle,
    SenderResolver,
    SeriesTable,
    normalize_msisdn,
    normalize_operator,
)
from mogateway.edges.numbering_files import load_ported, load_series, sender_resolver, shipped_series
from mogateway.edges.numbering_settings import sender_resolver_for
from mogateway.testing.recorder import Answer, CallbackRecorder

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import clean_env, free_port, mogateway_command, serve_gateway

NUMBERING = MarkdownDoc("docs/numbering.md")
TRUST = "## Where operator and circle come from: order of trust"
LOADING = "## Loading your own data"


# ------------------------------------------------------------------------------------ reading the doc


def flat(text: str) -> str:
    """``text`` with its line breaks and indentation folded into single spaces (prose wraps anywhere)."""
    return re.sub(r"\s+", " ", text).strip()


def rules() -> list[str]:
    """The bullets under "Rules:" of the order-of-trust section, each on one line."""
    text = NUMBERING.section(TRUST).split("Rules:", 1)[1]
    return [flat(b) for b in re.split(r"^- ", text, flags=re.MULTILINE)[1:]]


def rule(start: str) -> str:
    """The one rule that starts with ``start``."""
    (found,) = [r for r in rules() if r.startswith(start)]
    return found


def find(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in ``text``; fails naming the doc when the doc no longer says it."""
    matched = re.search(pattern, text)
    assert matched, f"{NUMBERING.name} no longer says {pattern!r}: adapt the test to the doc"
    return matched.groups()


def sample(header: str) -> str:
    """The csv block of "Loading your own data" whose header starts with ``header``."""
    (found,) = [b for b in NUMBERING.blocks(LOADING, "csv") if b.startswith(header + ",")]
    return found


def sample_rows(header: str) -> list[list[str]]:
    """The data rows of the sample, each as its three cells (stripped)."""
    return [[c.strip() for c in line.split(",")] for line in sample(header).splitlines()[1:]]


def defunct_ids() -> list[str]:
    """The operator ids the doc's Operators table calls defunct."""
    ids = []
    for line in NUMBERING.section("## Operators").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 2 and cells[1].startswith("defunct"):
            ids.append(cells[0].strip("`"))
    return ids


def resolved(resolver: SenderResolver, msisdn: str, **source: str) -> tuple[str, str]:
    """(operator, circle) of the ``sender`` the resolver builds for ``msisdn`` and the source's fields."""
    sender = resolver.sender(normalize_msisdn(msisdn), **source)
    return sender.operator, sender.circle


class Ported:
    """A ported-numbers resolver of the doc's second kind: any object with ``lookup``; records its calls."""

    def __init__(self, entries: dict[str, OperatorCircle]) -> None:
        self.entries = entries
        self.asked: list[str] = []

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        self.asked.append(msisdn)
        return self.entries.get(msisdn)


class CountingSeries(SeriesTable):
    """A series table that records the numbers it was asked about."""

    asked: list[str]

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        self.asked.append(msisdn)
        return super().lookup(msisdn)


def series_of(*rows: tuple[str, str, str]) -> CountingSeries:
    table = CountingSeries.from_rows(enumerate(rows, 1), source="test")
    assert isinstance(table, CountingSeries)
    table.asked = []
    return table


# ------------------------------------------------------------------------------------ order of trust


KNOWN_RULES = (
    "A lower source only fills",
    "A number the ported resolver knows",
    "A series entry naming a **defunct** operator",
    "When the source gives both fields",
)


def test_every_rule_of_the_order_of_trust_is_checked_here() -> None:
    """A rule added to the doc fails here until a test below checks it."""
    assert [next((k for k in KNOWN_RULES if r.startswith(k)), r) for r in rules()] == list(KNOWN_RULES)


def test_the_order_names_the_settings_and_the_resolver_interface_of_the_code() -> None:
    text = flat(NUMBERING.section(TRUST))
    assert "(`MOGATEWAY_PORTED_CSV`, or any object with `lookup(msisdn) -> OperatorCircle | None`)" in text
    assert "yours (`MOGATEWAY_SERIES_CSV`)" in text
    assert '4. Otherwise `""`.' in text
    # A number no source knows: "" for both.
    nothing = SenderResolver(Ported({}), series=series_of(("9810", "airtel", "delhi")))
    assert resolved(nothing, "919999912345") == ("", "")
    assert resolved(SenderResolver(None, series=None), "919810012345") == ("", "")


def test_a_ported_entry_fills_a_source_it_agrees_with_and_nothing_else() -> None:
    """The doc's example: the ported (airtel, delhi) gives the circle to `airtel`, nothing to `jio`."""
    operator, circle, agreeing, stale = find(
        r"A ported entry `\((\w+), (\w+)\)` gives the circle to a source that said `(\w+)`, "
        r"but nothing to a source that said `(\w+)`",
        rule("A lower source only fills"),
    )
    number = "919810012345"
    ported = Ported({number: OperatorCircle(operator, circle)})
    senders = SenderResolver(ported, series=series_of(("9810", "vi", "mumbai")))
    assert resolved(senders, number, operator=agreeing) == (agreeing, circle)
    assert resolved(senders, number, operator=stale) == (stale, "")
    # Source names are normalised before they are compared: "Bharti Airtel" is `airtel`.
    assert normalize_operator("Bharti Airtel") == agreeing
    assert resolved(senders, number, operator="Bharti Airtel") == (agreeing, circle)
    # Nothing from the source: the ported entry whole; the series table (vi, mumbai) is never asked.
    assert resolved(senders, number) == (operator, circle)
    assert senders.series is not None and senders.series.asked == []  # type: ignore[attr-defined]


def test_a_series_entry_without_a_circle_gives_its_operator_to_a_source_that_gave_only_a_circle() -> None:
    """The doc's example, on the shipped table (which has no circles), as the doc says."""
    (circle,) = find(r"a source that gave only `circle=(\w+)` gets the series' operator", rule("A lower"))
    number = normalize_msisdn("919810012345")
    entry = shipped_series().lookup(number)
    assert entry is not None and entry.operator and entry.circle == ""
    senders = sender_resolver()
    assert resolved(senders, number, circle=circle) == (entry.operator, circle)
    # A series entry *with* another circle contradicts the source: it gives nothing.
    own = SenderResolver(None, series=series_of(("9810", "airtel", "mumbai")))
    assert resolved(own, number, circle=circle) == ("", circle)
    assert resolved(own, number, circle="mumbai") == ("airtel", "mumbai")


def test_a_ported_number_is_never_looked_up_in_the_series_table() -> None:
    """Even a ported row with neither operator nor circle ("ported, destination unknown") gives ""."""
    text = rule("A number the ported resolver knows")
    assert "A ported row with an empty operator and circle therefore means" in text
    assert 'destination unknown" and gives `""`' in text
    series = series_of(("9810", "airtel", "delhi"))
    ported = Ported({"919810012345": OperatorCircle(), "919810012346": OperatorCircle("jio", "")})
    senders = SenderResolver(ported, series=series)
    assert resolved(senders, "919810012345") == ("", "")
    assert resolved(senders, "919810012346") == ("jio", "")  # not delhi: the series is the allocatee's
    assert resolved(senders, "919810012345", operator="airtel") == ("airtel", "")
    assert series.asked == []
    assert resolved(senders, "919810012347") == ("airtel", "delhi")  # not ported: the series answers
    assert series.asked == ["919810012347"]


def test_a_series_entry_naming_a_defunct_operator_is_ignored() -> None:
    assert "A series entry naming a **defunct** operator is ignored" in rule("A series entry naming")
    defunct = defunct_ids()
    assert defunct and set(defunct) == set(DEFUNCT_OPERATORS)
    for operator in defunct:
        senders = SenderResolver(None, series=series_of(("9810", operator, "delhi")))
        assert resolved(senders, "919810012345") == ("", ""), operator
        assert resolved(senders, "919810012345", circle="delhi") == ("", "delhi"), operator
        assert resolved(senders, "919810012345", operator="jio") == ("jio", ""), operator


def test_when_the_source_gives_both_fields_nothing_else_is_consulted() -> None:
    assert (
        rule("When the source gives both fields")
        == "When the source gives both fields, nothing else is consulted."
    )
    ported = Ported({"919810012345": OperatorCircle("airtel", "delhi")})
    series = series_of(("9810", "airtel", "delhi"))
    senders = SenderResolver(ported, series=series)
    assert resolved(senders, "919810012345", operator="Reliance Jio", circle="UP East") == ("jio", "up-east")
    assert ported.asked == [] and series.asked == []


# ------------------------------------------------------------------------------------ the data files


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def national_with(prefix: str, taken: set[str]) -> str:
    """A 12-digit msisdn in ``prefix``'s series that no longer prefix of the table matches."""
    for digit in "0123456789":
        national = (prefix + digit + "12345678")[:10]
        if not any(national.startswith(p) and len(p) > len(prefix) for p in taken):
            return "91" + national
    raise AssertionError(f"every fifth digit of {prefix} has a row of its own")


def test_the_sample_series_file_answers_as_written(tmp_path: Path) -> None:
    """Each row answers its own prefix; the empty `98101` row is *not* 9810's operator."""
    rows = sample_rows("prefix")
    path = write(tmp_path / "series.csv", sample("prefix"))
    table = load_series(path)
    assert len(table) == len(rows) and table.source == str(path)
    prefixes = {row[0] for row in rows}
    senders = sender_resolver(series_csv=path)
    for prefix, operator, circle in rows:
        assert resolved(senders, national_with(prefix, prefixes)) == (operator, circle), prefix
    text = flat(NUMBERING.section(LOADING))
    (empty,) = find(r"A row with empty operator and circle \(`(\d+)` above\) says the block is \*not\*", text)
    assert [r for r in rows if r[0] == empty] == [[empty, "", ""]]
    four = next(r for r in rows if r[0] == empty[:4])
    assert four[1]  # 9810 has an operator, which the 98101 block does not get
    assert resolved(senders, "91" + empty + "12345") == ("", "")
    # The file replaces the shipped table: a series only the shipped table knows gives nothing.
    assert shipped_series().lookup("919999912345") is not None
    assert resolved(senders, "919999912345") == ("", "")
    assert "which **replaces** the shipped one (it is not merged" in text


def test_the_sample_ported_file_answers_as_written(tmp_path: Path) -> None:
    """With the sample series file beside it: each listed number answers its row, never the series."""
    rows = sample_rows("msisdn")
    series = write(tmp_path / "series.csv", sample("prefix"))
    ported = write(tmp_path / "ported.csv", sample("msisdn"))
    assert len(load_ported(ported)) == len(rows)
    senders = sender_resolver(series_csv=series, ported_csv=ported)
    answers = {normalize_msisdn(raw): (normalize_operator(op), circle) for raw, op, circle in rows}
    assert answers == {
        "919810012345": ("jio", "mumbai"),
        "919810012346": ("vi", ""),  # `Vodafone` is vi; the series' delhi is not used
        "919810012347": ("", ""),  # ported, destination unknown: not the series' (airtel, delhi)
    }
    for msisdn, answer in answers.items():
        assert resolved(senders, msisdn) == answer, msisdn
    assert resolved(senders, "919810012348") == ("airtel", "delhi")  # not listed: the series answers


def test_the_file_rules_of_the_doc(tmp_path: Path) -> None:
    """Byte-order mark, blank and `#` lines, no header, missing trailing columns, `UP East`, later rows
    win; a prefix given twice or not 4-5 digits is a bad row."""
    text = flat(NUMBERING.section(LOADING))
    for claim in (
        "(a spreadsheet's byte-order mark is fine)",
        "Blank lines and lines starting with `#` are skipped, the header row is optional",
        "missing trailing columns count as empty",
        "When a number appears twice, the later row wins",
        "Each prefix is 4 or 5 digits and may appear once.",
    ):
        assert claim in text, claim
    ported = tmp_path / "ported.csv"
    body = "\n# exported from the MNP portal\n" + "\n".join(sample("msisdn").splitlines()[1:]) + "\n"
    ported.write_text("\ufeff" + body + "919810012345,Vodafone,UP East\n9810012349\n", encoding="utf-8")
    senders = sender_resolver(series_csv=write(tmp_path / "s.csv", sample("prefix")), ported_csv=ported)
    assert resolved(senders, "919810012345") == ("vi", "up-east")  # the later row
    assert resolved(senders, "919810012349") == ("", "")  # one column: ported, destination unknown
    assert resolved(senders, "919810012346") == ("vi", "")
    twice = write(tmp_path / "twice.csv", sample("prefix") + "9810,jio,\n")
    with pytest.raises(NumberingDataError, match=r"twice\.csv:6: prefix 9810 already given on line 2$"):
        load_series(twice)
    short = write(tmp_path / "short.csv", "981,airtel,\n")
    with pytest.raises(NumberingDataError, match=r"short\.csv:1: prefix '981' is not 4 or 5 digits$"):
        load_series(short)


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MOGATEWAY_* setting of the developer's shell; the journal in ``tmp_path``."""
    for name in [n for n in os.environ if n.startswith("MOGATEWAY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MOGATEWAY_DATABASE", str(tmp_path / "journal.db"))


def test_the_settings_the_doc_names_load_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_settings: None
) -> None:
    series = write(tmp_path / "series.csv", sample("prefix"))
    ported = write(tmp_path / "ported.csv", sample("msisdn"))
    text = NUMBERING.section(LOADING)
    assert "**`MOGATEWAY_SERIES_CSV`**" in text and "**`MOGATEWAY_PORTED_CSV`**" in text
    monkeypatch.setenv("MOGATEWAY_SERIES_CSV", str(series))
    monkeypatch.setenv("MOGATEWAY_PORTED_CSV", str(ported))
    senders = sender_resolver_for(load_settings())
    assert resolved(senders, "919810012346") == ("vi", "")
    assert resolved(senders, "917229812345") == ("vi", "up-east")  # from the series file, not shipped
    monkeypatch.setenv("MOGATEWAY_SERIES_CSV", str(tmp_path / "missing.csv"))
    with pytest.raises(ConfigError, match=r"^invalid setting series_csv \(MOGATEWAY_SERIES_CSV\): "):
        sender_resolver_for(load_settings())


def quoted_error() -> tuple[str, str, int, str]:
    """The doc's bad-row line: (the line, the file it names, its line number, the bad msisdn)."""
    text = flat(NUMBERING.section(LOADING))
    (line,) = find(r"A bad row stops start-up.*?for example `([^`]+)`", text)
    path, number, raw = find(
        r"mogateway: invalid setting ported_csv \(MOGATEWAY_PORTED_CSV\): "
        r"(\S+\.csv):(\d+): msisdn '([^']+)': ",
        line,
    )
    return line, path, int(number), raw


def bad_ported_file(tmp_path: Path) -> tuple[Path, str]:
    """The doc's sample ported file grown to put the doc's bad msisdn on the line the doc names; and
    the line the doc quotes, naming this file."""
    line, path, number, raw = quoted_error()
    good = sample("msisdn").splitlines()
    rows = good + [good[1]] * (number - 1 - len(good)) + [f"{raw},airtel,"]
    bad = write(tmp_path / "ported.csv", "\n".join(rows) + "\n")
    return bad, line.replace(path, str(bad))


def test_the_loader_says_the_quoted_error_for_the_bad_row(tmp_path: Path) -> None:
    bad, expected = bad_ported_file(tmp_path)
    with pytest.raises(NumberingDataError) as raised:
        load_ported(bad)
    assert expected.endswith(": " + str(raised.value))
    assert str(raised.value).startswith(f"{bad}:{quoted_error()[2]}: msisdn ")


def test_serve_stops_with_the_quoted_line_for_the_bad_row(tmp_path: Path) -> None:
    """`mogateway serve` with the bad file: it does not start, and says the doc's line, alone."""
    bad, expected = bad_ported_file(tmp_path)
    env = clean_env(MOGATEWAY_DATABASE=str(tmp_path / "journal.db"), MOGATEWAY_PORTED_CSV=str(bad))
    ran = subprocess.run(
        [*mogateway_command(), "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--workers", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr == expected + "\n"
    assert "exits with status 2" in flat(NUMBERING.section(LOADING))


# ------------------------------------------------------------------------------------ a real gateway


def test_the_sample_files_reach_the_callbacks_sender(tmp_path: Path) -> None:
    """One `mogateway serve` with both sample files: the order of trust as the application sees it."""
    series = write(tmp_path / "series.csv", sample("prefix"))
    ported = write(tmp_path / "ported.csv", sample("msisdn"))
    pushes = [
        ("919810012345", {"operator": "airtel"}, ("airtel", "")),  # ported (jio, mumbai): stale, nothing
        ("919810012345", {"operator": "Reliance Jio"}, ("jio", "mumbai")),  # agrees: gets the circle
        ("919810012347", {}, ("", "")),  # ported, destination unknown
        ("919810012348", {"circle": "Delhi NCR"}, ("airtel", "delhi")),  # the series fills the operator
        ("917229812345", {"operator": "jio", "circle": "mumbai"}, ("jio", "mumbai")),  # the source's both
    ]
    with (
        CallbackRecorder.in_thread(Answer.text("OK")) as app,
        serve_gateway(tmp_path, workers=1, series_csv=str(series), ported_csv=str(ported)) as gw,
    ):
        gw.add_client(shortcodes=["56001"], callback_url=app.url, name="trust")
        sent = [(gw.push("56001", "HELLO", msisdn, **source)["id"], want) for msisdn, source, want in pushes]
        for message_id, _ in sent:
            assert gw.wait_state(message_id, timeout=30)["state"] == "replied"
        bodies = {c.headers["x-mogateway-message-id"]: json.loads(c.body) for c in app.calls}
    for message_id, want in sent:
        sender = bodies[message_id]["sender"]
        assert (sender["operator"], sender["circle"]) == want, (message_id, sender)
