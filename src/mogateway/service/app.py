"""Wiring: the one place that knows every part of the gateway and starts and stops them in order."""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
import time
from typing import Any

import aiohttp

from mogateway import __version__
from mogateway.config import Settings
from mogateway.core.numbering import SenderResolver
from mogateway.core.timeline import FINAL_STATES, EventKind, State
from mogateway.queue.base import QueuedMO, WorkQueue
from mogateway.queue.local import LocalQueue
from mogateway.service.dispatcher import Dispatcher
from mogateway.service.http1 import Http1Client
from mogateway.service.intake import Intake
from mogateway.service.metrics import Metrics
from mogateway.service.registry import Registry
from mogateway.service.replies import HttpReplyChannel, LogReplyChannel, ReplyChannel, ReplyRouter
from mogateway.storage.journal import Change, Event, Journal, MessageRecord
from mogateway.storage.sqlite import SqliteJournal

__all__ = ["Gateway", "open_journal", "queued_from_record"]

log = logging.getLogger("mogateway")

_RECOVERY_PAGE = 1000


def open_journal(settings: Settings) -> Journal:
    """The journal the ``database`` setting names: a SQLite path, or a PostgreSQL URL."""
    url = settings.database
    if url.startswith(("postgresql://", "postgres://")):
        from mogateway.storage.postgres import PostgresJournal

        journal: Journal = PostgresJournal(url)
        return journal
    if url.startswith("sqlite://"):
        url = url.removeprefix("sqlite://")
    return SqliteJournal(url, synchronous=settings.journal_sync)


def open_queue(settings: Settings) -> WorkQueue:
    if settings.queue == "local":
        return LocalQueue()
    from mogateway.queue.jetstream import JetStreamQueue

    queue: WorkQueue = JetStreamQueue(settings.queue, settings.nats)
    return queue


def queued_from_record(record: MessageRecord) -> QueuedMO:
    return QueuedMO(
        id=record.id,
        origin=record.origin,
        shortcode=record.shortcode,
        msisdn=record.msisdn,
        message=record.message,
        cc=record.cc or 91,
        ndc=record.ndc or 0,
        sn=record.sn or 0,
        operator=record.operator,
        circle=record.circle,
        received_at=record.received_at,
    )


def _sender_resolver(settings: Settings) -> SenderResolver:
    """Operator/circle resolution with the operator's own tables, if configured.

    A bad file raises ConfigError naming the setting and the file's line.
    """
    from mogateway.config import ConfigError
    from mogateway.core.numbering import NumberingDataError

    try:
        return SenderResolver.from_files(settings.series_csv, settings.ported_csv)
    except NumberingDataError as exc:
        text = str(exc)
        setting = "series_csv" if settings.series_csv and str(settings.series_csv) in text else "ported_csv"
        raise ConfigError(f"invalid setting {setting} (MOGATEWAY_{setting.upper()}): {text}") from None


