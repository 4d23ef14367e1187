"""Prometheus metrics of one gateway, in a registry of its own (several gateways can share a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.received = Counter("mogateway_mo_accepted", "MOs accepted and stored", registry=r)
        self.rejected = Counter(
            "mogateway_mo_rejected", "MOs refused at intake, by field", ["field"], registry=r
        )
        self.duplicates = Counter("mogateway_mo_duplicates", "MOs a source sent again", registry=r)
        self.callbacks = Counter(
            "mogateway_callbacks",
            "Callback exchanges by client and outcome",
            ["client", "outcome"],
            registry=r,
        )
        self.callback_latency = Histogram(
            "mogateway_callback_latency_seconds",
            "Time from the first POST to the judged answer, by client",
            ["client"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end = Histogram(
            "mogateway_mo_to_reply_seconds",
            "Time from receiving an MO to handing its reply over",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.inflight = Gauge("mogateway_callbacks_inflight", "Callbacks in flight", ["client"], registry=r)
        self.replies = Counter(
            "mogateway_replies", "Replies by channel and result", ["channel", "result"], registry=r
        )
        self.replies_waiting = Gauge(
            "mogateway_replies_waiting", "Replies waiting for a channel that can take them", registry=r
        )
        self.reply_truncated = Counter(
            "mogateway_replies_truncated", "Replies cut to the configured number of parts", registry=r
        )
        self.queue_lag = Gauge("mogateway_queue_lag", "MOs waiting for dispatch on this node", registry=r)
        self.unroutable = Counter("mogateway_mo_unroutable", "MOs with no client for them", registry=r)
        self.dlt_replies = Counter(
            "mogateway_dlt_replies",
            "Replies of clients with DLT settings, by client and result (matched, unmatched, blocked)",
            ["client", "result"],
            registry=r,
        )
