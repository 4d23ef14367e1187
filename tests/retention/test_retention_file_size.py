"""A short run of bench/retention.py: at a steady rate with retention, the SQLite journal stops growing
(its pages level off and the freed ones are given back), on the journal's own API and the real sweep."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import retention as bench  # bench/retention.py


async def test_the_journal_file_levels_off_at_a_steady_rate(tmp_path: Path) -> None:
    days = await bench.run(tmp_path / "journal.db", days=7, per_day=2000, keep=2)

    assert [d.kept for d in days] == [2000, 4000] + [4000] * 5  # two days kept, each day's sweep
    assert [d.deleted for d in days] == [0, 0] + [2000] * 5
    full = days[2].pages  # the first day deleted: the journal holds what it will hold from now on
    for d in days[3:]:
        assert d.pages <= full * 1.03, [x.pages for x in days]  # not growing day after day
        assert d.free_pages == 0 and d.reclaimed > 0  # what was freed went back to the file system
    assert days[-1].pages < days[2].pages + 0.02 * full
    assert max(d.file_bytes for d in days[3:]) <= days[2].file_bytes * 1.05
