"""Numbering tables read from files (edges/numbering_files.py): the CSV rules, line-numbered errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mogateway.core.contract import Sender
from mogateway.core.numbering import NumberingDataError, OperatorCircle
from mogateway.edges.numbering_files import load_ported, load_series, sender_resolver, shipped_series


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- series


def test_shipped_table_answers_the_original_allocatee() -> None:
    table = shipped_series()
    assert len(table) > 3000
    assert table.source == "shipped"
    assert table.lookup("919810012345") == OperatorCircle("airtel", "")  # 9810: Airtel
    assert shipped_series() is table  # loaded once


def test_shipped_table_splits_a_four_digit_series_at_the_fifth_digit() -> None:
    table = shipped_series()
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
    table = load_series(path)
    assert len(table) == 4
    assert table.source == str(path)
    assert table.lookup("917229012345") == OperatorCircle("airtel", "delhi")
    assert table.lookup("917229512345") == OperatorCircle("vi", "up-east")
    assert table.lookup("919810012345") == OperatorCircle("jio", "")
    assert table.lookup("919810112345") == OperatorCircle("", "")
    assert table.lookup("919999912345") is None


def test_series_csv_header_is_optional(tmp_path: Path) -> None:
    table = load_series(write(tmp_path, "s.csv", "9810,airtel,delhi\n"))
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
        load_series(path)
    assert caught.value.line == line
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_series_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "series.csv", b"9810,airtel,\n9811,\xff\xfe,\n")
    with pytest.raises(NumberingDataError, match="not a readable UTF-8 CSV file"):
        load_series(path)


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NumberingDataError) as caught:
        load_series(tmp_path / "nope.csv")
    assert str(caught.value) == f"{tmp_path / 'nope.csv'}: cannot read (No such file or directory)"


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
    ported = load_ported(path)
    assert len(ported) == 4
    assert ported.lookup("919810012345") == OperatorCircle("jio", "mumbai")
    assert ported.lookup("919810012346") == OperatorCircle("vi", "")
    assert ported.lookup("919810012347") == OperatorCircle("", "")
    assert ported.lookup("919810012348") == OperatorCircle("bsnl", "kerala")
    assert ported.lookup("919810099999") is None


def test_ported_csv_header_and_trailing_columns_are_optional(tmp_path: Path) -> None:
    ported = load_ported(write(tmp_path, "p.csv", "919810012345,airtel\n919810012346\n"))
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
        load_ported(path)
    assert caught.value.line == line
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}: ")


# ------------------------------------------------------------------------------------------ resolver

N = "919810012345"


def test_default_resolver_uses_the_shipped_table() -> None:
    assert sender_resolver().sender(N) == Sender(91, 9810, 12345, "airtel", "")


def test_sender_resolver_loads_both_files(tmp_path: Path) -> None:
    series = write(tmp_path, "series.csv", "9810,airtel,delhi\n")
    ported = write(tmp_path, "ported.csv", "919810012346,jio,mumbai\n")
    r = sender_resolver(series_csv=series, ported_csv=ported)
    assert r.series is not None and r.series.source == str(series)
    assert r.resolve(N) == OperatorCircle("airtel", "delhi")
    assert r.resolve("919810012346") == OperatorCircle("jio", "mumbai")
    assert r.resolve("917229812345") == OperatorCircle("", "")  # own table replaces the shipped one


def test_sender_resolver_without_paths_uses_the_shipped_table() -> None:
    r = sender_resolver(None, None)
    assert r.series is shipped_series()


def test_sender_resolver_reports_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(NumberingDataError, match=r"ported\.csv:1: msisdn 'x'"):
        sender_resolver(ported_csv=write(tmp_path, "ported.csv", "x,jio,\n"))
