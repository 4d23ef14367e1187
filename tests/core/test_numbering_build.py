"""scripts/build_series.py: short prefixes expanded, 5 digits kept, same answers as a longest-prefix match."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mogateway.core.numbering import OperatorCircle, SeriesTable, normalize_operator
from mogateway.edges.numbering_files import load_series

SCRIPT = Path(__file__).parents[2] / "scripts" / "build_series.py"


@pytest.fixture(scope="module")
def build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_series", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_series"] = module
    spec.loader.exec_module(module)
    return module


def longest_prefix(source: dict[str, str], national: str) -> str:
    for length in range(len(national), 0, -1):
        if national[:length] in source:
            return normalize_operator(source[national[:length]])
    return ""


def table_of(rows: list[tuple[str, str]]) -> SeriesTable:
    return SeriesTable({prefix: OperatorCircle(op, "") for prefix, op in rows})


SOURCE = {
    "92": "Tata Docomo",
    "926": "Reliance Jio",
    "9261": "Airtel",
    "92612": "Vodafone",
    "72290": "Airtel",
    "72298": "Vodafone",
}


def test_short_prefixes_expand_to_four_digits_and_specific_ones_win(build: ModuleType) -> None:
    rows = dict(build.build_rows(SOURCE))
    assert {len(p) for p in rows} == {4, 5}
    assert rows["9200"] == "airtel" and rows["9299"] == "airtel"
    assert rows["9260"] == "jio" and rows["9269"] == "jio"
    assert rows["9261"] == "airtel"
    assert rows["92612"] == "vi"
    assert "7229" not in rows and rows["72290"] == "airtel" and rows["72298"] == "vi"
    assert len(rows) == 100 + 3


def test_table_answers_like_a_longest_prefix_match(build: ModuleType) -> None:
    table = table_of(build.build_rows(SOURCE))
    for head in ("92", "72"):
        for n in range(1000):
            national = f"{head}{n:03d}12345"
            found = table.lookup("91" + national)
            assert (found.operator if found else "") == longest_prefix(SOURCE, national), national


def test_real_source_builds_a_table_equivalent_to_it(build: ModuleType) -> None:
    source = build.source_prefixes()
    table = table_of(build.build_rows(source))
    # Every source prefix, and its neighbours at the 5th digit, answer as a longest-prefix match would.
    for prefix in source:
        for fifth in "0123456789":
            national = (prefix + fifth * 5)[:5] + "12345"
            found = table.lookup("91" + national)
            assert (found.operator if found else "") == longest_prefix(source, national), national


def test_prefixes_longer_than_five_digits_stop_the_build(build: ModuleType) -> None:
    with pytest.raises(SystemExit, match="longer than 5 digits"):
        build.build_rows({"981234": "Airtel"})


def test_rendered_csv_loads_back(build: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "series.csv"
    path.write_text(build.render_csv(build.build_rows(SOURCE)), encoding="utf-8")
    table = load_series(path)
    assert len(table) == 103
    assert table.lookup("919261212345") == OperatorCircle("vi", "")
