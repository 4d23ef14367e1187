"""A failed round of a periodic task (the sweeper, the orphan sweep) is logged once a period, counted."""

from __future__ import annotations

import logging

import pytest

from mogateway.service.throttle import Throttle


def test_a_failed_round_is_one_warning_a_period_saying_how_many_were_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    throttle = Throttle(60.0, lambda: now[0])
    log = logging.getLogger("mogateway.test_rounds")
    with caplog.at_level(logging.WARNING, logger="mogateway.test_rounds"):
        throttle.round_failed(log, "sweep", ConnectionError("journal away"))
        for _ in range(3):
            now[0] += 5
            throttle.round_failed(log, "sweep", ConnectionError("journal away"))
        now[0] += 60
        throttle.round_failed(log, "orphan sweep", OSError("queue away"))
    assert [r.getMessage() for r in caplog.records] == [
        "sweep failed: ConnectionError: journal away",
        "orphan sweep failed: OSError: queue away (3 more like it in the last 60 s)",
    ]
