"""One gateway node, wired: the only module that knows every part and starts and stops them in order.

A node is: the journal (SQLite or PostgreSQL) it was configured with; intake, the client registry, the
dispatcher and the replier over it; the reply channels (log or HTTP, and SMPP when binds are
configured); the traffic figures. Everything else receives what it needs through a port
(``core.ports``) and never imports this module.

How it runs — one process, one of several worker processes, or a node of a cluster — is chosen once,
from the settings and the worker seat, by ``mogateway.modes.choose_mode``; the mode builds what differs
(the work queue and who owns an MO, recovery, the node directory and where replies for other nodes'
binds go, the sweeper). This module wires what the mode built and never asks which mode it is in.

A node may be one of several worker processes of one gateway (``mogateway serve --workers N``, see
``mogateway.cli.supervisor``): it then holds its share of the binds, reaches its siblings
(``edges.workers.siblings``) and answers them on its socket (``edges.workers.socket``): its
description, its metrics, its binds, client changes, replies for its binds and, on the embedded
queue, the MOs it owns.

Start order matters: the journal, the tokens (``edges.tokens``) and the registry first; then the
worker socket and recovery (the mode's) before any source can deliver; then the binds, the node's place
among the nodes and the dispatcher. The API starts serving after :meth:`Gateway.start` returns. Stop
goes the other way, letting callbacks and reply handovers in flight finish for a few seconds.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client import generate_latest

from mogateway import __version__
from mogateway.config import Settings
from mogateway.config.settings import media_url_keys
from mogateway.config.smpp import BindConfig
from mogateway.core.media_url import signed_url
from mogateway.core.ports import Journal, MessageRecord, NodeInfo, ReplyChannel
from mogateway.edges.configured_journal import load_tokens, open_journal, sealer_for
from mogateway.edges.http1 import Http1Client
from mogateway.edges.numbering_settings import sender_resolver_for
from mogateway.edges.replies import HttpReplyChannel, LogReplyChannel
from mogateway.edges.smpp.binds import SmppBinds, start_binds
from mogateway.edges.whatsapp.graph_sender import register_metrics as register_graph_metrics
from mogateway.edges.whatsapp.media_store import MediaStore
from mogateway.edges.whatsapp.replies import WhatsAppReplyChannel
from mogateway.edges.workers.metrics import merge_expositions
from mogateway.edges.workers.siblings import Siblings, worker_name
from mogateway.edges.workers.socket import WorkerSocket
from mogateway.modes import Cluster, Mode, WorkerSeat, choose_mode
from mogateway.service.admission import Admission
from mogateway.service.dispatcher import Dispatcher
from mogateway.service.dlt import DltGate
from mogateway.service.intake import Intake
from mogateway.service.journal_health import JournalHealth
from mogateway.service.metrics import Metrics
from mogateway.service.readiness import Reason, readiness
from mogateway.service.registry import Registry
from mogateway.service.replay import replay
from mogateway.service.replier import Replier, ReplyRouter
from mogateway.service.retention import Retention
from mogateway.service.stats import StatsService

if TYPE_CHECKING:  # imported where they are used: a deployment without them does not load their stacks
    import aiohttp

    from mogateway.edges.whatsapp.media import GraphMedia

__all__ = [
    "Cluster",
    "Gateway",
    "WorkerSeat",
    "graph_url_in_clear",
    "load_tokens",
    "node_name",
    "open_journal",
    "sealer_for",
]

log = logging.getLogger("mogateway")


def node_name(settings: Settings) -> str:
    """The configured node name, else ``<host name>-<port>`` (unique per machine and port)."""
    return settings.node_name or f"{socket.gethostname()}-{settings.port}"


def _sqlite_path(database: str) -> str | None:
    """The SQLite journal's file (None: PostgreSQL, or a journal in memory)."""
    if database.startswith(("postgresql://", "postgres://")):
        return None
    path = database.removeprefix("sqlite://")
    return None if path == ":memory:" or path.startswith("file:") else path


