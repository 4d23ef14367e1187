"""The loop metrics (service.metrics) expose exactly what prometheus_client's Counter, Gauge and
Histogram expose after the same updates: the same text on /metrics, apart from the ``_created``
times."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mogateway.service.metrics import LoopCounter, LoopGauge, LoopHistogram, Metrics
from mogateway.service.stats import read_counters

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)
CLIENTS = ("cl_a", "cl_b", 'quote"d')


def _text(registry: CollectorRegistry) -> str:
    return re.sub(r"(_created\{?[^ ]*) \S+", r"\1 T", generate_latest(registry).decode())


_amounts = st.one_of(
    st.sampled_from([0.0, *BUCKETS]),  # on a bound: counted in that bucket
    st.floats(0.0, 40.0, allow_nan=False),
)


@given(st.lists(st.tuples(st.sampled_from(CLIENTS), st.sampled_from(["reply", "timeout"]), _amounts)))
def test_counters_and_histograms_read_as_prometheus_clients(ops: list[tuple[str, str, float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counter = LoopCounter("t_callbacks", "help", ["client", "outcome"], registry=ours)
    histogram = LoopHistogram("t_latency_seconds", "help", ["client"], buckets=BUCKETS, registry=ours)
    plain = LoopHistogram("t_e2e_seconds", "help", buckets=BUCKETS, registry=ours)
    total = LoopCounter("t_all", "help", registry=ours)
    p_counter = Counter("t_callbacks", "help", ["client", "outcome"], registry=theirs)
    p_histogram = Histogram("t_latency_seconds", "help", ["client"], buckets=BUCKETS, registry=theirs)
    p_plain = Histogram("t_e2e_seconds", "help", buckets=BUCKETS, registry=theirs)
    p_total = Counter("t_all", "help", registry=theirs)
    for client, outcome, amount in ops:
        counter.labels(client, outcome).inc()
        p_counter.labels(client, outcome).inc()
        histogram.labels(client).observe(amount)
        p_histogram.labels(client).observe(amount)
        plain.observe(amount)
        p_plain.observe(amount)
        total.inc(2)
        p_total.inc(2)
    assert _text(ours) == _text(theirs)


def test_gauges_read_as_prometheus_clients() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    gauge = LoopGauge("t_inflight", "help", ["client"], registry=ours)
    p_gauge = Gauge("t_inflight", "help", ["client"], registry=theirs)
    for g in (gauge, p_gauge):
        g.labels("a").inc()
        g.labels("a").inc()
        g.labels("b").inc()
        g.labels("a").dec()
        g.labels("b").dec()
        g.labels("c").set(7)
    assert _text(ours) == _text(theirs)


def test_wrong_label_count_is_refused() -> None:
    counter = LoopCounter("t_x", "help", ["client"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("a", "b")


def test_a_name_taken_twice_is_refused_as_prometheus_client_does() -> None:
    registry = CollectorRegistry(auto_describe=True)
    LoopCounter("t_dup", "help", registry=registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("t_dup", "help", registry=registry)


def test_the_traffic_figures_read_the_loop_metrics() -> None:
    metrics = Metrics()
    metrics.callbacks.labels("cl_a", "reply").inc()
    metrics.callbacks.labels("cl_a", "reply").inc()
    metrics.callback_latency.labels("cl_a").observe(0.007)
    metrics.replies.labels("smpp", "submitted").inc()
    counters = read_counters(metrics)
    assert counters[("cl_a", "reply")] == 2
    assert counters[("", "replies")] == 1
    latency = {k: v for k, v in counters.items() if k[0] == "cl_a" and k[1] != "reply"}
    assert sum(latency.values()) == 1 and max(latency.values()) == 1
