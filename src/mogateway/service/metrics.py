"""Prometheus metrics of one gateway, in a registry of its own (several gateways can share a process).

The metrics that move with every MO are plain numbers here: callbacks and replies by outcome, the
callbacks in flight, and the two latency histograms (:class:`LoopCounter`, :class:`LoopGauge`,
:class:`LoopHistogram`). Only the event loop's thread updates them, so no update takes a lock, and
the registry reads them when it is scraped. prometheus_client's own classes take a lock at every update:
0.4 µs for a count and 1 µs for an observation, 3 to 4 µs for each MO (docs/benchmarks.md §0.7). The
rest, which move once per batch or more rarely, are prometheus_client's. Both expose the same samples
(``_total`` and ``_created`` for counters, ``_bucket``, ``_count``, ``_sum`` and ``_created`` for
histograms).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from mogateway.core.message import CHANNELS

__all__ = ["LoopCounter", "LoopGauge", "LoopHistogram", "Metrics"]

Child = TypeVar("Child")

_go_float = cast(Callable[[float], str], floatToGoString)  # untyped in prometheus_client
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)


class _Count:
    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)


class _Observations:
    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds  # ends with +Inf
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        """Count ``amount`` in the first bucket whose upper bound is at least ``amount``."""
        self.counts[bisect.bisect_left(self.bounds, amount)] += 1
        self.sum += amount


class _Labelled(Generic[Child]):
    """What the loop metrics share: a name, help, label names, and one child per label values."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str] = (), *, registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._doc = documentation
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Child] = {}
        if not self._labelnames:  # shown from the start, as prometheus_client's
            self._children[()] = self._new_child()
        registry.register(self)

    def labels(self, *values: str) -> Child:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
            child = self._children[values] = self._new_child()
        return child

    def describe(self) -> list[Metric]:
        return [self._family({})]

    def collect(self) -> list[Metric]:
        return [self._family(self._children)]

    def _new_child(self) -> Child:
        raise NotImplementedError

    def _family(self, children: dict[tuple[str, ...], Child]) -> Metric:
        raise NotImplementedError


class LoopCounter(_Labelled[_Count]):
    """A counter updated by the event loop's thread only: ``labels(...).inc()``, or ``inc()``."""

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def _new_child(self) -> _Count:
        return _Count()

    def _family(self, children: dict[tuple[str, ...], _Count]) -> Metric:
        family = CounterMetricFamily(self._name, self._doc, labels=self._labelnames)
        for values, child in children.items():
            family.add_metric(values, child.value, created=child.created)
        return family


class LoopGauge(_Labelled[_Count]):
    """A gauge updated by the event loop's thread only: ``labels(...).inc()``, ``.dec()``, ``.set()``."""

    def _new_child(self) -> _Count:
        return _Count()

    def _family(self, children: dict[tuple[str, ...], _Count]) -> Metric:
        family = GaugeMetricFamily(self._name, self._doc, labels=self._labelnames)
        for values, child in children.items():
            family.add_metric(values, child.value)
        return family


class LoopHistogram(_Labelled[_Observations]):
    """A histogram updated by the event loop's thread only: ``labels(...).observe(x)``, or
    ``observe(x)``. Its buckets are prometheus_client's: the upper bounds given, then +Inf."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._bounds = (*sorted(float(b) for b in buckets if b != math.inf), math.inf)
        self._le = tuple(_go_float(b) for b in self._bounds)  # the "le" labels, as prometheus_client's
        super().__init__(name, documentation, labelnames, registry=registry)

    def observe(self, amount: float) -> None:
        self.labels().observe(amount)

    def _new_child(self) -> _Observations:
        return _Observations(self._bounds)

    def _family(self, children: dict[tuple[str, ...], _Observations]) -> Metric:
        family = HistogramMetricFamily(self._name, self._doc, labels=self._labelnames)
        for values, child in children.items():
            cumulative, buckets = 0, []
            for le, count in zip(self._le, child.counts, strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            family.add_metric(values, buckets, child.sum)
            labels = dict(zip(self._labelnames, values, strict=True))
            family.samples.append(Sample(self._name + "_created", labels, child.created))
        return family


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        # By channel (core.message.CHANNELS): the names are those of before channels, so that sum()
        # over them (the dashboard, the alert rules) counts every MO as it did.
        self.received = Counter(
            "mogateway_mo_accepted", "MOs accepted and stored, by channel", ["channel"], registry=r
        )
        self.rejected = Counter(
            "mogateway_mo_rejected",
            "MOs refused at intake, by field and channel",
            ["field", "channel"],
            registry=r,
        )
        self.duplicates = Counter(
            "mogateway_mo_duplicates", "MOs a source sent again, by channel", ["channel"], registry=r
        )
        for channel in CHANNELS:  # shown from the start, at 0, as the counters without labels were
            self.received.labels(channel)
            self.duplicates.labels(channel)
        self.callbacks = LoopCounter(
            "mogateway_callbacks",
            "Callback exchanges by client and outcome",
            ["client", "outcome"],
            registry=r,
        )
        self.callback_latency = LoopHistogram(
            "mogateway_callback_latency_seconds",
            "Time from the first POST to the judged answer, by client",
            ["client"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end = LoopHistogram(
            "mogateway_mo_to_reply_seconds",
            "Time from receiving an MO to handing its reply over",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.inflight = LoopGauge(
            "mogateway_callbacks_inflight", "Callbacks in flight", ["client"], registry=r
        )
        self.replies = LoopCounter(
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
        self.journal_free_bytes = Gauge(
            "mogateway_journal_free_bytes",
            "Bytes free for the SQLite journal's file system (NaN on PostgreSQL)",
            registry=r,
        )
        self.journal_write_errors = Counter(
            "mogateway_journal_write_errors",
            "Journal writes that failed, by kind (disk_full, io_error, unavailable, other)",
            ["kind"],
            registry=r,
        )
        self.ready = Gauge(
            "mogateway_ready", "1 when this process takes traffic (/readyz), else 0", registry=r
        )
        self.whatsapp_left_out = Counter(
            "mogateway_whatsapp_left_out",
            "Parts of signed WhatsApp webhooks acknowledged but not taken, by reason (body, change, number, "
            "message, status: could not be read; unknown_number, too_old, too_many)",
            ["reason"],
            registry=r,
        )
        # WhatsApp media through the gateway (api.whatsapp_media): once per fetch, so prometheus_client's.
        self.whatsapp_media_fetches = Counter(
            "mogateway_whatsapp_media_fetches",
            "WhatsApp media fetches by result (ok, expired, graph_error, graph_timeout, too_large, "
            "sha256_mismatch, short, busy, disconnected)",
            ["result"],
            registry=r,
        )
        self.whatsapp_media_bytes = Counter(
            "mogateway_whatsapp_media_bytes", "Bytes of WhatsApp media streamed to clients", registry=r
        )
        self.whatsapp_media_first_byte = Histogram(
            "mogateway_whatsapp_media_first_byte_seconds",
            "Time from a media request to its first byte (Graph's lookup and the download's start)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.whatsapp_media_seconds = Histogram(
            "mogateway_whatsapp_media_seconds",
            "Time from a media request to its last byte, for fetches that streamed",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.retention_deleted = Counter(
            "mogateway_retention_deleted",
            "Finished messages deleted by retention (message_retention_days), with their events",
            registry=r,
        )
