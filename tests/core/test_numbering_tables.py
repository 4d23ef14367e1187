"""Series table, ported-numbers CSV and the order of trust that builds ``sender``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mogateway.core.contract import Sender
from mogateway.core.numbering import (
    CsvPortedResolver,
    NumberingDataError,
    OperatorCircle,
    SenderResolver,
    SeriesTable,
)


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- series


def test_shipped_table_answers_the_original_allocatee() -> None:
    table = SeriesTable.shipped()
    assert len(table) > 3000
    assert table.source == "shipped"
    assert table.lookup("919810012345") == OperatorCircle("airtel", "")  # 9810: Airtel
    assert SeriesTable.shipped() is table  # loaded once


def test_shipped_table_splits_a_four_digit_series_at_the_fifth_digit() -> None:
    table = SeriesTable.shipped()
    assert table.lookup("917229012345") == OperatorCircle("airtel", "")  # 72290
    assert table.lookup("917229812345") == OperatorCircle("vi", "")  # 72298 (Vodafone)
    assert table.lookup("917229112345") is None  # 72291: no allocatee in the source


def test_shipped_table_holds_only_four_and_five_digit_prefixes_with_ids() -> None:
    text = (Path(__file__).parents[2] / "src/mogateway/data/series_in.csv").read_text(encoding="utf-8")
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")][1:]
    assert {len(prefix) for prefix, _, _ in rows} == {4, 5}
    assert {op for _, op, _ in rows} <= {"jio", "airtel", "vi", "bsnl", "mtnl", "aircel", "stel"}
    assert {circle for _, _, circle in rows} == {""}


def test_own_series_csv_with_circles_and_longest_prefix(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "series.csv",
        "\ufeffprefix,operator,circle\n"  # a spreadsheet's byte-order mark
        "# own allotments\n"
        "7229,Vodafone,UP East\n"
        "72290,Airtel,DL\n"
        "\n"
        "98100,jio\n"  # circle column may be left out
        "98101,,\n",  # a block known not to be 9810's operator
    )
    table = SeriesTable.from_csv(path)
    assert len(table) == 4
    assert table.source == str(path)
    assert table.lookup("917229012345") == OperatorCircle("airtel", "delhi")
    assert table.lookup("917229512345") == OperatorCircle("vi", "up-east")
    assert table.lookup("919810012345") == OperatorCircle("jio", "")
    assert table.lookup("919810112345") == OperatorCircle("", "")
    assert table.lookup("919999912345") is None


def test_series_csv_header_is_optional(tmp_path: Path) -> None:
    table = SeriesTable.from_csv(write(tmp_path, "s.csv", "9810,airtel,delhi\n"))
    assert table.lookup("919810012345") == OperatorCircle("airtel", "delhi")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("prefix,operator,circle\n981,airtel,\n", 2, "prefix '981' is not 4 or 5 digits"),
        ("981000,airtel,\n", 1, "prefix '981000' is not 4 or 5 digits"),
        ("98a0,airtel,\n", 1, "prefix '98a0' is not 4 or 5 digits"),
        ("9810,airtel,\n# c\n9810,jio,\n", 3, "prefix 9810 already given on line 1"),
        ("9810,airtel,delhi,extra\n", 1, "4 columns, expected at most 3"),
        ('9810,"airtel\n', 1, "not a readable UTF-8 CSV file"),
    ],
)
def test_bad_series_rows_name_the_file_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = write(tmp_path, "series.csv", text)
    with pytest.raises(NumberingDataError) as caught:
        SeriesTable.from_csv(path)
    assert caught.value.line == line
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_series_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "series.csv", b"9810,airtel,\n9811,\xff\xfe,\n")
    with pytest.raises(NumberingDataError, match="not a readable UTF-8 CSV file"):
        SeriesTable.from_csv(path)


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NumberingDataError) as caught:
        SeriesTable.from_csv(tmp_path / "nope.csv")
    assert str(caught.value) == f"{tmp_path / 'nope.csv'}: cannot read (No such file or directory)"


def test_series_table_refuses_bad_prefixes_in_code() -> None:
    with pytest.raises(ValueError, match="not 4 or 5 digits"):
        SeriesTable({"981": OperatorCircle("airtel")})


# ------------------------------------------------------------------------------------------- ported


def test_ported_csv_accepts_any_msisdn_form_and_normalises_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ported.csv",
        "msisdn,operator,circle\n"
        "919810012345,Reliance Jio,MU\n"
        "+91 98100 12346,Vodafone,\n"
        "09810012347,,\n"  # ported, destination unknown
        "9810012348,airtel,Delhi\n"
        "9810012348,bsnl,Kerala\n",  # ported again: the later row wins
    )
    ported = CsvPortedResolver(path)
    assert len(ported) == 4
    assert ported.lookup("919810012345") == OperatorCircle("jio", "mumbai")
    assert ported.lookup("919810012346") == OperatorCircle("vi", "")
    assert ported.lookup("919810012347") == OperatorCircle("", "")
    assert ported.lookup("919810012348") == OperatorCircle("bsnl", "kerala")
    assert ported.lookup("919810099999") is None


def test_ported_csv_header_and_trailing_columns_are_optional(tmp_path: Path) -> None:
    ported = CsvPortedResolver(write(tmp_path, "p.csv", "919810012345,airtel\n919810012346\n"))
    assert ported.lookup("919810012345") == OperatorCircle("airtel", "")
    assert ported.lookup("919810012346") == OperatorCircle("", "")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("msisdn,operator,circle\n919810012345,jio,\n+447911123456,vi,\n", 3, "not an Indian number"),
        ("919810012345,jio,\n\n1600123456,jio,\n", 3, "1600 series"),
        ("98100,jio,\n", 1, "wrong length"),
        ("919810012345,jio,mumbai,x\n", 1, "4 columns"),
    ],
)
def test_bad_ported_rows_name_the_file_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = write(tmp_path, "ported.csv", text)
    with pytest.raises(NumberingDataError) as caught:
        CsvPortedResolver(path)
    assert caught.value.line == line
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}: ")


# ------------------------------------------------------------------------------------- order of trust


class FixedPorted:
    """A ported resolver with a fixed answer that counts its lookups."""

    def __init__(self, answers: dict[str, OperatorCircle]) -> None:
        self.answers = answers
        self.calls = 0

    def lookup(self, msisdn: str) -> OperatorCircle | None:
        self.calls += 1
        return self.answers.get(msisdn)


N = "919810012345"
SERIES = SeriesTable({"9810": OperatorCircle("airtel", "delhi"), "9811": OperatorCircle("aircel", "")})


def resolver(ported: dict[str, OperatorCircle] | None = None) -> SenderResolver:
    return SenderResolver(ported=FixedPorted(ported) if ported is not None else None, series=SERIES)


def test_sender_carries_all_five_members() -> None:
    sender = SenderResolver(series=None).sender("919810000123")
    assert sender == Sender(cc=91, ndc=9810, sn=123, operator="", circle="")


def test_default_resolver_uses_the_shipped_table() -> None:
    assert SenderResolver().sender(N) == Sender(91, 9810, 12345, "airtel", "")


def test_source_values_win_and_are_normalised() -> None:
    r = resolver({N: OperatorCircle("jio", "mumbai")})
    assert r.resolve(N, "Vodafone", "UP East") == OperatorCircle("vi", "up-east")
    assert r.sender(N, "New Telco", "zone 9") == Sender(91, 9810, 12345, "new-telco", "zone-9")


def test_complete_source_values_skip_the_ported_lookup() -> None:
    ported = FixedPorted({N: OperatorCircle("jio", "mumbai")})
    SenderResolver(ported=ported, series=SERIES).resolve(N, "airtel", "delhi")
    assert ported.calls == 0


def test_ported_entry_beats_the_series_table() -> None:
    assert resolver({N: OperatorCircle("jio", "mumbai")}).resolve(N) == OperatorCircle("jio", "mumbai")


def test_a_ported_number_is_never_answered_from_the_series_table() -> None:
    # Ported to an unknown operator: the series' original allocatee would be wrong.
    assert resolver({N: OperatorCircle("", "")}).resolve(N) == OperatorCircle("", "")
    assert resolver({N: OperatorCircle("jio", "")}).resolve(N) == OperatorCircle("jio", "")


def test_series_answers_numbers_not_ported() -> None:
    assert resolver({}).resolve(N) == OperatorCircle("airtel", "delhi")
    assert resolver().resolve(N) == OperatorCircle("airtel", "delhi")


def test_lower_source_fills_a_missing_field_only_when_it_agrees() -> None:
    r = resolver({N: OperatorCircle("airtel", "delhi")})
    assert r.resolve(N, operator="Airtel") == OperatorCircle("airtel", "delhi")
    assert r.resolve(N, operator="jio") == OperatorCircle("jio", "")  # the list is stale for this number
    assert r.resolve(N, circle="DL") == OperatorCircle("airtel", "delhi")
    assert r.resolve(N, circle="MU") == OperatorCircle("", "mumbai")


def test_series_fills_like_any_lower_source() -> None:
    r = resolver()
    assert r.resolve(N, operator="airtel") == OperatorCircle("airtel", "delhi")
    assert r.resolve(N, operator="vi") == OperatorCircle("vi", "")
    assert r.resolve(N, circle="delhi") == OperatorCircle("airtel", "delhi")


def test_series_naming_a_defunct_operator_is_ignored() -> None:
    assert resolver().resolve("919811012345") == OperatorCircle("", "")
    assert resolver().resolve("919811012345", circle="Delhi") == OperatorCircle("", "delhi")


def test_nothing_known_gives_empty_strings() -> None:
    assert resolver().resolve("917000012345") == OperatorCircle("", "")
    assert SenderResolver(series=None).resolve(N) == OperatorCircle("", "")


def test_from_files_loads_both_csvs(tmp_path: Path) -> None:
    series = write(tmp_path, "series.csv", "9810,airtel,delhi\n")
    ported = write(tmp_path, "ported.csv", "919810012346,jio,mumbai\n")
    r = SenderResolver.from_files(series_csv=series, ported_csv=ported)
    assert r.series is not None and r.series.source == str(series)
    assert r.resolve(N) == OperatorCircle("airtel", "delhi")
    assert r.resolve("919810012346") == OperatorCircle("jio", "mumbai")
    assert r.resolve("917229812345") == OperatorCircle("", "")  # own table replaces the shipped one


def test_from_files_without_paths_uses_the_shipped_table() -> None:
    r = SenderResolver.from_files(None, None)
    assert r.series is SeriesTable.shipped()


def test_from_files_reports_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(NumberingDataError, match=r"ported\.csv:1: msisdn 'x'"):
        SenderResolver.from_files(ported_csv=write(tmp_path, "ported.csv", "x,jio,\n"))
