"""Traffic figures for ``GET /v1/stats``, the console and ``mogateway top``, at no cost to the hot path.

Rules:

* Nothing is counted twice. Intake and the dispatcher already count into prometheus
  (:mod:`mogateway.service.metrics`); a sampler reads those counters once a second and keeps only the
  differences: a per-second ring of the last ten minutes (MO in, replies out) and per-minute rollups
  of every figure (per client and outcome, callback latency histogram bins).
* Every ``flush_s`` seconds the minutes that changed are written to the journal's ``stats`` table as
  absolute totals of this node (writing a row again replaces it, so a repeated write is harmless), with
  the complete seconds that had traffic. Each node writes only its own rows; readers sum over nodes, so
  the figures hold for a cluster sharing PostgreSQL and across restarts.
* A reading is the journal (every node, up to its last flush) plus this node's difference not yet
  flushed, taken under one lock so that a flush cannot land between the two. Whole 15-minute blocks that
  no node can change any more are cached, so polling "today" every 2 s reads at most the last quarter
  hour of rows.
* Totals have a resolution of one minute (a window starts at a whole minute); the live series has one
  second. In a cluster the series ends ``flush_s`` seconds back, where every node's seconds are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
from collections import Counter, deque
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from mogateway.core.isotime import iso
from mogateway.core.message import CHANNELS
from mogateway.core.ports import NodeDirectory, StatsRow, StatsStore, WorkQueue
from mogateway.service.journal_health import JournalHealth
from mogateway.service.metrics import Metrics
from mogateway.service.readiness import readiness
from mogateway.service.registry import Registry

__all__ = [
    "OUTCOMES",
    "ClusterView",
    "StatsService",
    "WindowError",
    "parse_window",
    "percentile_ms",
]

log = logging.getLogger(__name__)

#: Outcomes as the console and the API list them (callback outcomes, then the two without a callback).
OUTCOMES = ("reply", "blank", "timeout", "http_error", "bad_response", "failed", "unroutable", "rejected")
_CALLBACK_OUTCOMES = OUTCOMES[:6]
_GLOBAL_KINDS = ("accepted", "rejected", "duplicates", "unroutable", "replies", "reply_failed")
_LATENCY = "lat:"  # kind prefix of latency histogram bins: "lat:<upper bound in s>" ("lat:+Inf")
_AT = "@"  # MOs of a channel other than SMS: "accepted@whatsapp" (_by_channel)
_CHANNEL_KINDS = ("accepted", "rejected", "duplicates")

SERIES_S = 300  # the live series: the last five minutes, per second
_RING_S = 600
_BLOCK_S = 900  # cached blocks: a quarter hour (every time zone's midnight falls on one)
_BLOCK_GRACE_S = 300  # a block is final this long after it ends (every node has flushed it)
_SECONDS_KEPT_S = 900
_MEMO_S = 0.5  # readings of one window within this time are one computation
_BIND_RING_S = 62

Key = tuple[str, str]  # (client, kind)


class WindowError(ValueError):
    """A ``window`` the stats cannot cover (the message says what is allowed)."""


_DURATION = re.compile(r"\A(\d{1,6})([smhd])\Z")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(window: str, now: float, max_days: int) -> tuple[int, int]:
    """(since, until) in unix seconds, whole minutes, for ``today`` or a duration such as ``5m``, ``1h``."""
    until = int(now) // 60 * 60 + 60
    if window == "today":
        midnight = datetime.fromtimestamp(now).astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        return int(midnight.timestamp()) // 60 * 60, until
    match = _DURATION.match(window)
    if match is None:
        raise WindowError("window: 'today' or a duration like 90s, 5m, 1h, 2d")
    seconds = int(match[1]) * _UNIT_S[match[2]]
    if not 60 <= seconds <= max_days * 86400:
        raise WindowError(f"window: from 1m to {max_days}d")
    return until - math.ceil(seconds / 60) * 60, until


def percentile_ms(bins: dict[str, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a latency histogram, in ms, interpolated inside its bucket the way
    prometheus' ``histogram_quantile`` does; None without observations. Past the last finite bound the
    answer is that bound."""
    bounds = sorted(((math.inf if le == "+Inf" else float(le)), n) for le, n in bins.items() if n > 0)
    total = sum(n for _, n in bounds)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    lower = 0.0
    finite = [b for b, _ in bounds if b != math.inf]
    for upper, n in bounds:
        if seen + n >= rank:
            if upper == math.inf:
                return round((max(finite) if finite else lower) * 1000, 1)
            return round((lower + (upper - lower) * (rank - seen) / n) * 1000, 1)
        seen += n
        lower = upper
    return round(lower * 1000, 1)


