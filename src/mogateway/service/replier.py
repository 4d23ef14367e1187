"""Session replies: each handed to its channel at most once, and waiting — without holding any callback
capacity — while no channel can take it.

The dispatcher records the application's answer (state ``answered``) and hands the reply here; its lane
goes on with the next MO at once. Rules, in the order a reply meets them:

* A reply leaves only from ``answered``. For a channel that cannot be asked twice (SMPP), ``replying`` is
  recorded — a compare-and-set from ``answered`` — right before the channel writes the first part: if
  that fails, another worker holds the reply and nothing is sent. When the channel can take the reply
  the moment the answer comes (:meth:`Replier.plan`), the intent is recorded in the same write as the
  answer (``queued`` → ``replying``, both events in the timeline): one journal write per reply less,
  and the same guarantee — the compare-and-set from ``queued`` lets one worker only record it. If the
  handover then fails before anything went out, the reply goes back to ``answered`` (``reply_waiting``).
* Nothing went out and trying later may work (no bind up, the MT endpoint down): the reply waits in
  memory with backoff, recorded once as ``reply_waiting`` and counted in ``mogateway_replies_waiting``,
  for up to ``validity_s`` after the answer; then it fails as expired (``reply_failed``).
* The handover was cut off after it began (the session closed before the SMSC answered): the reply is
  recorded as possibly sent (``reply_unknown``) and not sent again — unless the operator asked for
  at-least-once replies (``reply_at_least_once``), in which case it waits and goes out again.
* The channel refused it (not retryable): ``reply_failed`` with the channel's reason.
* Before an SMS reply is sent, the client's DLT rules (``service.dlt``) decide: a reply matching one of
  its templates carries its ids; with ``dlt_enforce`` a reply matching none is not sent
  (``reply_blocked``). DLT is TRAI's rule for SMS only: a WhatsApp reply never meets it, whatever the
  client's DLT settings (a client may have both shortcodes and WhatsApp numbers).
* After a restart (:meth:`Replier.resume`): ``answered`` replies are sent; ``replying`` ones, cut off by
  the stop, become ``reply_unknown`` — or are sent again with at-least-once or on a channel that may be
  asked twice.
* While this node holds a reply (sending it, or waiting), its row is touched every ``touch_s`` (0: never,
  on a single node) so that the cluster sweeper, which republishes answered MOs nobody changed for a
  while, does not hand it to another node.
* A journal write that fails (a full disk, PostgreSQL gone) never decides a reply's fate: each record
  is tried again until the journal takes it (``service.journal_health``), the reply held here
  meanwhile; an intent that could not be recorded means nothing went out, and the reply waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from mogateway.core.clients import ClientRecord
from mogateway.core.immutable import immutable
from mogateway.core.message import Message
from mogateway.core.ports import Clock, MessageRecord, MessageStore, Reply, ReplyChannel, ReplyError
from mogateway.core.timeline import Change, Event, EventKind, State
from mogateway.service.dlt import NO_DLT, DltGate, Verdict
from mogateway.service.journal_health import JournalHealth, journal_error_kind
from mogateway.service.metrics import Metrics
from mogateway.service.running_loop import RunningLoop
from mogateway.service.throttle import Throttle

__all__ = ["HandoverRefused", "PlannedReply", "Replier", "ReplyRouter"]

log = logging.getLogger("mogateway.replies")

_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 5.0


class HandoverRefused(Exception):
    """The intent record was refused: the reply is no longer ``answered`` here (another worker has it)."""


class ReplyRouter:
    """Chooses the channel for a reply by the origin of its MO (``"smpp:<bind>"`` → the "smpp" channel)."""

    def __init__(self, default: ReplyChannel) -> None:
        self.default = default
        self._by_prefix: dict[str, ReplyChannel] = {}

    def register(self, prefix: str, channel: ReplyChannel) -> None:
        self._by_prefix[prefix] = channel

    def channel_for(self, origin: str) -> ReplyChannel:
        prefix = origin.split(":", 1)[0]
        return self._by_prefix.get(prefix, self.default)


@immutable
class PlannedReply:
    """A reply about to be handed over (:meth:`Replier.plan`): what the client's DLT rules said, and
    ``intent``, the ``reply_sending`` event to record with the answer when the reply's channel needs an
    intent record and can take the reply now (else None: recorded at the handover, if at all)."""

    reply: Reply
    client_id: str | None
    verdict: Verdict
    intent: Event | None

    @property
    def events(self) -> tuple[Event, ...]:
        """The events to append to the answer's change (``Change.then``)."""
        return () if self.intent is None else (self.intent,)


