"""The rate limit of operational log lines: the first at once, then one per period with a count."""

from __future__ import annotations

from mogateway.service.throttle import Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_goes_out_then_one_per_period_saying_how_many_were_held_back() -> None:
    clock = Clock()
    throttle = Throttle(10.0, clock)
    assert throttle.ready("failed") == 0
    for _ in range(7):
        clock.now += 1
        assert throttle.ready("failed") is None
    clock.now += 3  # 10 s after the first line
    assert throttle.ready("failed") == 7
    assert throttle.more(7) == " (7 more like it in the last 10 s)"
    assert throttle.more(0) == ""


def test_keys_are_throttled_apart_and_forget_starts_a_key_afresh() -> None:
    clock = Clock()
    throttle = Throttle(60.0, clock)
    assert throttle.ready("bind-a") == 0
    assert throttle.ready("bind-b") == 0
    assert throttle.ready("bind-a") is None
    assert throttle.forget("bind-a") == 1
    assert throttle.ready("bind-a") == 0