def _latency(bins: dict[str, int]) -> dict[str, float | None]:
    return {
        "p50": percentile_ms(bins, 0.5),
        "p90": percentile_ms(bins, 0.9),
        "p99": percentile_ms(bins, 0.99),
    }


def _samples(metric: Any, suffix: str) -> Iterable[Any]:
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith(suffix):
                yield sample


def _by_channel(out: dict[Key, float], kind: str, metric: Any) -> None:
    """Add a counter of MOs by channel to ``out``: all channels as ``kind``, and each channel other
    than SMS as ``kind@channel`` too. SMS is what is left, so that minutes written before MOs were
    counted by channel still add up."""
    out[("", kind)] = out.get(("", kind), 0.0)
    for sample in _samples(metric, "_total"):
        out[("", kind)] += sample.value
        channel = sample.labels.get("channel", "sms")
        if channel != "sms":
            key = ("", f"{kind}{_AT}{channel}")
            out[key] = out.get(key, 0.0) + sample.value


def read_counters(metrics: Any) -> dict[Key, float]:
    """The gateway's counters now, as (client, kind) -> cumulative value."""
    out: dict[Key, float] = {}
    _by_channel(out, "accepted", metrics.received)
    _by_channel(out, "duplicates", metrics.duplicates)
    _by_channel(out, "rejected", metrics.rejected)
    for sample in _samples(metrics.unroutable, "_total"):
        out[("", "unroutable")] = sample.value
    for sample in _samples(metrics.replies, "_total"):
        kind = "replies" if sample.labels.get("result") == "submitted" else "reply_failed"
        out[("", kind)] = out.get(("", kind), 0.0) + sample.value
    for sample in _samples(metrics.callbacks, "_total"):
        out[(sample.labels["client"], sample.labels["outcome"])] = sample.value
    # Buckets are cumulative; the rollups keep each bucket's own count so that they add up over time.
    below: dict[str, float] = {}
    for sample in _samples(metrics.callback_latency, "_bucket"):
        client = sample.labels["client"]
        out[(client, _LATENCY + sample.labels["le"])] = sample.value - below.get(client, 0.0)
        below[client] = sample.value
    return out


class BindsView(Protocol):
    def status(self) -> list[dict[str, Any]]: ...


class LanesView(Protocol):
    def inflight(self) -> dict[str, int]: ...

    def waiting(self) -> int: ...


class ClusterView(Protocol):
    """This node's place among the nodes, as the figures and ``GET /v1/nodes`` (``gateway_view``) read it."""

    @property
    def name(self) -> str: ...

    @property
    def directory(self) -> NodeDirectory: ...


class GatewayView(Protocol):
    """What the figures read of a running gateway (``mogateway.node.Gateway`` has it)."""

    @property
    def metrics(self) -> Metrics: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def queue(self) -> WorkQueue: ...

    @property
    def smpp(self) -> BindsView | None: ...

    @property
    def dispatcher(self) -> LanesView | None: ...

    @property
    def cluster(self) -> ClusterView | None: ...


