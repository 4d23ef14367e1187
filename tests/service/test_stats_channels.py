"""MOs by channel: the counters' ``channel`` label, read into the figures of ``/v1/stats``."""

from __future__ import annotations

from collections import Counter

from prometheus_client import generate_latest

from mogateway.service.metrics import Metrics
from mogateway.service.stats import StatsService, read_counters


def test_the_mo_counters_have_a_channel_label_and_both_channels_show_from_the_start() -> None:
    metrics = Metrics()
    text = generate_latest(metrics.registry).decode()
    for name in ("mogateway_mo_accepted_total", "mogateway_mo_duplicates_total"):
        assert f'{name}{{channel="sms"}} 0.0' in text
        assert f'{name}{{channel="whatsapp"}} 0.0' in text
    metrics.rejected.labels("msisdn", "whatsapp").inc()
    text = generate_latest(metrics.registry).decode()
    assert 'mogateway_mo_rejected_total{channel="whatsapp",field="msisdn"} 1.0' in text


def test_counters_by_channel_add_up_to_the_totals_of_before() -> None:
    metrics = Metrics()
    metrics.received.labels("sms").inc(5)
    metrics.received.labels("whatsapp").inc(2)
    metrics.rejected.labels("msisdn", "sms").inc()
    metrics.rejected.labels("msisdn", "whatsapp").inc(3)
    metrics.rejected.labels("shortcode", "sms").inc()
    metrics.duplicates.labels("whatsapp").inc()
    counters = read_counters(metrics)
    assert counters[("", "accepted")] == 7 and counters[("", "accepted@whatsapp")] == 2
    assert counters[("", "rejected")] == 5 and counters[("", "rejected@whatsapp")] == 3
    assert counters[("", "duplicates")] == 1 and counters[("", "duplicates@whatsapp")] == 1
    assert not any(kind.endswith("@sms") for _, kind in counters)  # SMS is the rest

    totals = StatsService._totals_json(Counter({k: int(v) for k, v in counters.items()}))
    assert totals["mo_in"] == 12 and totals["accepted"] == 7  # as before
    assert totals["channels"] == {
        "sms": {"mo_in": 7, "accepted": 5, "rejected": 2, "duplicates": 0},
        "whatsapp": {"mo_in": 5, "accepted": 2, "rejected": 3, "duplicates": 1},
    }


def test_minutes_written_before_channels_were_counted_are_sms() -> None:
    old = Counter({("", "accepted"): 4, ("", "rejected"): 1, ("", "duplicates"): 2})
    channels = StatsService._totals_json(old)["channels"]
    assert channels["sms"] == {"mo_in": 5, "accepted": 4, "rejected": 1, "duplicates": 2}
    assert channels["whatsapp"] == {"mo_in": 0, "accepted": 0, "rejected": 0, "duplicates": 0}
