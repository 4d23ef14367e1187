"""One gateway node, wired: the only module that knows every part and starts and stops them in order.

A node is: the journal (SQLite or PostgreSQL) and the work queue (in-process or NATS JetStream) it was
configured with; intake, the client registry, the dispatcher and the replier over them; the reply
channels (log or HTTP, and SMPP when binds are configured); its place in a cluster (node directory,
sweeper, replies for other nodes' binds); the traffic figures. Everything else receives what it needs
through a port (``core.ports``) and never imports this module.

A node may be one of several worker processes of one gateway (``mogateway serve --workers N``, see
``mogateway.cli.supervisor``): it then holds its share of the binds, and on the embedded default dispatches
the MOs it owns (``core.workers``), tells each sibling about the MOs stored for it, and answers its
siblings over its socket (``edges.workers``): dispatch hints, reply requests for its binds, its
description, its metrics, client changes.

Start order matters: the journal, the tokens and the registry first; then recovery (on the embedded
default) before any source can deliver; then the binds, the cluster and the dispatcher. The API starts
serving after :meth:`Gateway.start` returns. Stop goes the other way, letting callbacks and reply
handovers in flight finish for a few seconds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import generate_latest

from mogateway import __version__
from mogateway.config import ConfigError, Settings
from mogateway.core.clients import ClientRecord
from mogateway.core.immutable import immutable
from mogateway.core.message import Message
from mogateway.core.numbering import NumberingDataError, SenderResolver
from mogateway.core.ports import Journal, MessageRecord, NodeDirectory, NodeInfo, ReplyChannel, WorkQueue
from mogateway.core.workers import WorkerPlan
from mogateway.edges.cluster.directory import KvNodeDirectory, SingleNodeDirectory
from mogateway.edges.cluster.replies import ClusterReplyChannel, NatsRequests, ReplyResponder, answer_reply
from mogateway.edges.http1 import Http1Client
from mogateway.edges.ipc import IpcServer, socket_path
from mogateway.edges.numbering_files import sender_resolver
from mogateway.edges.queue.jetstream import JetStreamQueue
from mogateway.edges.queue.local import LocalQueue
from mogateway.edges.replies import HttpReplyChannel, LogReplyChannel
from mogateway.edges.smpp.config import BindConfig
from mogateway.edges.smpp.service import SmppService, start_smpp
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.edges.storage.sealing import Sealer
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.edges.tokenfile import tokens_file, write_tokens_file
from mogateway.edges.workers.metrics import merge_expositions
from mogateway.edges.workers.routed_queue import DISPATCH, RoutedQueue
from mogateway.edges.workers.siblings import Siblings, WorkerDirectory, WorkerRequests, worker_name
from mogateway.service.dispatcher import Dispatcher
from mogateway.service.dlt import DltGate
from mogateway.service.intake import Intake
from mogateway.service.metrics import Metrics
from mogateway.service.orphans import OrphanSweep
from mogateway.service.recovery import recover
from mogateway.service.registry import Registry
from mogateway.service.replay import replay
from mogateway.service.replier import Replier, ReplyRouter
from mogateway.service.stats import StatsService
from mogateway.service.sweeper import Sweeper

__all__ = [
    "Cluster",
    "Gateway",
    "WorkerSeat",
    "load_tokens",
    "node_name",
    "open_journal",
    "open_queue",
    "sealer_for",
]

log = logging.getLogger("mogateway")


def open_journal(
    settings: Settings, sealer: Sealer | None = None, *, lock_path: str | None = None
) -> Journal:
    """The journal the ``database`` setting names: a SQLite path, or a PostgreSQL URL; client secrets
    sealed with ``secret_key`` when it is set (or by ``sealer``). ``lock_path``: the lock the worker
    processes of one gateway take turns on to write a SQLite file."""
    url = settings.database
    sealer = sealer or sealer_for(settings)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresJournal(url, sealer=sealer)
    if url.startswith("sqlite://"):
        url = url.removeprefix("sqlite://")
    return SqliteJournal(url, synchronous=settings.journal_sync, sealer=sealer, lock_path=lock_path)


def sealer_for(settings: Settings) -> Sealer:
    """The sealer of client secrets the ``secret_key`` and ``old_secret_key`` settings make."""
    key, old = settings.secret_key, settings.old_secret_key
    return Sealer.from_settings_values(
        key.get_secret_value() if key else None, old.get_secret_value() if old else None
    )


def open_queue(settings: Settings) -> WorkQueue:
    """The work queue the ``queue`` setting names: ``local``, or a NATS URL."""
    if settings.queue == "local":
        return LocalQueue()
    return JetStreamQueue(settings.queue, settings.nats)


def node_name(settings: Settings) -> str:
    """The configured node name, else ``<host name>-<port>`` (unique per machine and port)."""
    return settings.node_name or f"{socket.gethostname()}-{settings.port}"


def _sender_resolver(settings: Settings) -> SenderResolver:
    """Operator/circle resolution with the operator's own tables, if configured.

    A bad file raises ConfigError naming the setting and the file's line.
    """
    try:
        return sender_resolver(settings.series_csv, settings.ported_csv)
    except NumberingDataError as exc:
        text = str(exc)
        setting = "series_csv" if settings.series_csv and str(settings.series_csv) in text else "ported_csv"
        raise ConfigError(f"invalid setting {setting} (MOGATEWAY_{setting.upper()}): {text}") from None


async def load_tokens(settings: Settings, journal: Journal) -> tuple[str, str]:
    """The admin and ingest tokens: configured ones win; otherwise generated once and kept in the journal.

    Generated tokens never go to stderr (a service manager keeps it as the log): they are written to
    the tokens file (mode 0600, see edges.tokenfile) and only its path is logged. On an interactive
    terminal they are printed as well, for the person who just started the gateway.
    """
    generated: list[tuple[str, str]] = []
    values: list[str] = []
    for name in ("admin", "ingest"):
        configured = getattr(settings, f"{name}_token")
        if configured is not None:
            value = configured.get_secret_value()
        else:
            existing = await journal.get_setting(f"{name}_token")
            if existing is None:
                value = await journal.set_setting_if_absent(f"{name}_token", secrets.token_urlsafe(32))
                generated.append((name, value))
            else:
                value = existing
        values.append(value)
    if generated:
        what = " and ".join(name for name, _ in generated) + (" tokens" if len(generated) > 1 else " token")
        path = tokens_file(settings)
        try:
            write_tokens_file(path, generated)
        except OSError as exc:
            log.warning("generated the %s (kept in the journal); could not write %s: %s", what, path, exc)
        else:
            log.warning("generated the %s: written to %s (readable by its owner only)", what, path.resolve())
        if sys.stderr.isatty():
            for name, value in generated:
                print(f"  {name} token: {value}", file=sys.stderr)
            sys.stderr.flush()
    return values[0], values[1]


def owner_rule(
    plan: WorkerPlan, settings: Settings, route: Callable[[str, str], ClientRecord | None]
) -> Callable[[Message], int]:
    """The worker that owns an MO (``core.workers``), its client found by ``route(shortcode, text)`` and
    its bind by its origin (``smpp:<bind name>``, in the order of the settings)."""
    bind_at = {f"smpp:{bind.name}": j for j, bind in enumerate(settings.smpp.binds)}

    def owner_of(message: Message) -> int:
        client = route(message.shortcode, message.text) if message.accepted else None
        return plan.owner_of(message.id, client, bind_at.get(message.origin))

    return owner_of


def _share_of_cap(plan: WorkerPlan, worker: int, client: ClientRecord) -> int:
    return plan.lane_cap(client, worker)


class Cluster:
    """This node's place among the nodes: its directory entry, and with JetStream the sweeper and the
    responder that sends replies other nodes route to its binds."""

    def __init__(self, name: str, directory: NodeDirectory) -> None:
        self.name = name
        self.directory = directory
        self.responder: ReplyResponder | None = None
        self.sweeper: Sweeper | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    def run(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.responder is not None:
            await self.responder.stop()
        await self.directory.stop()


@immutable
class WorkerSeat:
    """Which worker process of the gateway this node is (``mogateway.cli.supervisor`` starts them)."""

    index: int
    count: int
    #: Where the workers' sockets and the journal's write lock are.
    directory: str

    def plan(self, settings: Settings) -> WorkerPlan:
        return WorkerPlan(self.count, len(settings.smpp.binds))


class Gateway:
    """One gateway node (see the module docstring)."""

    def __init__(self, settings: Settings, seat: WorkerSeat | None = None) -> None:
        self.settings = settings
        self.seat = seat
        self.name = node_name(settings) if seat is None else worker_name(node_name(settings), seat.index)
        self.metrics = Metrics()
        lock = str(Path(seat.directory) / "journal.lock") if seat is not None else None
        self.journal: Journal = open_journal(settings, lock_path=lock)
        self.registry = Registry(self.journal)
        self.siblings: Siblings | None = None
        self.orphans: OrphanSweep | None = None
        self._ipc: IpcServer | None = None
        owner_of = None
        if seat is not None:
            siblings = Siblings(seat.directory, seat.index, seat.count, on_lost=self._sibling_lost)
            self.siblings = siblings
        if seat is not None and settings.queue == "local":
            owner_of = self._owner_rule(seat.plan(settings))
            self.queue: WorkQueue = RoutedQueue(LocalQueue(), siblings, owner_of)
        else:
            self.queue = open_queue(settings)
        self.intake = Intake(
            self.journal,
            self.queue,
            _sender_resolver(settings),
            self.metrics,
            owner_of=owner_of,
            me=seat.index if owner_of is not None and seat is not None else None,
        )
        self.admin_token = ""
        self.ingest_token = ""
        self.started_at = 0.0
        self.smpp: SmppService | None = None
        self.dispatcher: Dispatcher | None = None
        self.replies: ReplyRouter | None = None
        self.replier: Replier | None = None
        self.cluster: Cluster | None = None
        self.stats: StatsService | None = None
        self._http: Http1Client | None = None
        self._reply_session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    def _owner_rule(self, plan: WorkerPlan) -> Callable[[Message], int]:
        return owner_rule(plan, self.settings, self.registry.route)

    @property
    def embedded_workers(self) -> bool:
        """One of several workers on the embedded default (each dispatches the MOs it owns)."""
        return isinstance(self.queue, RoutedQueue)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        s = self.settings
        seat = self.seat
        await self.journal.open()
        await self._load_tokens()
        await self.registry.load()
        await self.queue.start()
        self._http = Http1Client(allow_private=s.allow_private_callbacks)
        self.replies = ReplyRouter(self._default_reply_channel())
        # With a shared queue the sweeper republishes answered MOs unchanged for sweep_after_s: the
        # replier touches those it holds well within that (a single node has no sweeper).
        queue = self.queue
        touch_s = queue.settings.sweep_after_s / 3 if isinstance(queue, JetStreamQueue) else 0.0
        self.replier = Replier(
            self.journal,
            self.replies,
            self.metrics,
            validity_s=s.reply_validity_s,
            at_least_once=s.reply_at_least_once,
            touch_s=touch_s,
            clients=self.registry.get,
            dlt=DltGate(s.dlt_var_max_chars, self.metrics.dlt_replies),
        )
        lane_cap = None
        if seat is not None and isinstance(queue, RoutedQueue):
            lane_cap = functools.partial(_share_of_cap, seat.plan(s), seat.index)
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
            lane_cap=lane_cap,
        )
        if self.siblings is not None:
            await self._listen_to_siblings()  # before recovery: see service.recovery
        if isinstance(queue, RoutedQueue):
            assert seat is not None
            await recover(self.journal, queue.local, owner=seat.index)
            self.orphans = OrphanSweep(self.journal, queue.local, [queue, self.replier], owner=seat.index)
            self._tasks.append(asyncio.create_task(self.orphans.run_forever(), name="orphans"))
        elif isinstance(queue, LocalQueue):
            await recover(self.journal, self.queue)  # before any source can deliver
        binds = self._my_binds()
        if binds:
            self.smpp = await start_smpp(
                s.smpp.model_copy(update={"binds": binds}),
                intake=self.intake,
                receipts=self.journal,
                metrics=self.metrics.registry,
            )
            self.replies.register("smpp", self.smpp.reply_channel)
        self.cluster = await self._join_cluster()
        self.stats = StatsService(
            self,
            self.journal,
            self.name,
            flush_s=s.stats_flush_s,
            retention_days=s.stats_retention_days,
            shared=seat is not None or not isinstance(self.queue, LocalQueue),
        )
        await self.stats.seed()
        self._tasks.append(asyncio.create_task(self.stats.run_forever(), name="stats"))
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
        if self._ipc is not None:
            await self._ipc.stop()
        if self.siblings is not None:
            await self.siblings.stop()
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

    # ------------------------------------------------------------------ sibling workers

    async def _listen_to_siblings(self) -> None:
        """Answer the other workers on this worker's socket, and connect to theirs."""
        assert self.seat is not None and self.siblings is not None
        handlers: dict[str, Any] = {
            "describe": self._ipc_describe,
            "metrics": self._ipc_metrics,
            "binds": self._ipc_binds,
            "live_binds": self._ipc_live_binds,
            "clients": self._ipc_clients,
            "reply": self._ipc_reply,
        }
        if isinstance(self.queue, RoutedQueue):
            handlers[DISPATCH] = self.queue.accept
        self._ipc = IpcServer(socket_path(self.seat.directory, self.seat.index), handlers)
        await self._ipc.start()
        await self.siblings.start()
        self.registry.on_change = self._tell_clients_changed

    def _sibling_lost(self, index: int) -> None:
        if self.orphans is not None:
            self.orphans.sibling_lost()

    async def _tell_clients_changed(self) -> None:
        if self.siblings is not None:
            await self.siblings.ask_all("clients")

    async def _ipc_describe(self, _args: Any) -> dict[str, Any]:
        return asdict(self.describe())

    async def _ipc_metrics(self, _args: Any) -> str:
        return self.local_metrics().decode()

    async def _ipc_binds(self, _args: Any) -> list[dict[str, Any]]:
        return self.smpp.status() if self.smpp is not None else []

    async def _ipc_live_binds(self, _args: Any) -> list[dict[str, Any]]:
        return self.stats.binds() if self.stats is not None else []

    async def live_binds(self) -> list[dict[str, Any]]:
        """The binds this gateway holds with their live figures (the console's Binds page); with
        workers, each worker's, asked on their sockets: a page served by any worker shows them all."""
        rows = self.stats.binds() if self.stats is not None else []
        if self.siblings is not None:
            for _, theirs in sorted((await self.siblings.ask_all("live_binds")).items()):
                rows.extend(theirs)
        return rows

    async def _ipc_clients(self, _args: Any) -> bool:
        await self.registry.reload()
        return True

    async def _ipc_reply(self, request: Any) -> dict[str, Any]:
        if self.smpp is None:
            return {"error": f"worker {self.name} holds no bind", "retryable": True}
        return await answer_reply(self.smpp.reply_channel, request)

    # ------------------------------------------------------------------ what the API shows

    def local_metrics(self) -> bytes:
        """This process's Prometheus exposition."""
        dispatcher = self.dispatcher
        self.metrics.queue_lag.set(self.queue.lag() + (dispatcher.waiting() if dispatcher else 0))
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

    # ------------------------------------------------------------------ cluster

    def describe(self) -> NodeInfo:
        """This node as its heartbeat describes it."""
        queue = self.queue
        return NodeInfo(
            name=self.name,
            address=f"http://{self.settings.host}:{self.settings.port}",
            version=__version__,
            started_at=self.started_at or time.time(),
            seen_at=time.time(),
            queue_lag=queue.lag(),
            held=queue.held() if isinstance(queue, JetStreamQueue) else 0,
            waiting=self.dispatcher.waiting() if self.dispatcher is not None else 0,
            binds=self.smpp.heartbeat_binds() if self.smpp is not None else [],
        )

    async def _join_cluster(self) -> Cluster:
        """A directory of one on the embedded default — or of the workers, which route replies to each
        other's binds over their sockets; with JetStream: heartbeats in a KV bucket, the responder for
        replies other nodes route here, the "smpp" reply channel that routes to them, and the sweeper.
        Runs after the binds start and before the dispatcher does."""
        queue = self.queue
        local = self.smpp.reply_channel if self.smpp is not None else None
        if isinstance(queue, RoutedQueue):
            assert self.siblings is not None
            directory: NodeDirectory = WorkerDirectory(self.siblings, self.describe)
            if self.replies is not None:
                to_worker = WorkerRequests(self.siblings)
                self.replies.register("smpp", ClusterReplyChannel(local, directory, to_worker, me=self.name))
            return Cluster(self.name, directory)
        if not isinstance(queue, JetStreamQueue):
            return Cluster(self.name, SingleNodeDirectory(self.describe))
        s = queue.settings
        kv = KvNodeDirectory(
            queue.js, self.describe, bucket=s.nodes_bucket, heartbeat_s=s.heartbeat_s, ttl_s=s.node_ttl_s
        )
        await kv.start()
        cluster = Cluster(self.name, kv)
        if local is not None:
            cluster.responder = ReplyResponder(queue.nc, local, me=self.name, subject_prefix=s.reply_subject)
            await cluster.responder.start()
        if self.replies is not None:
            requests = NatsRequests(queue.nc, subject_prefix=s.reply_subject)
            routed = ClusterReplyChannel(local, kv, requests, me=self.name)
            self.replies.register("smpp", routed)
        cluster.sweeper = Sweeper(
            self.journal,
            queue,
            after_s=s.sweep_after_s,
            interval_s=s.sweep_interval_s,
            duplicate_window_s=s.duplicate_window_s,
            page=s.sweep_page,
        )
        cluster.run(cluster.sweeper.run_forever(), "sweeper")
        return cluster

    # ------------------------------------------------------------------ tokens

    async def _load_tokens(self) -> None:
        self.admin_token, self.ingest_token = await load_tokens(self.settings, self.journal)

    # ------------------------------------------------------------------ operations

    async def replay(self, message_id: str) -> MessageRecord | None:
        """Queue a finished message for its callback again (``service.replay``)."""
        return await replay(self.journal, self.queue, message_id, time.time)

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
