"""The dispatcher: from the work queue to the client application's callback, and the reply back out.

Each client has a lane: a queue of its MOs served by at most ``max_concurrency`` tasks, created when
work arrives and gone when the lane is empty. A slow application therefore only ever occupies its own
lane; a global semaphore caps the callbacks in flight across all lanes.

For every MO the outcome is recorded in the journal *before* a reply is handed to a channel, with a
compare-and-set on the state, so an MO whose outcome is already recorded (by this node before a crash,
or by another node) is never called again, and a reply is sent at most once per recorded answer.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from datetime import UTC, datetime
from typing import Any

from mogateway import __version__
from mogateway.core.contract import InboundMO, Outcome, OutcomeKind, Sender, callback_body, callback_headers
from mogateway.core.text import count_parts, fit_parts
from mogateway.core.timeline import FINAL_STATES, EventKind, State, state_for_outcome
from mogateway.queue.base import Delivery, QueuedMO, WorkQueue
from mogateway.service.caller import exchange
from mogateway.service.http1 import Http1Client
from mogateway.service.metrics import Metrics
from mogateway.service.registry import Registry, first_word
from mogateway.service.replies import Reply, ReplyError, ReplyRouter
from mogateway.storage.journal import Change, ClientRecord, Event, Journal

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

_PENDING = frozenset({State.QUEUED, State.DISPATCHING})
_ANSWERED = frozenset({State.ANSWERED})
_REPLY_TRIES = 5
_REPLY_FIRST_BACKOFF_S = 1.0


class _Lane:
    """The MOs waiting for one client, and how many tasks are serving them."""

    __slots__ = ("client_id", "items", "workers")

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.items: collections.deque[Delivery] = collections.deque()
        self.workers = 0


class Dispatcher:
    def __init__(
        self,
        *,
        queue: WorkQueue,
        journal: Journal,
        registry: Registry,
        replies: ReplyRouter,
        client: Http1Client,
        metrics: Metrics,
        max_inflight: int = 1000,
        reply_max_parts: int = 6,
        allow_private: bool = False,
    ) -> None:
        self._queue = queue
        self._journal = journal
        self._registry = registry
        self._replies = replies
        self._http = client
        self._metrics = metrics
        self._global = asyncio.Semaphore(max_inflight)
        self._reply_max_parts = reply_max_parts
        self._allow_private = allow_private
        self._lanes: dict[str, _Lane] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._user_agent_version = __version__
        self._stopping = False
        # prometheus children by label, looked up once (labels() costs more than inc()).
        self._per_client: dict[str, tuple[Any, Any]] = {}
        self._outcome_counters: dict[tuple[str, OutcomeKind], Any] = {}
        self._reply_counters: dict[tuple[str, str], Any] = {}

    def _reply_counter(self, channel: str, result: str) -> Any:
        found = self._reply_counters.get((channel, result))
        if found is None:
            found = self._reply_counters[(channel, result)] = self._metrics.replies.labels(channel, result)
        return found

    def _client_metrics(self, client_id: str) -> tuple[Any, Any]:
        found = self._per_client.get(client_id)
        if found is None:
            found = self._per_client[client_id] = (
                self._metrics.inflight.labels(client_id),
                self._metrics.callback_latency.labels(client_id),
            )
        return found

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._runner = asyncio.create_task(self._pull_forever(), name="dispatcher")

    async def stop(self, drain_s: float = 5.0) -> None:
        """Stop taking work; let callbacks in flight finish for up to ``drain_s``, then cancel them.

        Whatever is cancelled or was still waiting stays unfinished in the journal and is dispatched
        again at the next start (or by another node), so stopping never loses an MO.
        """
        self._stopping = True
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        for lane in self._lanes.values():
            lane.items.clear()
        if self._tasks and drain_s > 0:
            await asyncio.wait(list(self._tasks), timeout=drain_s)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def inflight(self) -> dict[str, int]:
        return {lane.client_id: lane.workers for lane in self._lanes.values() if lane.workers}

    def waiting(self) -> int:
        return sum(len(lane.items) for lane in self._lanes.values())

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pull_forever(self) -> None:
        get = self._queue.get
        while True:
            delivery = await get()
            try:
                if delivery.redelivered:
                    self._spawn(self._resume(delivery), "resume")
                else:
                    self._route(delivery)
            except Exception:  # never let one bad item stop the dispatcher
                log.exception("could not route %s", delivery.item.id)

    # ------------------------------------------------------------------ routing

    def _route(self, delivery: Delivery) -> None:
        item = delivery.item
        client = self._registry.route(item.shortcode, item.message)
        if client is None:
            self._spawn(self._unroutable(delivery), "unroutable")
            return
        lane = self._lanes.get(client.id)
        if lane is None:
            lane = self._lanes[client.id] = _Lane(client.id)
        lane.items.append(delivery)
        if lane.workers < max(1, client.max_concurrency):
            lane.workers += 1
            self._spawn(self._serve_lane(lane), f"lane:{client.id}")

    async def _serve_lane(self, lane: _Lane) -> None:
        try:
            while lane.items and not self._stopping:
                delivery = lane.items.popleft()
                client = self._registry.get(lane.client_id)
                if client is None:  # removed while its MOs waited: route them again
                    self._route(delivery)
                    continue
                try:
                    await self._dispatch(delivery, client)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.exception("dispatch of %s failed", delivery.item.id)
                    await self._record_internal_error(delivery, exc)
        finally:
            lane.workers -= 1
            if not lane.items and lane.workers == 0:
                self._lanes.pop(lane.client_id, None)

    async def _record_internal_error(self, delivery: Delivery, exc: Exception) -> None:
        """A bug must not leave an MO silently queued: record it as failed (it can be replayed)."""
        detail = f"gateway error: {type(exc).__name__}: {exc}"[:300]
        event = Event(EventKind.OUTCOME, time.time(), {"outcome": OutcomeKind.FAILED.value, "detail": detail})
        try:
            await self._journal.apply([Change(delivery.item.id, [event], State.FAILED, expect=_PENDING)])
            await delivery.ack()
        except Exception:
            log.exception("could not record the failure of %s; it stays unfinished", delivery.item.id)

    async def _unroutable(self, delivery: Delivery) -> None:
        item = delivery.item
        keyword = first_word(item.message)
        detail = f"no client for shortcode {item.shortcode}" + (
            f" and keyword {keyword!r}" if keyword else ""
        )
        event = Event(
            EventKind.OUTCOME, time.time(), {"outcome": OutcomeKind.UNROUTABLE.value, "detail": detail}
        )
        await self._journal.apply([Change(item.id, [event], State.UNROUTABLE, expect=_PENDING)])
        self._metrics.unroutable.inc()
        await delivery.ack()

    async def _resume(self, delivery: Delivery) -> None:
        """A redelivered MO: look at the journal first, then do only what is left."""
        item = delivery.item
        record = await self._journal.get(item.id)
        if record is None:
            log.warning("queued message %s is not in the journal; dropping the queue entry", item.id)
            await delivery.ack()
            return
        if record.state in FINAL_STATES:
            await delivery.ack()
            return
        if record.state is State.ANSWERED and record.reply_text is not None:
            await self._journal.apply(
                [Change(item.id, [Event(EventKind.RECOVERED, time.time(), {"resume": "reply"})])]
            )
            await self._send_reply(item, record.reply_text)
            await delivery.ack()
            return
        await self._journal.apply(
            [Change(item.id, [Event(EventKind.RECOVERED, time.time(), {"resume": "dispatch"})])]
        )
        self._route(_Fresh(delivery))

    # ------------------------------------------------------------------ one callback

    async def _dispatch(self, delivery: Delivery, client: ClientRecord) -> None:
        item = delivery.item
        metrics = self._metrics
        mo = InboundMO(
            shortcode=item.shortcode,
            msisdn=item.msisdn,
            message=item.message,
            sender=Sender(item.cc, item.ndc, item.sn, item.operator, item.circle),
            received_at=datetime.fromtimestamp(item.received_at, UTC),
        )
        body = callback_body(mo, "s" if client.tsunix_unit == "s" else "ms")
        headers = callback_headers(client.token, item.id, self._user_agent_version)
        routed_at = time.time()
        gauge, latency = self._client_metrics(client.id)
        async with self._global:
            gauge.inc()
            try:
                ex = await exchange(
                    self._http,
                    client.callback_url,
                    body,
                    headers,
                    deadline_s=client.timeout_s,
                    unescape_newlines=client.unescape_newlines,
                    allow_private=self._allow_private,
                )
            finally:
                gauge.dec()
        outcome = ex.outcome
        counter = self._outcome_counters.get((client.id, outcome.kind))
        if counter is None:
            counter = self._outcome_counters[(client.id, outcome.kind)] = metrics.callbacks.labels(
                client.id, outcome.kind.value
            )
        counter.inc()
        latency.observe(ex.elapsed_ms / 1000.0)

        # One journal row for the whole exchange (routed, attempts, outcome): the API spreads it out.
        attempts: list[dict[str, Any]] = []
        for number, attempt in enumerate(ex.attempts, 1):
            data: dict[str, Any] = {
                "n": number,
                "at": routed_at + attempt.started_ms / 1000.0,
                "elapsed_ms": round(attempt.elapsed_ms, 1),
            }
            if attempt.status is not None:
                data["status"] = attempt.status
            if attempt.error:
                data["error"] = attempt.error
            attempts.append(data)
        reply_text, outcome_data = self._outcome_data(outcome, ex.elapsed_ms)
        outcome_data.update(routed_at=routed_at, client_id=client.id, client=client.name, attempts=attempts)
        events = [Event(EventKind.OUTCOME, time.time(), outcome_data)]

        (applied,) = await self._journal.apply(
            [
                Change(
                    item.id,
                    events,
                    state_for_outcome(outcome.kind),
                    expect=_PENDING,
                    client_id=client.id,
                    reply_text=reply_text,
                )
            ]
        )
        if applied and reply_text is not None:
            await self._send_reply(item, reply_text)
        await delivery.ack()

    def _outcome_data(self, outcome: Outcome, elapsed_ms: float) -> tuple[str | None, dict[str, Any]]:
        data: dict[str, Any] = {"outcome": outcome.kind.value, "elapsed_ms": round(elapsed_ms, 1)}
        if outcome.status is not None:
            data["status"] = outcome.status
        if outcome.detail:
            data["detail"] = outcome.detail
        if outcome.reply is None:
            return None, data
        text, truncated = fit_parts(outcome.reply, self._reply_max_parts)
        parts = count_parts(text)
        data.update(reply=text, parts=parts.parts, encoding=parts.encoding)
        if truncated:
            data["truncated_from_chars"] = len(outcome.reply)
            self._metrics.reply_truncated.inc()
        return text, data

    # ------------------------------------------------------------------ the reply

    async def _send_reply(self, item: QueuedMO, text: str) -> None:
        channel = self._replies.channel_for(item.origin)
        reply = Reply(item.id, item.shortcode, item.msisdn, text, item.origin, item.operator)
        backoff = _REPLY_FIRST_BACKOFF_S
        error: ReplyError | None = None
        for attempt in range(1, _REPLY_TRIES + 1):
            try:
                submitted = await channel.send(reply)
            except ReplyError as exc:
                error = exc
                if not exc.retryable or attempt == _REPLY_TRIES:
                    break
                await asyncio.sleep(backoff)
                backoff *= 2
                continue
            except Exception as exc:  # a channel bug must not lose the record of the failure
                log.exception("reply channel %s failed", channel.name)
                error = ReplyError(f"{type(exc).__name__}: {exc}")
                break
            event = Event(
                EventKind.REPLY_SUBMITTED,
                time.time(),
                {
                    "channel": submitted.channel,
                    "parts": submitted.parts,
                    "refs": list(submitted.refs),
                    "detail": submitted.detail,
                    "tries": attempt,
                },
            )
            await self._journal.apply(
                [Change(item.id, [event], State.REPLIED, expect=_ANSWERED, reply_refs=submitted.refs)]
            )
            self._reply_counter(channel.name, "submitted").inc()
            self._metrics.end_to_end.observe(max(0.0, time.time() - item.received_at))
            return
        assert error is not None
        event = Event(EventKind.REPLY_FAILED, time.time(), {"channel": channel.name, "detail": error.detail})
        await self._journal.apply([Change(item.id, [event], State.REPLY_FAILED, expect=_ANSWERED)])
        self._reply_counter(channel.name, "failed").inc()


class _Fresh:
    """A redelivered item that has been checked against the journal and can be dispatched as new."""

    __slots__ = ("_inner", "item", "redelivered")

    def __init__(self, inner: Delivery) -> None:
        self._inner = inner
        self.item = inner.item
        self.redelivered = False

    async def ack(self) -> None:
        await self._inner.ack()

    async def nak(self, delay_s: float = 0.0) -> None:
        await self._inner.nak(delay_s)

    async def in_progress(self) -> None:
        await self._inner.in_progress()
