"""The pure parts of service.stats: windows and latency percentiles from histogram bins."""

from __future__ import annotations

from datetime import datetime

import pytest

from mogateway.service.stats import WindowError, parse_window, percentile_ms


def test_percentiles_interpolate_inside_the_bucket_like_prometheus() -> None:
    bins = {"0.005": 0, "0.01": 50, "0.025": 50, "+Inf": 0}
    assert percentile_ms(bins, 0.5) == 10.0  # the whole first half lies in (5 ms, 10 ms]
    assert percentile_ms(bins, 0.75) == 17.5  # half way through (10 ms, 25 ms]
    assert percentile_ms({"0.1": 99, "+Inf": 1}, 0.999) == 100.0  # past the last bound: that bound
    assert percentile_ms({}, 0.5) is None


def test_windows_are_whole_minutes_ending_after_now() -> None:
    now = 1_800_000_030.0
    since, until = parse_window("5m", now, 8)
    assert until == 1_800_000_060 and since == until - 300
    assert parse_window("90s", now, 8)[0] == until - 120
    midnight = datetime.fromtimestamp(now).astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    assert parse_window("today", now, 8) == (int(midnight.timestamp()), until)
    for bad in ("", "5", "5w", "30s", "9d", "today "):
        with pytest.raises(WindowError):
            parse_window(bad, now, 8)