class StatsService:
    """The sampler (a task of the gateway) and the readings made from it and the journal."""

    def __init__(
        self,
        gateway: GatewayView,
        journal: StatsStore,
        node: str,
        *,
        flush_s: float,
        retention_days: int,
        shared: bool,
        health: JournalHealth | None = None,
    ) -> None:
        self._gateway = gateway
        self._health = health  # the flushes tell the journal's health how writes go, traffic or not
        self.node = node
        self.flush_s = flush_s
        self.retention_days = retention_days
        self.shared = shared  # other nodes write to the same journal
        self._journal = journal
        self._prev: dict[Key, float] = {}
        self._minutes: dict[int, Counter[Key]] = {}
        self._flushed: dict[int, dict[Key, int]] = {}
        self._seconds: deque[tuple[int, int, int]] = deque(maxlen=_RING_S)
        self._flushed_second = 0
        self._binds: dict[str, deque[tuple[float, int, int]]] = {}
        self._blocks: dict[int, Counter[Key]] = {}
        self._lock = asyncio.Lock()
        self._memo: dict[str, tuple[float, dict[str, Any]]] = {}
        self._last_forget = 0.0
        self._write_failing = False
        self.started_at = time.time()

    # ------------------------------------------------------------------ sampling

    async def seed(self) -> None:
        """Take over this node's rows of the last two minutes (a restart within a minute must add to
        them, not replace them)."""
        minute = int(time.time()) // 60 * 60
        for at in (minute - 60, minute):
            rows = await self._journal.read_stats(60, at, at + 60, node=self.node)
            if rows:
                self._minutes[at] = Counter({(r.client, r.kind): r.count for r in rows})
                self._flushed[at] = {(r.client, r.kind): r.count for r in rows}

    def sample(self, now: float) -> None:
        """Add what the counters moved since the last sample to the second and the minute just ended."""
        current = read_counters(self._gateway.metrics)
        second = int(now) - 1
        minute = second // 60 * 60
        rollup = self._minutes.get(minute)
        if rollup is None:
            rollup = self._minutes[minute] = Counter()
        prev = self._prev
        for key, value in current.items():
            moved = int(value - prev.get(key, 0.0))
            if moved > 0:
                rollup[key] += moved
        self._prev = current
        mo_in = int(
            current.get(("", "accepted"), 0)
            - prev.get(("", "accepted"), 0)
            + current.get(("", "rejected"), 0)
            - prev.get(("", "rejected"), 0)
        )
        replies = int(current.get(("", "replies"), 0) - prev.get(("", "replies"), 0))
        self._seconds.append((second, max(0, mo_in), max(0, replies)))
        self._sample_binds(now)

    def _sample_binds(self, now: float) -> None:
        smpp = self._gateway.smpp
        if smpp is None:
            return
        for row in smpp.status():
            counters = row["counters"]
            mos = int(counters.get("mo_stored", 0)) + int(counters.get("mo_rejected", 0))
            ring = self._binds.get(row["name"])
            if ring is None:
                ring = self._binds[row["name"]] = deque(maxlen=_BIND_RING_S)
            ring.append((now, mos, int(counters.get("submit_sm", 0))))

    async def flush(self) -> None:
        """Write the minutes that changed and the new complete seconds; forget what is too old."""
        now = time.time()
        rows: list[StatsRow] = []
        for minute, values in self._minutes.items():
            written = self._flushed.get(minute, {})
            rows.extend(
                StatsRow(60, minute, self.node, client, kind, n)
                for (client, kind), n in values.items()
                if written.get((client, kind)) != n
            )
        last_complete = int(now) - 1
        seconds = [s for s in self._seconds if self._flushed_second < s[0] <= last_complete]
        for second, mo_in, replies in seconds:
            if mo_in:
                rows.append(StatsRow(1, second, self.node, "", "mo_in", mo_in))
            if replies:
                rows.append(StatsRow(1, second, self.node, "", "replies", replies))
        forget: dict[int, int] | None = None
        if now - self._last_forget > 60:
            forget = {1: int(now) - _SECONDS_KEPT_S, 60: int(now) - self.retention_days * 86400}
        if not rows and forget is None:
            return
        async with self._lock:
            try:
                await self._journal.write_stats(rows, forget)
            except Exception as exc:  # the figures wait in memory for the next flush
                if self._health is not None:
                    self._health.failed(exc, "the traffic figures wait in memory for the next flush")
                if not self._write_failing:
                    log.warning("stats: could not write to the journal: %s: %s", type(exc).__name__, exc)
                self._write_failing = True
                return
            self._write_failing = False
            if self._health is not None:
                self._health.worked()
            if forget is not None:
                self._last_forget = now
            for r in rows:
                if r.span == 60:
                    self._flushed.setdefault(r.at, {})[(r.client, r.kind)] = r.count
                    self._blocks.pop(r.at // _BLOCK_S * _BLOCK_S, None)  # a late write to a cached block
            if seconds:
                self._flushed_second = seconds[-1][0]
        # Minutes before the last one that are written in full are not needed in memory any more.
        keep_from = int(now) // 60 * 60 - 60
        for minute in [m for m in self._minutes if m < keep_from]:
            if all(self._flushed.get(minute, {}).get(k) == n for k, n in self._minutes[minute].items()):
                del self._minutes[minute]
                self._flushed.pop(minute, None)

    async def run_forever(self) -> None:
        """Sample every second (just after it ends), flush every ``flush_s``; flush once more when
        cancelled, so a graceful stop loses nothing."""
        next_flush = time.monotonic() + self.flush_s
        try:
            while True:
                await asyncio.sleep(1.0 - (time.time() % 1.0) + 0.005)
                try:
                    self.sample(time.time())
                    if time.monotonic() >= next_flush:
                        next_flush = time.monotonic() + self.flush_s
                        await self.flush()
                except Exception:  # figures must never take the gateway down
                    log.exception("stats sampler failed")
        finally:
            with contextlib.suppress(Exception):
                self.sample(time.time() + 1)
                await asyncio.shield(self.flush())

    # ------------------------------------------------------------------ readings

    async def _totals(self, since: int, until: int, now: float) -> Counter[Key]:
        """Every node's counts for minutes in [since, until), as the journal has them now, plus this
        node's difference not yet flushed. Call with the lock held."""
        totals: Counter[Key] = Counter()
        final_until = (int(now) - _BLOCK_GRACE_S) // _BLOCK_S * _BLOCK_S
        first_block = -(-since // _BLOCK_S) * _BLOCK_S
        cursor = since
        if first_block + _BLOCK_S <= min(final_until, until):
            if cursor < first_block:
                totals.update(await self._read_range(cursor, first_block))
            block = first_block
            while block + _BLOCK_S <= min(final_until, until):
                cached = self._blocks.get(block)
                if cached is None:
                    cached = self._blocks[block] = await self._read_range(block, block + _BLOCK_S)
                totals.update(cached)
                block += _BLOCK_S
            cursor = block
        if cursor < until:
            totals.update(await self._read_range(cursor, until))
        for minute, values in self._minutes.items():
            if since <= minute < until:
                written = self._flushed.get(minute, {})
                for key, n in values.items():
                    moved = n - written.get(key, 0)
                    if moved:
                        totals[key] += moved
        oldest = int(now) - self.retention_days * 86400 - _BLOCK_S
        for block in [b for b in self._blocks if b < oldest]:
            del self._blocks[block]
        return totals

    async def _read_range(self, since: int, until: int) -> Counter[Key]:
        rows = await self._journal.read_stats(60, since, until)
        return Counter({(r.client, r.kind): r.count for r in rows})

    async def _series(self, now: float) -> dict[str, Any]:
        end = int(now) - (int(self.flush_s) + 1 if self.shared else 1)  # the last second shown
        start = end - SERIES_S + 1
        mo_in = [0] * SERIES_S
        replies = [0] * SERIES_S
        for second, m, r in self._seconds:
            if start <= second <= end:
                mo_in[second - start] += m
                replies[second - start] += r
        if self.shared:
            for row in await self._journal.read_stats(
                1, start, end + 1, exclude_node=self.node, by_time=True
            ):
                target = mo_in if row.kind == "mo_in" else replies
                target[row.at - start] += row.count
        return {"step_s": 1, "start": iso(start), "end": iso(end + 1), "mo_in": mo_in, "replies": replies}

    async def snapshot(self, window: str = "1h") -> dict[str, Any]:
        """The document of ``GET /v1/stats?window=...`` (raises :class:`WindowError`)."""
        now = time.time()
        memo = self._memo.get(window)
        if memo is not None and now - memo[0] < _MEMO_S:
            return memo[1]
        since, until = parse_window(window, now, self.retention_days)
        async with self._lock:
            totals = await self._totals(since, until, now)
            series = await self._series(now)
        doc = {
            "node": self.node,
            "generated_at": iso(now),
            "window": {"name": window, "since": iso(since), "until": iso(min(until, now))},
            "totals": self._totals_json(totals),
            "clients": self._clients_json(totals),
            "series": series,
            "rates": self._rates(series),
            **(await self.live()),
        }
        self._memo[window] = (now, doc)
        return doc

    @staticmethod
    def _totals_json(totals: Counter[Key]) -> dict[str, Any]:
        outcomes = dict.fromkeys(OUTCOMES, 0)
        bins: Counter[str] = Counter()
        for (client, kind), n in totals.items():
            if client and kind in outcomes:
                outcomes[kind] += n
            elif client and kind.startswith(_LATENCY):
                bins[kind[len(_LATENCY) :]] += n
        outcomes["unroutable"] = totals[("", "unroutable")]
        outcomes["rejected"] = totals[("", "rejected")]
        g = {kind: totals[("", kind)] for kind in _GLOBAL_KINDS}
        others = {
            c: {k: totals[("", f"{k}{_AT}{c}")] for k in _CHANNEL_KINDS} for c in CHANNELS if c != "sms"
        }
        sms = {k: g[k] - sum(c[k] for c in others.values()) for k in _CHANNEL_KINDS}  # the rest
        channels = {"sms": sms, **others}
        return {
            "mo_in": g["accepted"] + g["rejected"],
            **g,
            "channels": {name: {"mo_in": c["accepted"] + c["rejected"], **c} for name, c in channels.items()},
            "callbacks": sum(outcomes[k] for k in _CALLBACK_OUTCOMES),
            "outcomes": outcomes,
            "latency_ms": _latency(bins),
        }

    def _clients_json(self, totals: Counter[Key]) -> list[dict[str, Any]]:
        per: dict[str, dict[str, Any]] = {}
        registry = self._gateway.registry
        for known in registry.all():
            per[known.id] = {"outcomes": dict.fromkeys(_CALLBACK_OUTCOMES, 0), "bins": Counter()}
        for (client_id, kind), n in totals.items():
            if not client_id:
                continue
            entry = per.setdefault(
                client_id, {"outcomes": dict.fromkeys(_CALLBACK_OUTCOMES, 0), "bins": Counter()}
            )
            if kind.startswith(_LATENCY):
                entry["bins"][kind[len(_LATENCY) :]] += n
            elif kind in entry["outcomes"]:
                entry["outcomes"][kind] += n
        out = []
        for client_id, entry in per.items():
            record = registry.get(client_id)
            callbacks = sum(entry["outcomes"].values())
            out.append(
                {
                    "id": client_id,
                    "name": record.name if record is not None else None,
                    "callbacks": callbacks,
                    "outcomes": entry["outcomes"],
                    "reply_rate": round(entry["outcomes"]["reply"] / callbacks, 4) if callbacks else None,
                    "timeouts": entry["outcomes"]["timeout"],
                    "latency_ms": _latency(entry["bins"]),
                }
            )
        out.sort(key=lambda c: (-c["callbacks"], c["name"] or "", c["id"]))
        return out

    @staticmethod
    def _rates(series: dict[str, Any]) -> dict[str, float]:
        """Per second over the last 10 seconds of the series."""
        return {
            "mo_in_per_s": round(sum(series["mo_in"][-10:]) / 10, 1),
            "replies_per_s": round(sum(series["replies"][-10:]) / 10, 1),
        }

    async def live(self) -> dict[str, Any]:
        """What is true now, not over a window: readiness (``service.readiness``), queue lag, callbacks
        in flight, binds, nodes."""
        g = self._gateway
        dispatcher = g.dispatcher
        inflight = sum(dispatcher.inflight().values()) if dispatcher is not None else 0
        binds = self.binds()
        nodes: list[dict[str, Any]] = []
        cluster = g.cluster
        if cluster is not None:
            with contextlib.suppress(Exception):  # a NATS hiccup must not fail the figures
                for node in await cluster.directory.nodes():
                    up = sum(1 for b in node.binds if b.get("state") == "bound")
                    nodes.append(
                        {
                            "name": node.name,
                            "self": node.name == cluster.name,
                            "version": node.version,
                            "started_at": iso(node.started_at),
                            "seen_at": iso(node.seen_at),
                            "queue_lag": node.queue_lag + node.waiting,
                            "binds_up": up,
                            "binds_down": len(node.binds) - up,
                        }
                    )
                    if node.name != cluster.name:
                        binds.extend(
                            {
                                "name": b["name"],
                                "node": node.name,
                                "state": b.get("state", ""),
                                "local": False,
                            }
                            for b in node.binds
                        )
        up = sum(1 for b in binds if b["state"] == "bound")
        # Readiness of the process that answers (/readyz): each worker answers for itself.
        smpp = g.smpp
        reasons = readiness(self._health, smpp.status() if smpp else None) if self._health else []
        return {
            "ready": not reasons,
            "not_ready": [reason.as_json() for reason in reasons],
            "queue_lag": g.queue.lag() + (dispatcher.waiting() if dispatcher is not None else 0),
            "inflight": inflight,
            "binds_summary": {"up": up, "down": len(binds) - up},
            "binds": binds,
            "nodes": nodes,
        }

    def binds(self) -> list[dict[str, Any]]:
        """This node's binds: their status and what they carried in the last minute."""
        smpp = self._gateway.smpp
        if smpp is None:
            return []
        now = time.time()
        out = []
        for row in smpp.status():
            ring = self._binds.get(row["name"], deque())
            counters = row["counters"]
            mos = int(counters.get("mo_stored", 0)) + int(counters.get("mo_rejected", 0))
            submits = int(counters.get("submit_sm", 0))
            minute_ago = next((s for s in ring if s[0] >= now - 60.5), None)
            recent = next((s for s in ring if s[0] >= now - 10.5), None)

            def rate(base: tuple[float, int, int] | None, index: int, value: int) -> float:
                if base is None or now - base[0] < 1:
                    return 0.0
                return round((value - base[index]) / (now - base[0]), 1)

            out.append(
                {
                    "name": row["name"],
                    "node": self.node,
                    "local": True,
                    "state": row["state"],
                    "state_since": iso(row.get("state_since")),
                    "connected_since": iso(row.get("connected_since")),
                    "host": row["host"],
                    "port": row["port"],
                    "mode": row["mode"],
                    "operator": row.get("operator", ""),
                    "in_flight": row["in_flight"],
                    "window": row.get("window"),
                    "max_per_s": row.get("throughput"),
                    "mo_per_s": rate(recent, 1, mos),
                    "replies_per_s": rate(recent, 2, submits),
                    "mo_last_minute": mos - minute_ago[1] if minute_ago else 0,
                    "replies_last_minute": submits - minute_ago[2] if minute_ago else 0,
                    "connects": counters.get("connects", 0),
                    "last_error": row.get("last_error") or row.get("last_failure") or None,
                    "last_error_at": iso(row.get("last_error_at")),
                }
            )
        return out
