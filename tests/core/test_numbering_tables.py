"""Series table, ported numbers and the order of trust that builds ``sender``, from rows already read."""

from __future__ import annotations

import pytest

from mogateway.core.contract import Sender
from mogateway.core.numbering import (
    NumberingDataError,
    OperatorCircle,
    PortedTable,
    SenderResolver,
    SeriesTable,
)

# ------------------------------------------------------------------------------------------- series


def test_series_rows_with_circles_and_longest_prefix() -> None:
    rows = [(2, ("7229", "Vodafone", "UP East")), (3, ("72290", "Airtel", "DL")), (5, ("98101", "", ""))]
    table = SeriesTable.from_rows(rows, source="mine")
    assert len(table) == 3
    assert table.source == "mine"
    assert table.lookup("917229012345") == OperatorCircle("airtel", "delhi")
    assert table.lookup("917229512345") == OperatorCircle("vi", "up-east")
    assert table.lookup("919810112345") == OperatorCircle("", "")
    assert table.lookup("919999912345") is None


def test_series_rows_numbered_in_code() -> None:
    table = SeriesTable.from_rows(enumerate([("9810", "airtel", "delhi")], 1))
    assert table.lookup("919810012345") == OperatorCircle("airtel", "delhi")
    assert repr(table) == "SeriesTable(1 prefixes from memory)"


@pytest.mark.parametrize(
    ("rows", "line", "reason"),
    [
        ([(7, ("981", "airtel", ""))], 7, "prefix '981' is not 4 or 5 digits"),
        ([(1, ("98a0", "airtel", ""))], 1, "prefix '98a0' is not 4 or 5 digits"),
        ([(1, ("9810", "airtel", "")), (3, ("9810", "jio", ""))], 3, "prefix 9810 already given on line 1"),
    ],
)
def test_bad_series_rows_name_the_source_and_line(
    rows: list[tuple[int, tuple[str, str, str]]], line: int, reason: str
) -> None:
    with pytest.raises(NumberingDataError) as caught:
        SeriesTable.from_rows(rows, source="series.csv")
    assert (caught.value.path, caught.value.line, caught.value.reason) == ("series.csv", line, reason)
    assert str(caught.value) == f"series.csv:{line}: {reason}"


def test_series_table_refuses_bad_prefixes_in_code() -> None:
    with pytest.raises(ValueError, match="not 4 or 5 digits"):
        SeriesTable({"981": OperatorCircle("airtel")})


# ------------------------------------------------------------------------------------------- ported


def test_ported_rows_accept_any_msisdn_form_and_the_later_row_wins() -> None:
    rows = [
        (1, ("919810012345", "Reliance Jio", "MU")),
        (2, ("+91 98100 12346", "Vodafone", "")),
        (3, ("09810012347", "", "")),  # ported, destination unknown
        (4, ("9810012348", "airtel", "Delhi")),
        (5, ("9810012348", "bsnl", "Kerala")),
    ]
    ported = PortedTable.from_rows(rows, source="ported.csv")
    assert len(ported) == 4
    assert ported.source == "ported.csv"
    assert ported.lookup("919810012345") == OperatorCircle("jio", "mumbai")
    assert ported.lookup("919810012346") == OperatorCircle("vi", "")
    assert ported.lookup("919810012347") == OperatorCircle("", "")
    assert ported.lookup("919810012348") == OperatorCircle("bsnl", "kerala")
    assert ported.lookup("919810099999") is None


def test_a_bad_ported_msisdn_names_the_source_and_line() -> None:
    with pytest.raises(NumberingDataError) as caught:
        PortedTable.from_rows([(1, ("919810012345", "jio", "")), (4, ("1600123456", "jio", ""))], "p.csv")
    assert caught.value.line == 4
    assert str(caught.value) == (
        "p.csv:4: msisdn '1600123456': the 1600 series is for government voice calls, not a mobile sender"
    )


def test_a_resolver_has_no_default_series_table() -> None:
    # The shipped table is read from a file, at the edge: forgetting it must fail, not go quiet.
    with pytest.raises(TypeError):
        SenderResolver()  # type: ignore[call-arg]


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