class Gateway:
    """One gateway node: journal, queue, intake, registry, dispatcher, reply channels (and SMPP binds)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.journal: Journal = open_journal(settings)
        self.queue: WorkQueue = open_queue(settings)
        self.registry = Registry(self.journal)
        self.intake = Intake(self.journal, self.queue, _sender_resolver(settings), self.metrics)
        self.admin_token = ""
        self.ingest_token = ""
        self.started_at = 0.0
        self.smpp: Any = None
        self._http: Http1Client | None = None
        self._reply_session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.dispatcher: Dispatcher | None = None
        self.replies: ReplyRouter | None = None
        self.cluster: Any = None  # service.nodes.Cluster: node directory, sweeper, reply routing

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        s = self.settings
        await self.journal.open()
        await self._load_tokens()
        await self.registry.load()
        await self.queue.start()
        self._http = Http1Client(allow_private=s.allow_private_callbacks)
        self.replies = ReplyRouter(self._default_reply_channel())
        self.dispatcher = Dispatcher(
            queue=self.queue,
            journal=self.journal,
            registry=self.registry,
            replies=self.replies,
            client=self._http,
            metrics=self.metrics,
            max_inflight=s.max_inflight,
            reply_max_parts=s.reply_max_parts,
            allow_private=s.allow_private_callbacks,
        )
        if s.smpp.binds:
            from mogateway.smpp.service import start_smpp

            self.smpp = await start_smpp(self, s.smpp)
            self.replies.register("smpp", self.smpp.reply_channel)
        from mogateway.service.nodes import start_cluster

        self.cluster = await start_cluster(self)
        self.dispatcher.start()
        self._tasks.append(asyncio.create_task(self.registry.refresh_forever(), name="registry-refresh"))
        self.started_at = time.time()
        if isinstance(self.queue, LocalQueue):
            await self._recover()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.smpp is not None:
            await self.smpp.stop()
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self._http is not None:
            await self._http.close()
        if self._reply_session is not None:
            await self._reply_session.close()
        await self.queue.close()
        await self.journal.close()

    def _default_reply_channel(self) -> ReplyChannel:
        s = self.settings
        if s.reply_channel == "http":
            if not s.reply_http_url:
                raise RuntimeError("reply_channel = http needs reply_http_url")
            self._reply_session = aiohttp.ClientSession()
            return HttpReplyChannel(self._reply_session, s.reply_http_url)
        return LogReplyChannel()

    async def _load_tokens(self) -> None:
        """Configured tokens win; otherwise generate them once, keep them in the journal, print once."""
        generated: list[tuple[str, str]] = []
        for name in ("admin", "ingest"):
            configured = getattr(self.settings, f"{name}_token")
            if configured is not None:
                value = configured.get_secret_value()
            else:
                existing = await self.journal.get_setting(f"{name}_token")
                if existing is None:
                    value = await self.journal.set_setting_if_absent(
                        f"{name}_token", secrets.token_urlsafe(32)
                    )
                    generated.append((name, value))
                else:
                    value = existing
            setattr(self, f"{name}_token", value)
        if generated:
            # Printed to the terminal, never to the log: this is the only time they are shown.
            print("mogateway: generated tokens (shown once; kept in the journal):", file=sys.stderr)
            for name, value in generated:
                print(f"  {name} token: {value}", file=sys.stderr)
            sys.stderr.flush()

    async def _recover(self) -> None:
        """Queue again every stored MO that had not reached a final state when the gateway stopped."""
        cutoff = time.time() + 1
        total = 0
        seen: set[str] = set()
        while True:
            records = await self.journal.unfinished(_RECOVERY_PAGE, older_than=cutoff)
            fresh = [r for r in records if r.id not in seen]
            if not fresh:
                break
            seen.update(r.id for r in fresh)
            await self.queue.put([queued_from_record(r) for r in fresh], redelivered=True)
            total += len(fresh)
            if len(records) < _RECOVERY_PAGE:
                break
            cutoff = max(r.updated_at for r in records)
        if total:
            log.info("recovery: %d unfinished messages queued again", total)

    # ------------------------------------------------------------------ operations

    async def replay(self, message_id: str) -> MessageRecord | None:
        """Call the callback again for a finished message. Returns the record, or None if unknown.

        Raises ValueError when the message cannot be replayed (it was rejected at intake).
        """
        record = await self.journal.get(message_id)
        if record is None:
            return None
        if record.state is State.REJECTED:
            raise ValueError("a rejected message was never accepted and cannot be replayed")
        allowed = frozenset(FINAL_STATES - {State.REJECTED})
        event = Event(EventKind.REPLAY, time.time(), {"from_state": record.state.value})
        (applied,) = await self.journal.apply([Change(message_id, [event], State.QUEUED, expect=allowed)])
        if not applied:
            raise ValueError(f"message is {record.state.value}; only finished messages can be replayed")
        await self.queue.put([queued_from_record(record)])
        return await self.journal.get(message_id)

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "node": self.settings.node_name or None,
            "uptime_s": round(time.time() - self.started_at, 1) if self.started_at else 0,
            "queue_lag": self.queue.lag(),
            "waiting": self.dispatcher.waiting() if self.dispatcher else 0,
        }
