"""The work queue on NATS JetStream: one stream, one durable pull consumer shared by every node.

* The stream has work-queue retention: a message is deleted once acknowledged, so the stream holds
  exactly the MOs not yet finished (waiting, or held by some node's dispatcher).
* Every MO is published with ``Nats-Msg-Id`` = its id, so the stream drops a second publish of the same
  MO within the duplicate window (a retried push on another node, the sweeper re-publishing).
* All nodes pull from one durable consumer; whoever asks gets the next MO. An MO not acknowledged
  within ``ack_wait`` goes to another node — that is how the work of a dead node moves on, so
  ``ack_wait`` is short (6 s by default): it bounds how long a dead node's MOs wait for another node.
  While a node holds an MO (waiting in a client's lane, or its callback running for up to 30 s) it
  tells the server so (``in_progress``) whenever the MO has gone ``ack_wait / 3`` without word from it,
  checked every ``ack_wait / 12``. An MO finished sooner (the usual case) costs no ``in_progress`` at
  all; one held longer costs one every ``ack_wait / 3`` to ``5 * ack_wait / 12``, so a live node's
  MO is taken from it only when the node (its event loop, or its link to NATS) stalls for more than
  ``7 * ack_wait / 12`` (3.5 s by default). A node that has held an MO for ``max_hold_s`` stops doing
  that and lets it go. A node fetches only once its dispatcher asks for work (the first ``get``).
* ``max_ack_pending`` bounds what all nodes together hold unacknowledged: backpressure for the whole
  cluster. ``node_max_pending`` bounds one node's share so that work spreads over the nodes.

An entry is ``redelivered`` when the server delivered it before (a node died or let it go) or when the
sweeper re-published it: the dispatcher then reads the journal before doing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import nats
import nats.errors
import nats.js.errors
import orjson
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from mogateway.config.nats import NatsSettings, parse_settings
from mogateway.core.message import Message, Sender

__all__ = ["JetStreamEntry", "JetStreamQueue"]

log = logging.getLogger(__name__)

#: Header marking an MO the sweeper (or recovery) published again: the dispatcher must check the journal.
RECOVERED_HEADER = "Mogateway-Recovered"


class JetStreamEntry:
    """One MO pulled from the stream (a ``core.ports.QueueEntry``), held by this node until ``ack``."""

    __slots__ = ("_msg", "_queue", "held_since", "item", "redelivered", "refreshed")

    def __init__(self, queue: JetStreamQueue, msg: Msg, item: Message, redelivered: bool) -> None:
        self._queue = queue
        self._msg = msg
        self.item = item
        self.redelivered = redelivered
        self.held_since = time.monotonic()
        #: When the server last heard of it from this node (delivered, or in_progress): its ack_wait
        #: runs from there.
        self.refreshed = self.held_since

    async def ack(self) -> None:
        self._queue._release(self)
        await self._msg.ack()

    async def in_progress(self) -> None:
        self.refreshed = time.monotonic()
        await self._msg.in_progress()


class JetStreamQueue:
    """``WorkQueue`` on NATS JetStream (see the module docstring)."""

    def __init__(
        self, url: str, settings: Mapping[str, Any] | None = None, *, name: str = "mogateway"
    ) -> None:
        self.url = url
        self._raw_settings = dict(settings or {})
        self.settings = NatsSettings()
        self._name = name
        self.nc: NatsClient | None = None
        self.js: JetStreamContext | None = None
        self._sub: Any = None
        self._ready: asyncio.Queue[JetStreamEntry] = asyncio.Queue()
        self._held: dict[int, JetStreamEntry] = {}
        self._room = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._fetching: asyncio.Task[None] | None = None
        self._lag = 0
        #: in_progress acknowledgements sent since the start (what the keep-alive costs).
        self.refreshes = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        # Validated here, not in __init__, so that a bad setting is reported like any start-up failure.
        self.settings = s = parse_settings(self._raw_settings)
        try:
            # Reconnect forever once connected, but give up at start: nats-py would otherwise keep
            # trying an unreachable first server and the gateway would hang instead of saying why.
            self.nc = await asyncio.wait_for(
                nats.connect(
                    # A NATS cluster is named as a comma-separated list of its servers' URLs.
                    servers=[u.strip() for u in self.url.split(",") if u.strip()],
                    name=self._name,
                    connect_timeout=s.connect_timeout_s,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    error_cb=_log_error,
                ),
                timeout=s.connect_timeout_s * 2,
            )
        except (OSError, TimeoutError, nats.errors.Error) as exc:
            why = str(exc) or "no answer in time"
            raise RuntimeError(f"cannot connect to NATS at {self.url}: {why}") from None
        self.js = self.nc.jetstream(timeout=10)
        try:
            await self._ensure_stream()
            await self._ensure_consumer()
            self._sub = await self.js.pull_subscribe_bind(durable=s.consumer, stream=s.stream)
        except nats.js.errors.Error as exc:
            await self.nc.close()
            raise RuntimeError(f"JetStream refused the stream/consumer setup: {exc}") from None
        self._room.set()
        # Fetching starts at the first get(): a starting node does not take MOs before its dispatcher
        # can work on them (while they wait, the MOs of a dead node wait too).
        self._tasks = [
            asyncio.create_task(self._keep_alive_forever(), name="jetstream-in-progress"),
            asyncio.create_task(self._watch_lag_forever(), name="jetstream-lag"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._fetching = None
        nc, self.nc = self.nc, None
        if nc is not None and not nc.is_closed:
            # Held MOs are not acknowledged: after ack_wait another node takes them.
            # Flush the acknowledgements already given, then go.
            with contextlib.suppress(Exception):
                await nc.flush(timeout=2)
            with contextlib.suppress(Exception):
                await nc.close()

    async def _ensure_stream(self) -> None:
        s = self.settings
        assert self.js is not None
        config = StreamConfig(
            name=s.stream,
            subjects=[s.subject],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE if s.storage == "file" else StorageType.MEMORY,
            num_replicas=s.replicas,
            max_age=s.max_age_s,
            max_msgs=s.max_msgs,
            max_bytes=s.max_bytes,
            discard=DiscardPolicy.NEW,  # refuse new MOs when full, rather than drop unfinished ones
            duplicate_window=s.duplicate_window_s,
        )
        try:
            await self.js.stream_info(s.stream)
        except nats.js.errors.NotFoundError:
            await self.js.add_stream(config)
            return
        await self.js.update_stream(config)

    async def _ensure_consumer(self) -> None:
        s = self.settings
        assert self.js is not None
        config = ConsumerConfig(
            durable_name=s.consumer,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=s.ack_wait_s,
            max_ack_pending=s.max_ack_pending,
            max_deliver=-1,  # never give an MO up: the journal decides when it is finished
            filter_subject=s.subject,
            max_waiting=512,
        )
        await self.js.add_consumer(s.stream, config)

    # ------------------------------------------------------------------ producing

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        """Publish ``items`` and return once JetStream has stored every one (or raise).

        Each is published with ``Nats-Msg-Id`` = its id, so JetStream drops a second publish of it within
        its duplicate window; a ``generation`` makes the id another one (``<id>:<generation>``), for the
        sweeper's republish of an MO whose first entry was already acknowledged and is gone."""
        if self.js is None:
            raise RuntimeError("work queue is not started")
        subject = self.settings.subject
        publish = self.js.publish_async
        futures: list[asyncio.Future[Any]] = []
        for item in items:
            headers = {"Nats-Msg-Id": f"{item.id}:{generation}" if generation else item.id}
            if redelivered:
                headers[RECOVERED_HEADER] = "1"
            futures.append(await publish(subject, item.to_json(), headers=headers))
        if futures:
            await asyncio.wait_for(asyncio.gather(*futures), timeout=30)

    # ------------------------------------------------------------------ consuming

    async def get(self) -> JetStreamEntry:
        if self._fetching is None and self._sub is not None:
            self._fetching = asyncio.create_task(self._fetch_forever(), name="jetstream-fetch")
            self._tasks.append(self._fetching)
        return await self._ready.get()

    def _release(self, entry: JetStreamEntry) -> None:
        if self._held.pop(id(entry), None) is not None:
            self._room.set()

    def held(self) -> int:
        """MOs this node holds unacknowledged (waiting in lanes or being dispatched)."""
        return len(self._held)

    async def _fetch_forever(self) -> None:
        s = self.settings
        while True:
            room = s.node_max_pending - len(self._held)
            if room <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            try:
                msgs = await self._sub.fetch(min(room, s.fetch_batch), timeout=2)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: nats-py reconnects; try again shortly
                log.warning("fetch from JetStream failed: %s", exc)
                await asyncio.sleep(1)
                continue
            for msg in msgs:
                self._accept(msg)

    def _accept(self, msg: Msg) -> None:
        try:
            item = _read_item(msg.data)
        except (ValueError, TypeError):
            log.error("dropping an unreadable work item (%d bytes)", len(msg.data))
            task = asyncio.create_task(msg.term())
            task.add_done_callback(lambda t: t.exception())
            return
        redelivered = msg.metadata.num_delivered > 1 or bool((msg.headers or {}).get(RECOVERED_HEADER))
        entry = JetStreamEntry(self, msg, item, redelivered)
        self._held[id(entry)] = entry
        self._ready.put_nowait(entry)

    async def _keep_alive_forever(self) -> None:
        s = self.settings
        while True:
            await asyncio.sleep(s.ack_wait_s / 12)
            await self.refresh_due()

    async def refresh_due(self) -> int:
        """Tell the server this node still works on every MO it has held ``ack_wait / 3`` since it last
        did (or since it was delivered); let go of those held ``max_hold_s``. Returns how many it told.

        Only MOs held that long cost anything: most are finished within a fraction of a second."""
        s = self.settings
        now = time.monotonic()
        due_before = now - s.ack_wait_s / 3
        told = 0
        for entry in list(self._held.values()):
            if entry.refreshed > due_before:
                continue
            if now - entry.held_since > s.max_hold_s:
                # Held too long (a stuck lane, a lost task): let another node try.
                self._release(entry)
                log.warning("giving up %s after holding it %.0f s", entry.item.id, s.max_hold_s)
                continue
            with contextlib.suppress(Exception):
                await entry.in_progress()
                told += 1
        self.refreshes += told
        return told

    # ------------------------------------------------------------------ observing

    async def _watch_lag_forever(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                info = await self.consumer_info()
                self._lag = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
            await asyncio.sleep(2)

    async def consumer_info(self) -> Any:
        """The shared consumer's state (pending, ack pending, redelivered)."""
        assert self.js is not None
        return await self.js.consumer_info(self.settings.stream, self.settings.consumer)

    def lag(self) -> int:
        """MOs in the stream not yet finished by any node (as of the last poll, every 2 s)."""
        return self._lag

    async def oldest_pending(self) -> datetime | None:
        """When the oldest MO still in the stream was published; None when the stream is empty.

        Raises LookupError when it cannot be told (the message went while we looked).
        """
        assert self.js is not None
        info = await self.js.stream_info(self.settings.stream)
        if not info.state.messages:
            return None
        try:
            raw = await self.js.get_msg(self.settings.stream, seq=info.state.first_seq)
        except nats.js.errors.NotFoundError:
            raise LookupError("oldest message went away") from None
        if raw.time is None:
            raise LookupError("no publish time")
        return raw.time


def _read_item(data: bytes) -> Message:
    """A work item: a message as ``Message.to_json`` writes it, or as mogateway 0.1 published it (an
    11-member array whose tenth is the circle, a string, where a message's 11 values have its notes, a
    list), so that items in the stream during a rolling upgrade are not lost."""
    fields = orjson.loads(data)
    if isinstance(fields, list) and len(fields) == 11 and not isinstance(fields[9], list):
        mid, origin, shortcode, msisdn, text, cc, ndc, sn, operator, circle, received_at = fields
        return Message(
            mid, shortcode, msisdn, text, received_at, origin, sender=Sender(cc, ndc, sn, operator, circle)
        )
    return Message.from_json(data)


async def _log_error(exc: Exception) -> None:
    log.warning("NATS: %s", exc)