class Replier:
    """Sends replies (see the module docstring). ``clients`` finds a client by id (the registry)."""

    def __init__(
        self,
        store: MessageStore,
        router: ReplyRouter,
        metrics: Metrics,
        *,
        validity_s: float = 300.0,
        at_least_once: bool = False,
        touch_s: float = 0.0,
        clock: Clock = time.time,
        clients: Callable[[str], ClientRecord | None] = lambda _: None,
        dlt: DltGate | None = None,
        health: JournalHealth | None = None,
    ) -> None:
        self._store = store
        self._router = router
        self._metrics = metrics
        self.validity_s = validity_s
        self.at_least_once = at_least_once
        self._touch_s = touch_s
        self._clock = clock
        self._clients = clients
        self._dlt = dlt or DltGate()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = RunningLoop()
        self._busy: set[str] = set()  # message ids this replier has taken and not finished
        self._waiting: set[str] = set()  # message ids waiting for a channel
        self._held: dict[str, float] = {}  # message id -> when its row was last touched
        self._toucher: asyncio.Task[None] | None = None
        self._counters: dict[tuple[str, str], Any] = {}
        #: "reply X failed/given up": one line per kind every 10 s (an SMSC outage fails thousands).
        self._log_throttle = Throttle(10.0)
        self._health = health or JournalHealth(metrics, path=None)

    # ------------------------------------------------------------------ lifecycle

    def waiting(self) -> int:
        """Replies waiting for a channel that can take them."""
        return len(self._waiting)

    def in_progress(self) -> int:
        return len(self._tasks)

    def holds(self, message_id: str) -> bool:
        """Whether the reply to ``message_id`` is being handled here (sent, waited for, or recorded)."""
        return message_id in self._busy

    async def stop(self, drain_s: float = 5.0) -> None:
        """Let handovers in progress finish for up to ``drain_s``; waiting replies stay ``answered`` in
        the journal and go out after the next start (or from another node)."""
        if self._toucher is not None:
            self._toucher.cancel()
        if self._tasks and drain_s > 0:
            await asyncio.wait(list(self._tasks), timeout=drain_s)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._toucher is not None:
            await asyncio.gather(self._toucher, return_exceptions=True)

    # ------------------------------------------------------------------ entry points

    def plan(self, message: Message, text: str, client: ClientRecord | None) -> PlannedReply:
        """The reply ``text`` to ``message`` as :meth:`send` will hand it over (see :class:`PlannedReply`)."""
        verdict = self._verdict(message, client, text)
        reply = Reply(message, text, verdict.ids)
        intent = None
        if not verdict.blocked:
            channel = self._router.channel_for(message.origin)
            if channel.needs_intent and channel.ready(reply):
                intent = Event(EventKind.REPLY_SENDING, self._clock(), {"channel": channel.name})
        return PlannedReply(reply, client.id if client is not None else None, verdict, intent)

    def send(self, planned: PlannedReply, *, answered_at: float) -> None:
        """Hand a planned reply over in the background; its answer is recorded (state ``answered``, or
        ``replying`` when the plan's intent was recorded with it)."""
        self._spawn(
            planned.reply.message_id, self._deliver(planned.reply, planned.client_id, answered_at, planned)
        )

    def resume(self, record: MessageRecord) -> None:
        """Finish the reply of a message found ``answered`` or ``replying`` after a restart."""
        if record.reply_text is None:
            log.error("message %s is %s without a reply text", record.id, record.state)
            return
        reply = Reply(record.message, record.reply_text)
        channel = self._router.channel_for(record.message.origin)
        if record.state is State.REPLYING and channel.needs_intent and not self.at_least_once:
            self._spawn(
                record.id,
                self._record(
                    reply,
                    EventKind.REPLY_UNKNOWN,
                    channel.name,
                    "the gateway stopped while the reply was being handed over: it may have been sent",
                ),
            )
            return
        # A reply that waited before the stop keeps its validity, counted from the last change.
        self._spawn(record.id, self._resume(reply, record))

    async def _resume(self, reply: Reply, record: MessageRecord) -> None:
        if record.state is State.REPLYING:
            # Back to answered first, so that the intent (answered -> replying) is recorded by one worker.
            detail = "sent again after a restart (at-least-once, or a channel that may be asked twice)"
            channel = self._router.channel_for(record.message.origin).name
            resumed = await self._record(reply, EventKind.REPLY_WAITING, channel, detail, quiet=True)
        else:
            event = Event(EventKind.RECOVERED, self._clock(), {"resume": "reply"})
            resumed = await self._apply(Change(reply.message_id, event))
        if resumed:
            # A reply that waited before the stop keeps its validity, counted from the last change.
            await self._deliver(reply, record.client_id, record.updated_at)

    def _verdict(self, message: Message, client: ClientRecord | None, text: str) -> Verdict:
        """The client's DLT rules on an SMS reply; nothing for a WhatsApp one (DLT is SMS only)."""
        if client is None or message.channel != "sms":
            return NO_DLT
        return self._dlt.verdict(client, text)

    # ------------------------------------------------------------------ one reply

    def _spawn(self, message_id: str, coro: Any) -> None:
        busy = self._busy
        busy.add(message_id)
        task = self._loop().create_task(coro, name="reply")
        self._tasks.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            busy.discard(message_id)

        task.add_done_callback(done)

    async def _deliver(
        self, reply: Reply, client_id: str | None, answered_at: float, planned: PlannedReply | None = None
    ) -> None:
        mid = reply.message_id
        self._held[mid] = self._clock()
        if self._touch_s > 0:
            self._ensure_toucher()
        try:
            await self._deliver_held(reply, client_id, answered_at, planned)
        finally:
            self._held.pop(mid, None)
            if mid in self._waiting:
                self._waiting.discard(mid)
                self._metrics.replies_waiting.set(len(self._waiting))

    async def _deliver_held(
        self, reply: Reply, client_id: str | None, answered_at: float, planned: PlannedReply | None
    ) -> None:
        mid = reply.message_id
        channel = self._router.channel_for(reply.message.origin)
        if planned is not None:
            verdict = planned.verdict
        else:
            client = self._clients(client_id) if client_id else None
            verdict = self._verdict(reply.message, client, reply.text)
        if verdict.blocked:
            await self._apply(verdict.blocked_change(mid, self._clock()))
            self._count(channel.name, "blocked")
            return
        if verdict.ids is not None:
            reply = Reply(reply.message, reply.text, verdict.ids)
        # The intent was recorded with the answer: the first handover must not record it again.
        intent_recorded = planned is not None and planned.intent is not None
        deadline = answered_at + self.validity_s
        backoff = _FIRST_BACKOFF_S
        recorded_wait = False
        while True:
            why = f"no {channel.name} channel can take it now"
            if channel.ready(reply):
                outcome = await self._try(channel, reply, verdict, intent_recorded=intent_recorded)
                intent_recorded = False  # a try that failed went back to answered (reply_waiting)
                if outcome is None:
                    return  # done: submitted, failed, unknown or refused, and recorded
                why = outcome
            now = self._clock()
            if now >= deadline:
                detail = f"expired after {self.validity_s:g} s waiting: {why}"
                await self._record(reply, EventKind.REPLY_FAILED, channel.name, detail, **verdict.data)
                self._count(channel.name, "expired")
                return
            if not recorded_wait or intent_recorded:
                recorded_wait = True
                intent_recorded = False  # reply_waiting takes it back from replying to answered
                self._waiting.add(mid)
                self._metrics.replies_waiting.set(len(self._waiting))
                await self._record(
                    reply, EventKind.REPLY_WAITING, channel.name, why, until=deadline, quiet=True
                )
            await asyncio.sleep(min(backoff, max(0.0, deadline - now)))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def _try(
        self, channel: ReplyChannel, reply: Reply, verdict: Verdict, *, intent_recorded: bool = False
    ) -> str | None:
        """One handover attempt. None when the reply is finished (and recorded); else why it must wait.
        ``intent_recorded``: the message is ``replying`` already (recorded with its answer)."""
        intent = channel.needs_intent
        started = intent_recorded

        async def handover() -> None:
            nonlocal started
            if intent_recorded:
                return
            event = Event(EventKind.REPLY_SENDING, self._clock(), {"channel": channel.name})
            try:
                (ok,) = await self._store.apply([Change(reply.message_id, event)])
            except Exception as exc:
                # Nothing went out yet: the reply waits (its waiting is recorded once the journal can).
                if self._health.failed(exc, "the reply waits and is handed over later") is None:
                    raise
                raise ReplyError(
                    f"the journal could not record the handover: {exc}", retryable=True
                ) from None
            self._health.worked()
            if not ok:
                raise HandoverRefused(reply.message_id)
            started = True

        try:
            submitted = await channel.send(reply, handover if intent else None)
        except HandoverRefused:
            log.info("reply %s is handled elsewhere; not sent here", reply.message_id)
            return None
        except ReplyError as exc:
            if exc.possibly_sent and not self.at_least_once:
                await self._record(reply, EventKind.REPLY_UNKNOWN, channel.name, exc.detail)
                self._count(channel.name, "unknown")
                return None
            if exc.retryable or exc.possibly_sent:
                if started:  # the intent was recorded but nothing went out (or may go again): back
                    await self._record(reply, EventKind.REPLY_WAITING, channel.name, exc.detail, quiet=True)
                return exc.detail
            await self._record(reply, EventKind.REPLY_FAILED, channel.name, exc.detail, **verdict.data)
            self._count(channel.name, "failed")
            return None
        except Exception as exc:  # a channel bug must not leave the reply unrecorded
            log.exception("reply channel %s failed", channel.name)
            detail = f"{type(exc).__name__}: {exc}"
            kind = EventKind.REPLY_UNKNOWN if started else EventKind.REPLY_FAILED
            await self._record(reply, kind, channel.name, detail)
            self._count(channel.name, "failed")
            return None
        event = Event(
            EventKind.REPLY_SUBMITTED,
            self._clock(),
            {
                "channel": submitted.channel,
                "parts": submitted.parts,
                "refs": list(submitted.refs),
                "detail": submitted.detail,
                **verdict.data,
            },
        )
        ok = await self._apply(Change(reply.message_id, event, reply_refs=tuple(submitted.refs)))
        if not ok:
            log.warning("reply %s was submitted but its state had moved on; not recorded", reply.message_id)
        self._count(channel.name, "submitted")
        self._metrics.end_to_end.observe(max(0.0, self._clock() - reply.message.received_at))
        return None

    async def _record(
        self,
        reply: Reply,
        kind: EventKind,
        channel: str,
        detail: str,
        *,
        until: float = 0.0,
        quiet: bool = False,
        **more: Any,
    ) -> bool:
        data: dict[str, Any] = {"channel": channel, "detail": detail, **more}
        if until:
            data["until"] = until
        ok = await self._apply(Change(reply.message_id, Event(kind, self._clock(), data)))
        if not quiet and kind is not EventKind.REPLY_SUBMITTED:
            what = kind.value.removeprefix("reply_")
            held = self._log_throttle.ready(what)
            if held is not None:
                log.warning(
                    "reply %s %s: %s%s", reply.message_id, what, detail, self._log_throttle.more(held)
                )
        return ok

    async def _apply(self, change: Change) -> bool:
        """Record ``change``, tried again until the journal takes it (``service.journal_health``)."""
        store = self._store
        what = f"the reply record of {change.message_id}"
        (ok,) = await self._health.retry(lambda: store.apply([change]), what)
        return ok

    def _count(self, channel: str, result: str) -> None:
        counter = self._counters.get((channel, result))
        if counter is None:
            counter = self._counters[(channel, result)] = self._metrics.replies.labels(channel, result)
        counter.inc()

    # ------------------------------------------------------------------ keeping waiting rows fresh

    def _ensure_toucher(self) -> None:
        if self._toucher is None or self._toucher.done():
            self._toucher = asyncio.create_task(self._touch_forever(), name="reply-toucher")

    async def _touch_forever(self) -> None:
        while self._held:
            await asyncio.sleep(self._touch_s / 2)
            now = self._clock()
            due = [mid for mid, at in self._held.items() if now - at >= self._touch_s]
            if not due:
                continue
            try:
                await self._store.touch(due)
            except Exception as exc:  # the next round tries again
                if journal_error_kind(exc) is None:
                    log.warning("could not touch %d waiting replies: %s", len(due), exc)
                else:
                    self._health.failed(exc, "touching waiting replies is tried again")
                continue
            for mid in due:
                if mid in self._held:
                    self._held[mid] = now
