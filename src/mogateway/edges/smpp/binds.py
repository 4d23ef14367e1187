"""The running binds of one gateway node (``bind.py`` is one of them): one :class:`EsmeBind` per
configured bind, started together, a reply channel over them, their state for ``GET /v1/binds`` and
their counters for /metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from mogateway.config.smpp import SmppSettings
from mogateway.core.ports import ReceiptStore
from mogateway.edges.smpp.bind import EsmeBind
from mogateway.edges.smpp.inbound import InboundHandler, IntakeLike
from mogateway.edges.smpp.replies import SmppReplyChannel

__all__ = ["SmppBinds", "start_binds"]

log = logging.getLogger("mogateway.smpp")


class SmppBinds:
    """The running binds of one gateway."""

    def __init__(self, binds: dict[str, EsmeBind], handlers: dict[str, InboundHandler]) -> None:
        self.binds = binds
        self.handlers = handlers
        self.reply_channel = SmppReplyChannel(binds)

    def start(self) -> None:
        for bind in self.binds.values():
            bind.start()

    async def stop(self) -> None:
        """Unbind every bind (concurrently) and stop their tasks."""
        await asyncio.gather(*(b.stop() for b in self.binds.values()), return_exceptions=True)
        await asyncio.gather(*(h.close() for h in self.handlers.values()), return_exceptions=True)

    def heartbeat_binds(self) -> list[dict[str, Any]]:
        """The binds as a node's heartbeat lists them: name, operator, state, whether it can transmit."""
        return [
            {
                "name": name,
                "operator": bind.config.operator,
                "state": str(bind.state),
                "transmit": bind.can_transmit,
            }
            for name, bind in self.binds.items()
        ]

    def status(self) -> list[dict[str, Any]]:
        """Per bind: name, state, host, port, mode, connected_since, counters (MO counters included)."""
        out = []
        for name, bind in self.binds.items():
            row = bind.status()
            counters = dict(row["counters"])  # type: ignore[call-overload]
            counters.update(self.handlers[name].counters)
            row["counters"] = counters
            out.append(row)
        return out


class _BindCollector(Collector):
    """Reads the binds' state at scrape time (no second bookkeeping to drift)."""

    def __init__(self, binds: SmppBinds) -> None:
        self._binds = binds

    def collect(self) -> Iterator[Metric]:
        bound = GaugeMetricFamily("mogateway_smpp_bind_up", "1 when the bind is bound", labels=["bind"])
        inflight = GaugeMetricFamily(
            "mogateway_smpp_bind_in_flight", "requests awaiting a response", labels=["bind"]
        )
        counters: dict[str, CounterMetricFamily] = {}
        for row in self._binds.status():
            name = str(row["name"])
            bound.add_metric([name], 1.0 if row["state"] == "bound" else 0.0)
            inflight.add_metric([name], float(row["in_flight"]))
            for key, value in row["counters"].items():
                family = counters.get(key)
                if family is None:
                    family = counters[key] = CounterMetricFamily(
                        f"mogateway_smpp_{key}", f"SMPP {key.replace('_', ' ')} per bind", labels=["bind"]
                    )
                family.add_metric([name], float(value))
        yield bound
        yield inflight
        yield from counters.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())


async def start_binds(
    settings: SmppSettings,
    *,
    intake: IntakeLike,
    receipts: ReceiptStore,
    metrics: CollectorRegistry | None = None,
) -> SmppBinds:
    """Create and start every configured bind, without waiting for any to connect: binds connect in the
    background, and one that cannot keeps retrying without holding up the gateway or the other binds."""
    binds: dict[str, EsmeBind] = {}
    handlers: dict[str, InboundHandler] = {}
    for config in settings.binds:
        handler = InboundHandler(config, intake, receipts)
        handlers[config.name] = handler
        binds[config.name] = EsmeBind(config, handler)
    running = SmppBinds(binds, handlers)
    if metrics is not None:
        metrics.register(_BindCollector(running))
    running.start()
    return running
