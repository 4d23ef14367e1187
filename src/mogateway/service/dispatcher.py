"""The dispatcher: from the work queue to the client application's callback, and the reply back out.

Each client has a lane: a queue of its MOs served by at most ``max_concurrency`` tasks, created when
work arrives and gone when the lane is empty. A slow application therefore only ever occupies its own
lane; a global semaphore caps the callbacks in flight across all lanes (``max_inflight``), and no
single lane may take more than nine tenths of it, so one client's hanging callbacks leave room for
the others even when its own cap is as large as the global one. (Several hanging clients together can
still fill it: size ``max_inflight`` above the sum of the caps of clients that may hang.)

The answer to a WhatsApp event that is not a person's message (a reaction, an edit:
``core.whatsapp.withholds_reply``) is recorded as ``blank`` with the text it had (``withheld_reply``)
and never sent: such events never produce a reply, whatever the application answers.

For every MO the outcome is recorded in the journal (a compare-and-set from ``queued``, as
``core.timeline`` says) *before* its reply is handed to the :class:`~mogateway.service.replier.Replier`,
so an MO whose outcome is already recorded (by this node before a crash, or by another node) is never
called again, and a reply is sent at most once per recorded answer. The lane does not wait for the
reply: a reply waiting for a bind holds no callback capacity.

A journal write that fails (a full disk, PostgreSQL gone: ``service.journal_health``) never changes an
MO's fate: the answer of a callback already made is kept in memory and recorded when the journal takes
it again, and only then is its reply handed over and its queue entry acknowledged — meanwhile the lane
waits, so no further callback is made that could not be recorded either, and no MO is called twice.
Only a bug of the gateway's own (not the journal's) records an MO as ``failed``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from mogateway import __version__
from mogateway.core.clients import ClientRecord, first_word
from mogateway.core.contract import Outcome, OutcomeKind, callback_body, callback_headers
from mogateway.core.message import Message
from mogateway.core.ports import CallbackTransport, Clock, MessageStore, QueueEntry, WorkQueue
from mogateway.core.signing import signature_headers
from mogateway.core.text import count_parts, fit_parts
from mogateway.core.timeline import FINAL_STATES, Change, Event, EventKind, State
from mogateway.core.whatsapp import withholds_reply
from mogateway.core.whatsapp_answer import decode_reply, describe
from mogateway.core.whatsapp_media import is_media_member
from mogateway.service.caller import exchange
from mogateway.service.journal_health import JournalHealth, journal_error_kind
from mogateway.service.metrics import Metrics
from mogateway.service.registry import Registry
from mogateway.service.replier import Replier
from mogateway.service.running_loop import RunningLoop
from mogateway.service.throttle import Throttle

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

#: The outcome detail of an answer withheld from a WhatsApp event (see the module docstring).
WITHHELD_DETAIL = "a WhatsApp reaction or edit is not a person's message: its answer is never sent"
#: Outcomes that show the client's application works (the others count as failures in a row).
_CALLBACK_WORKED = frozenset({OutcomeKind.REPLY, OutcomeKind.BLANK})
#: A client is logged as failing after this many failed callbacks in a row.
_FAILING_AFTER = 5


class _Lane:
    """The MOs waiting for one client, and how many tasks are serving them."""

    __slots__ = ("client_id", "first", "items", "workers")

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.items: collections.deque[QueueEntry] = collections.deque()
        self.first = 0  # the leading items that were picked up again (see Dispatcher._route)
        self.workers = 0


class Dispatcher:
    def __init__(
        self,
        *,
        queue: WorkQueue,
        store: MessageStore,
        registry: Registry,
        replier: Replier,
        client: CallbackTransport,
        metrics: Metrics,
        max_inflight: int = 1000,
        reply_max_parts: int = 6,
        allow_private: bool = False,
        clock: Clock = time.time,
        lane_cap: Callable[[ClientRecord], int] | None = None,
        health: JournalHealth | None = None,
        media_url: Callable[[str, str, float], str | None] | None = None,
    ) -> None:
        self._queue = queue
        # (message id, client id, now) -> the signed URL of a WhatsApp message's media, or None
        # (api.whatsapp_media; None when the gateway has no public_url).
        self._media_url = media_url
        self._store = store
        self._registry = registry
        self._replier = replier
        self._clock = clock
        self._http = client
        self._metrics = metrics
        self._global = asyncio.Semaphore(max_inflight)
        # No client may take the whole global cap: a tenth of it (at least one) stays for the others,
        # so a client whose callbacks hang cannot starve the rest even when its own cap is larger.
        self._one_client_max = max(1, max_inflight - max(1, max_inflight // 10))
        self._reply_max_parts = reply_max_parts
        self._allow_private = allow_private
        # How many callbacks a client's lane may have in flight here: its cap, or with several worker
        # processes this worker's share of it (core.workers).
        self._lane_cap = lane_cap or _whole_cap
        self._lanes: dict[str, _Lane] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop = RunningLoop()
        self._runner: asyncio.Task[None] | None = None
        self._user_agent_version = __version__
        self._stopping = False
        # prometheus children by label, looked up once (labels() costs more than inc()).
        self._per_client: dict[str, tuple[Any, Any]] = {}
        self._outcome_counters: dict[tuple[str, OutcomeKind], Any] = {}
        self._failing: dict[str, int] = {}  # client id -> callbacks failed in a row
        self._client_throttle = Throttle(60.0)
        self._health = health or JournalHealth(metrics, path=None)
        self._queue_throttle = Throttle(60.0)

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
            lane.first = 0
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
        task = self._loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pull_forever(self) -> None:
        get = self._queue.get
        while True:
            entry = await get()
            try:
                if entry.redelivered:
                    self._spawn(self._resume(entry), "resume")
                else:
                    self._route(entry)
            except Exception:  # never let one bad item stop the dispatcher
                log.exception("could not route %s", entry.item.id)

    async def _ack(self, entry: QueueEntry) -> None:
        """Acknowledge a queue entry whose outcome is recorded. Should the queue be away (NATS), the
        entry comes back later and the journal says it is done: one line per minute, no traceback."""
        try:
            await entry.ack()
        except Exception as exc:
            if journal_error_kind(exc) is None and not _queue_error(exc):
                raise
            held = self._queue_throttle.ready("ack")
            if held is not None:
                log.warning(
                    "could not acknowledge a queue entry (%s: %s); it comes back and is found done%s",
                    type(exc).__name__,
                    exc,
                    self._queue_throttle.more(held),
                )

    # ------------------------------------------------------------------ routing

    def _route(self, entry: QueueEntry, *, first: bool = False) -> None:
        """Queue ``entry`` in its client's lane; ``first``: an MO picked up again (a dead node's, a
        stranded one) has waited longest, so it goes before the fresh ones (in the order it came)."""
        item = entry.item
        client = self._registry.route(item.shortcode, item.text)
        if client is None:
            self._spawn(self._unroutable(entry), "unroutable")
            return
        lane = self._lanes.get(client.id)
        if lane is None:
            lane = self._lanes[client.id] = _Lane(client.id)
        if first:
            lane.items.insert(lane.first, entry)
            lane.first += 1
        else:
            lane.items.append(entry)
        if lane.workers < max(1, min(self._lane_cap(client), self._one_client_max)):
            lane.workers += 1
            self._spawn(self._serve_lane(lane), f"lane:{client.id}")

    async def _serve_lane(self, lane: _Lane) -> None:
        try:
            while lane.items and not self._stopping:
                entry = lane.items.popleft()
                if lane.first:
                    lane.first -= 1
                client = self._registry.get(lane.client_id)
                if client is None:  # removed while its MOs waited: route them again
                    self._route(entry)
                    continue
                try:
                    await self._dispatch(entry, client)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.exception("dispatch of %s failed", entry.item.id)
                    await self._record_internal_error(entry, exc)
        finally:
            lane.workers -= 1
            if not lane.items and lane.workers == 0:
                self._lanes.pop(lane.client_id, None)

    async def _apply(self, change: Change, what: str) -> bool:
        """Record ``change``, tried again until the journal takes it (``service.journal_health``).

        A write reported failed may still have been committed (an fsync error after the commit): the
        compare-and-set then finds it done. That is recognised by the times of the change's own events,
        so an answer recorded by this very call is not taken for another worker's."""
        store = self._store
        tries = 0

        async def once() -> list[bool]:
            nonlocal tries
            tries += 1
            return await store.apply([change])

        (applied,) = await self._health.retry(once, what)
        if applied or tries == 1:
            return applied
        record = await self._health.retry(lambda: store.get(change.message_id), what)
        times = {change.event.at, *(e.at for e in change.then)}
        return record is not None and record.state is not State.QUEUED and record.updated_at in times

    async def _record_outcome(self, entry: QueueEntry, outcome: OutcomeKind, detail: str) -> None:
        event = Event(EventKind.OUTCOME, self._clock(), {"outcome": outcome.value, "detail": detail})
        await self._apply(Change(entry.item.id, event), f"the outcome of {entry.item.id}")
        await self._ack(entry)

    async def _record_internal_error(self, entry: QueueEntry, exc: Exception) -> None:
        """A bug must not leave an MO silently queued: record it as failed (it can be replayed)."""
        detail = f"gateway error: {type(exc).__name__}: {exc}"[:300]
        try:
            await self._record_outcome(entry, OutcomeKind.FAILED, detail)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not record the failure of %s; it stays unfinished", entry.item.id)

    async def _unroutable(self, entry: QueueEntry) -> None:
        item = entry.item
        # Unroutable is final: first make sure no client was registered elsewhere (another node or
        # worker) since this one last read the clients. Route again whatever the refresh says: another
        # MO's refresh may have read the new client between this MO's first try and this check.
        await self._health.retry(self._registry.refresh_if_changed, f"the routing of {item.id}")
        if self._registry.route(item.shortcode, item.text):
            self._route(entry)
            return
        keyword = first_word(item.text)
        detail = f"no client for shortcode {item.shortcode}" + (
            f" and keyword {keyword!r}" if keyword else ""
        )
        await self._record_outcome(entry, OutcomeKind.UNROUTABLE, detail)
        self._metrics.unroutable.inc()

    async def _resume(self, entry: QueueEntry) -> None:
        """A redelivered MO: look at the journal first, then do only what is left."""
        item = entry.item
        store = self._store
        record = await self._health.retry(lambda: store.get(item.id), f"the resumption of {item.id}")
        if record is None:
            log.warning("queued message %s is not in the journal; dropping the queue entry", item.id)
            await self._ack(entry)
            return
        if record.state in FINAL_STATES:
            await self._ack(entry)
            return
        if record.state in (State.ANSWERED, State.REPLYING):
            if not self._replier.holds(item.id):  # else it is being replied to here already
                self._replier.resume(record)
            await self._ack(entry)
            return
        event = Event(EventKind.RECOVERED, self._clock(), {"resume": "dispatch"})
        still_queued = await self._apply(Change(item.id, event), f"the resumption of {item.id}")
        if not still_queued:  # finished meanwhile (another node)
            await self._ack(entry)
            return
        self._route(_Fresh(entry), first=True)

    # ------------------------------------------------------------------ one callback

    async def _dispatch(self, entry: QueueEntry, client: ClientRecord) -> None:
        item: Message = entry.item
        metrics = self._metrics
        routed_at = self._clock()
        media = None
        if item.whatsapp is not None and self._media_url is not None and is_media_member(item.whatsapp):
            media = self._media_url(item.id, client.id, routed_at)  # signed at each dispatch, like the body
        body = callback_body(item, "s" if client.tsunix_unit == "s" else "ms", media)
        headers = callback_headers(client.callback_token(routed_at), item.id, self._user_agent_version)
        if client.signing_secret:
            # Signed at each dispatch (a replay or a retry after a restart gets a fresh timestamp), with
            # the previous secret too during a rotation's grace period.
            headers.update(signature_headers(client.signing_secrets(routed_at), int(routed_at), body))
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
                    channel=item.channel,
                )
            finally:
                gauge.dec()
        outcome = ex.outcome
        self._watch_client(client, outcome)
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
        withheld = None
        if outcome.sends_reply and withholds_reply(item):
            # A WhatsApp reaction or edit is not a person's message: never answered (core.whatsapp).
            withheld = outcome.reply
            outcome = Outcome(OutcomeKind.BLANK, outcome.status, None, WITHHELD_DETAIL)
        reply_text, outcome_data = self._outcome_data(outcome, ex.elapsed_ms, item.channel)
        if withheld is not None:
            outcome_data["withheld_reply"] = withheld
        outcome_data.update(routed_at=routed_at, client_id=client.id, client=client.name, attempts=attempts)
        answered_at = self._clock()
        # A reply its channel can take now has its handover intent recorded with the answer (one write).
        planned = self._replier.plan(item, reply_text, client) if reply_text is not None else None
        change = Change(
            item.id,
            Event(EventKind.OUTCOME, answered_at, outcome_data),
            client_id=client.id,
            reply_text=reply_text,
            then=planned.events if planned is not None else (),
        )
        # Kept in memory and tried again while the journal cannot take it: never a second callback.
        applied = await self._apply(change, f"the answer to {item.id}")
        if applied and planned is not None:
            self._replier.send(planned, answered_at=answered_at)
        await self._ack(entry)

    def _watch_client(self, client: ClientRecord, outcome: Outcome) -> None:
        """One log line when a client's callbacks keep failing (then one a minute while they do), one
        when they work again. The timeline and /metrics have every single failure."""
        if outcome.kind in _CALLBACK_WORKED:
            failures = self._failing.pop(client.id, 0)
            if failures >= _FAILING_AFTER:
                self._client_throttle.forget(client.id)
                log.info(
                    "client %s (%s): callbacks work again after %d failures", client.name, client.id, failures
                )
            return
        failures = self._failing[client.id] = self._failing.get(client.id, 0) + 1
        if failures < _FAILING_AFTER:
            return
        if self._client_throttle.ready(client.id) is not None:
            last = outcome.kind.value + (f" {outcome.status}" if outcome.status is not None else "")
            if outcome.detail:
                last += f" ({outcome.detail})"
            log.warning(
                "client %s (%s): %d callbacks failed in a row, the last: %s",
                client.name,
                client.id,
                failures,
                last,
            )

    def _outcome_data(
        self, outcome: Outcome, elapsed_ms: float, channel: str = "sms"
    ) -> tuple[str | None, dict[str, Any]]:
        data: dict[str, Any] = {"outcome": outcome.kind.value, "elapsed_ms": round(elapsed_ms, 1)}
        if outcome.status is not None:
            data["status"] = outcome.status
        if outcome.detail:
            data["detail"] = outcome.detail
        if outcome.reply is None:
            return None, data
        if channel == "whatsapp":  # no SMS parts: its channel splits it at 4,096 characters
            rich = decode_reply(outcome.reply)
            if rich is None:
                data.update(reply=outcome.reply, channel=channel)
            else:  # the timeline shows the messages as JSON; the journal keeps the encoded reply
                data.update(reply=orjson.dumps(list(rich)).decode(), rich=describe(rich), channel=channel)
            return outcome.reply, data
        text, truncated = fit_parts(outcome.reply, self._reply_max_parts)
        parts = count_parts(text)
        data.update(reply=text, parts=parts.parts, encoding=parts.encoding)
        if truncated:
            data["truncated_from_chars"] = len(outcome.reply)
            self._metrics.reply_truncated.inc()
        return text, data


def _queue_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the work queue's connection (NATS away), not from a bug."""
    return type(exc).__module__.split(".", 1)[0] == "nats"


def _whole_cap(client: ClientRecord) -> int:
    return client.max_concurrency


class _Fresh:
    """A redelivered item that has been checked against the journal and can be dispatched as new."""

    __slots__ = ("_inner", "item", "redelivered")

    def __init__(self, inner: QueueEntry) -> None:
        self._inner = inner
        self.item = inner.item
        self.redelivered = False

    async def ack(self) -> None:
        await self._inner.ack()

    async def in_progress(self) -> None:
        await self._inner.in_progress()
