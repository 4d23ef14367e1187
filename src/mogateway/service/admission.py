"""Admission control: refuse new work while this worker already holds more than it can answer soon.

Rules stated before the code (issue 38):

* A source that delivers again by itself is better refused early than accepted and failed late. Meta
  delivers a webhook again, for days, whenever it is not answered 200; a message accepted and then
  stuck behind a backlog gets its reply so late that the Graph send times out and ends "possibly sent"
  (``reply_unknown``): the person gets no answer because the gateway was busy. So while a worker holds
  more than ``bound`` messages accepted and not answered yet, a new webhook is answered 503 (nothing
  read, nothing stored) and Meta delivers it again later.
* What a worker holds is its own count, cheap to read on every request: MOs queued for dispatch here
  (``WorkQueue.lag`` and the dispatcher's lanes), callbacks in flight, and replies being sent or
  waiting to be retried. With several workers each decides for itself; the messages spread evenly over
  them (their owners are a hash of the message id), so each worker's backlog is its share of the whole.
* The bound should be seconds of a worker's work, not less: a refused source delivers again only after
  its own backoff, and a backlog that drains before the retries come back leaves the worker idle
  (``docs/benchmarks.md`` §6.1 measured a bound of 1,000 doing less at 5× offered than none).
* ``bound`` 0 admits everything (the behaviour before). Refusals are counted in
  ``mogateway_admission_refused_total{source}``, the held count is ``mogateway_admission_held``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import Gauge

from mogateway.service.metrics import LoopCounter, Metrics

__all__ = ["Admission"]


class Admission:
    """``admits()`` is False while the worker holds more than ``bound`` messages (``held()``)."""

    def __init__(self, bound: int, held: Callable[[], int], metrics: Metrics | None = None) -> None:
        if bound < 0:
            raise ValueError("bound must be 0 (off) or positive")
        self.bound = bound
        self._held = held
        self._refused: dict[str, Any] = {}
        self._counter: LoopCounter | None = None
        if metrics is not None:
            self._counter = LoopCounter(
                "mogateway_admission_refused",
                "Deliveries refused because this worker held too many unanswered messages, by source",
                ["source"],
                registry=metrics.registry,
            )
            gauge = Gauge(
                "mogateway_admission_held",
                "Messages this worker holds: queued for dispatch, in a callback, or in a reply",
                registry=metrics.registry,
            )
            gauge.set_function(lambda: float(self._held()))
        self.refusals = 0

    def held(self) -> int:
        return self._held()

    def admits(self, source: str) -> bool:
        """Whether a delivery from ``source`` ("whatsapp") may be taken now; a refusal is counted."""
        if self.bound == 0 or self._held() <= self.bound:
            return True
        self.refusals += 1
        if self._counter is not None:
            child = self._refused.get(source)
            if child is None:
                child = self._refused[source] = self._counter.labels(source)
            child.inc()
        return False