class Gateway:
    """One gateway node (see the module docstring)."""

    def __init__(self, settings: Settings, seat: WorkerSeat | None = None) -> None:
        self.settings = settings
        self.seat = seat
        self.name = node_name(settings) if seat is None else worker_name(node_name(settings), seat.index)
        self.metrics = Metrics()
        lock = str(Path(seat.directory) / "journal.lock") if seat is not None else None
        self.journal: Journal = open_journal(settings, lock_path=lock)
        # The journal's write errors and free-space guard, shared by intake, dispatcher, replier and
        # stats; readiness (/readyz) reads it.
        self.journal_health = JournalHealth(
            self.metrics,
            path=_sqlite_path(settings.database),
            min_free_bytes=settings.journal_min_free_bytes,
            min_free_percent=settings.journal_min_free_percent,
        )
        self.registry = Registry(self.journal)
        self.siblings: Siblings | None = None
        if seat is not None:
            self.siblings = Siblings(seat.directory, seat.index, seat.count, on_lost=self._sibling_lost)
        self.mode: Mode = choose_mode(settings, seat, self.siblings, self.registry.route)
        self.queue = self.mode.queue
        self.intake = Intake(
            self.journal,
            self.queue,
            sender_resolver_for(settings),
            self.metrics,
            owner_of=self.mode.owner_of,
            me=self.mode.me,
            health=self.journal_health,
        )
        self.admin_token = ""
        self.ingest_token = ""
        self.started_at = 0.0
        self.smpp: SmppBinds | None = None
        self.whatsapp: WhatsAppReplyChannel | None = None  # with a [whatsapp] table (api.whatsapp)
        self.whatsapp_media: GraphMedia | None = None  # with a [whatsapp] table (api.whatsapp_media)
        self.whatsapp_media_store: MediaStore | None = None  # with whatsapp_media_store set
        # The keys of signed media URLs (core.media_url), the signing one first.
        self.media_url_keys: list[bytes] = media_url_keys(settings)
        self.dispatcher: Dispatcher | None = None
        self.replies: ReplyRouter | None = None
        self.replier: Replier | None = None
        self.cluster: Cluster | None = None
        self.stats: StatsService | None = None
        self.retention: Retention | None = None  # with message_retention_days, on one process
        self.admission: Admission | None = None  # webhooks refused (503) while this worker holds too much
        self._socket: WorkerSocket | None = None
        self._http: Http1Client | None = None
        self._reply_session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    # ------------------------------------------------------------------ lifecycle

    def _held(self) -> int:
        """Messages this worker holds and has not answered yet (``service.admission``)."""
        held = self.queue.lag()
        if self.dispatcher is not None:
            held += self.dispatcher.waiting() + sum(self.dispatcher.inflight().values())
        if self.replier is not None:
            held += self.replier.in_progress()
        return held

    async def start(self) -> None:
        s = self.settings
        mode = self.mode
        await self.journal.open()
        await self._load_tokens()
        await self.registry.load()
        await self.queue.start()
        self._http = Http1Client(allow_private=s.allow_private_callbacks)
        self.replies = ReplyRouter(self._default_reply_channel())
        if s.whatsapp is not None:  # replies to MOs of origin whatsapp:<phone_number_id>
            self.whatsapp = WhatsAppReplyChannel(s.whatsapp)
            register_graph_metrics(self.whatsapp.sender, self.metrics.registry)
            self.replies.register("whatsapp", self.whatsapp)
            from mogateway.edges.whatsapp.media import GraphMedia  # aiohttp: only with [whatsapp]

            self.whatsapp_media = GraphMedia(s.whatsapp.graph_url, s.whatsapp.api_version)
            if s.whatsapp_media_store is not None:
                self.whatsapp_media_store = MediaStore(s.whatsapp_media_store)
            self._warn_secrets_in_clear()
            self._warn_graph_url_in_clear()
        self.replier = Replier(
            self.journal,
            self.replies,
            self.metrics,
            validity_s=s.reply_validity_s,
            at_least_once=s.reply_at_least_once,
            touch_s=mode.touch_s(),
            clients=self.registry.get,
            dlt=DltGate(s.dlt_var_max_chars, self.metrics.dlt_replies),
            health=self.journal_health,
        )
        self.dispatcher = Dispatcher(
            queue=self.queue,
            store=self.journal,
            registry=self.registry,
            replier=self.replier,
            client=self._http,
            metrics=self.metrics,
            max_inflight=s.max_inflight,
            reply_max_parts=s.reply_max_parts,
            allow_private=s.allow_private_callbacks,
            lane_cap=mode.lane_cap(),
            health=self.journal_health,
            media_url=self._media_url if s.public_url and s.whatsapp and self.media_url_keys else None,
        )
        self.admission = Admission(
            s.whatsapp.max_pending_webhook_messages if s.whatsapp is not None else 0,
            self._held,
            self.metrics,
        )
        if self.siblings is not None:
            await self._listen_to_siblings()  # before recovery: see service.recovery
        for loop in await mode.recover(self.journal, [self.replier]):  # before any source can deliver
            self._tasks.append(asyncio.create_task(loop, name=f"{mode.name}-recovery"))
        binds = self._my_binds()
        if binds:
            self.smpp = await start_binds(
                s.smpp.model_copy(update={"binds": binds}),
                intake=self.intake,
                receipts=self.journal,
                metrics=self.metrics.registry,
            )
            self.replies.register("smpp", self.smpp.reply_channel)
        local = self.smpp.reply_channel if self.smpp is not None else None
        self.cluster = await mode.join(self.name, self.describe, self.journal, self.replies, local)
        self.stats = StatsService(
            self,
            self.journal,
            self.name,
            flush_s=s.stats_flush_s,
            retention_days=s.stats_retention_days,
            shared=self.seat is not None or mode.shared_stats,
            health=self.journal_health,
        )
        await self.stats.seed()
        self._tasks.append(asyncio.create_task(self.stats.run_forever(), name="stats"))
        if s.message_retention_days > 0 and (self.seat is None or self.seat.index == 0):
            # One sweeper per journal: the first worker on SQLite; a cluster's nodes take turns
            # (Journal.sweeping, an advisory lock). service/retention.py.
            self.retention = Retention(
                self.journal,
                self.metrics,
                days=s.message_retention_days,
                export_dir=s.retention_export_dir,
                health=self.journal_health,
                seen_window_s=s.whatsapp.max_message_age_s if s.whatsapp else 8 * 86400,
            )
            self._tasks.append(asyncio.create_task(self.retention.run_forever(), name="retention"))
        if self.whatsapp_media_store is not None and (self.seat is None or self.seat.index == 0):
            # The kept media follow the journal's retention (edges.whatsapp.media_store).
            self._tasks.append(asyncio.create_task(self._sweep_media_forever(), name="media-store-sweep"))
        self.dispatcher.start()
        self._tasks.append(asyncio.create_task(self.registry.refresh_forever(), name="registry-refresh"))
        self.started_at = time.time()

    def _my_binds(self) -> list[BindConfig]:
        """The binds this node holds: all of them, or a worker's share (``core.workers``)."""
        binds = list(self.settings.smpp.binds)
        seat = self.seat
        if seat is None:
            return binds
        plan = seat.plan(self.settings)
        return [b for j, b in enumerate(binds) if plan.bind_worker(j) == seat.index]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.smpp is not None:
            await self.smpp.stop()
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if self.replier is not None:
            await self.replier.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self._socket is not None:
            await self._socket.stop()
        if self.siblings is not None:
            await self.siblings.stop()
        if self._http is not None:
            await self._http.close()
        if self._reply_session is not None:
            await self._reply_session.close()
        if self.whatsapp is not None:
            await self.whatsapp.aclose()
        if self.whatsapp_media is not None:
            await self.whatsapp_media.aclose()
        await self.queue.close()
        await self.journal.close()

    async def _sweep_media_forever(self, every_s: float = 300.0) -> None:
        """Remove the kept media whose message retention deleted, at start and every ``every_s``."""
        store = self.whatsapp_media_store
        assert store is not None
        journal = self.journal

        async def exists(message_id: str) -> bool:
            return await journal.get(message_id) is not None

        while True:
            try:
                removed = await store.sweep(exists)
                if removed:
                    log.info("WhatsApp media store: removed %d files (retention)", removed)
            except Exception as exc:
                log.warning("WhatsApp media store sweep failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(every_s)

    def _media_url(self, message_id: str, client_id: str, now: float) -> str:
        """The signed URL of a message's media for a client (core.media_url), valid
        ``whatsapp_media_url_ttl_s`` from ``now``."""
        s = self.settings
        exp = int(now) + s.whatsapp_media_url_ttl_s
        return signed_url(s.public_url or "", self.media_url_keys[0], message_id, client_id, exp)

    def _warn_secrets_in_clear(self) -> None:
        """Once per gateway (the first worker says it): WhatsApp secrets written in clear although a
        key could seal them (config.sealed)."""
        wa = self.settings.whatsapp
        if wa is None or self.settings.secret_key is None or (self.seat is not None and self.seat.index > 0):
            return
        clear = [name for name, (_, how) in wa.stored.items() if how == "clear"]
        if clear:
            log.warning(
                "%s stored in clear although secret_key is set: seal %s with "
                "`mogateway secrets seal --context <setting>` (docs/configuration.md)",
                ", ".join(clear),
                "it" if len(clear) == 1 else "them",
            )

    def _warn_graph_url_in_clear(self) -> None:
        """Once per gateway (the first worker says it): a ``graph_url`` of ``http://`` to a host that is
        not loopback sends every reply's text and the number's access token in clear. Loopback (a fake
        Graph API for rehearsals and tests, ``127.0.0.0/8``, ``::1``, ``localhost``) is not warned of."""
        wa = self.settings.whatsapp
        if wa is None or (self.seat is not None and self.seat.index > 0):
            return
        if graph_url_in_clear(wa.graph_url):
            log.warning(
                "whatsapp.graph_url %s is http:// to a host that is not loopback: every WhatsApp reply's "
                "text and its number's access token cross the network in clear; use https:// "
                "(the default, https://graph.facebook.com)",
                wa.graph_url,
            )

    def _default_reply_channel(self) -> ReplyChannel:
        s = self.settings
        if s.reply_channel == "http":
            if not s.reply_http_url:
                raise RuntimeError("reply_channel = http needs reply_http_url")
            import aiohttp

            self._reply_session = aiohttp.ClientSession()
            return HttpReplyChannel(self._reply_session, s.reply_http_url)
        return LogReplyChannel()

    # ------------------------------------------------------------------ sibling workers

    async def _listen_to_siblings(self) -> None:
        """Answer the other workers on this worker's socket (``edges.workers.socket``), and connect to
        theirs."""
        assert self.seat is not None and self.siblings is not None
        self._socket = WorkerSocket(
            self.seat.directory,
            self.seat.index,
            name=self.name,
            describe=self.describe,
            metrics=self.local_metrics,
            binds=lambda: self.smpp,
            live_binds=lambda: self.stats.binds() if self.stats is not None else [],
            reload_clients=self.registry.reload,
            dispatch=self.mode.dispatch_handler(),
        )
        await self._socket.start()
        await self.siblings.start()
        self.registry.on_change = self._tell_clients_changed

    def _sibling_lost(self, index: int) -> None:
        self.mode.sibling_lost()

    async def _tell_clients_changed(self) -> None:
        if self.siblings is not None:
            await self.siblings.ask_all("clients")

    async def live_binds(self) -> list[dict[str, Any]]:
        """The binds this gateway holds with their live figures (the console's Binds page); with
        workers, each worker's, asked on their sockets: a page served by any worker shows them all."""
        rows = self.stats.binds() if self.stats is not None else []
        if self.siblings is not None:
            for _, theirs in sorted((await self.siblings.ask_all("live_binds")).items()):
                rows.extend(theirs)
        return rows

    # ------------------------------------------------------------------ what the API shows

    def local_metrics(self) -> bytes:
        """This process's Prometheus exposition."""
        dispatcher = self.dispatcher
        self.metrics.queue_lag.set(self.queue.lag() + (dispatcher.waiting() if dispatcher else 0))
        self.metrics.ready.set(0.0 if self.readiness() else 1.0)
        return generate_latest(self.metrics.registry)

    async def metrics_exposition(self) -> bytes:
        """The exposition of the whole gateway: with workers, every worker's, labelled ``worker``."""
        if self.siblings is None or self.seat is None:
            return self.local_metrics()
        texts: dict[int, str] = await self.siblings.ask_all("metrics")
        texts[self.seat.index] = self.local_metrics().decode()
        return merge_expositions(texts)

    async def binds_status(self) -> list[dict[str, Any]]:
        """Every bind of the gateway (with workers: each worker's, with the node that holds it)."""
        rows = [{**row, "node": self.name} for row in (self.smpp.status() if self.smpp is not None else [])]
        if self.siblings is not None and self.seat is not None:
            answers = await self.siblings.ask_all("binds")
            base = node_name(self.settings)
            for index, theirs in sorted(answers.items()):
                rows.extend({**row, "node": worker_name(base, index)} for row in theirs)
            order = {b.name: j for j, b in enumerate(self.settings.smpp.binds)}
            rows.sort(key=lambda row: order.get(str(row.get("name")), len(order)))
        return rows

    def describe(self) -> NodeInfo:
        """This node as its heartbeat describes it."""
        return NodeInfo(
            name=self.name,
            address=f"http://{self.settings.host}:{self.settings.port}",
            version=__version__,
            started_at=self.started_at or time.time(),
            seen_at=time.time(),
            queue_lag=self.queue.lag(),
            held=self.mode.held(),
            waiting=self.dispatcher.waiting() if self.dispatcher is not None else 0,
            binds=self.smpp.heartbeat_binds() if self.smpp is not None else [],
        )

    # ------------------------------------------------------------------ tokens

    async def _load_tokens(self) -> None:
        self.admin_token, self.ingest_token = await load_tokens(self.settings, self.journal)

    # ------------------------------------------------------------------ operations

    async def replay(self, message_id: str) -> MessageRecord | None:
        """Queue a finished message for its callback again (``service.replay``)."""
        return await replay(self.journal, self.queue, message_id, time.time)

    def readiness(self) -> list[Reason]:
        """Why this process does not take traffic now (empty: ready); see ``service.readiness``."""
        binds = self.smpp.status() if self.smpp is not None else None
        return readiness(self.journal_health, binds)

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "node": self.name if self.seat is not None else self.settings.node_name or None,
            "uptime_s": round(time.time() - self.started_at, 1) if self.started_at else 0,
            "queue_lag": self.queue.lag(),
            "waiting": self.dispatcher.waiting() if self.dispatcher else 0,
            "replies_waiting": self.replier.waiting() if self.replier else 0,
        }


def graph_url_in_clear(url: str) -> bool:
    """Whether ``url`` is ``http://`` to a host that is not loopback."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        return False
    host = (parts.hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name: it may resolve anywhere
