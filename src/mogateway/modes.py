"""How a node runs, chosen once from the settings (:func:`choose_mode`), and the parts that differ
between the ways it can run, built by one small factory per mode. ``node.py`` wires what a mode builds
like any other part and never asks which mode it is in.

=================  ==============================  ==================================================
mode               chosen when                     what differs
=================  ==============================  ==================================================
SingleProcess      ``queue = "local"``, no seat    in-process queue; recovery from the journal at
                   (``serve --workers 1``)         start; a directory of one
WorkerProcesses    ``queue = "local"`` and a seat  each worker's in-process queue, MOs sent to the
                   (``serve``, 2+ workers)         worker that owns them (``core.workers``), a lane
                                                   cap split between workers; recovery of its own
                                                   MOs and an orphan sweep; the workers' directory,
                                                   replies routed to a sibling's bind over its socket
ClusterNode        ``queue = "nats://…"``          JetStream shared by every node (and every worker);
                   (with or without a seat)        the sweeper instead of recovery; heartbeats in a
                                                   KV bucket, replies routed to another node's bind
                                                   over NATS
=================  ==============================  ==================================================

A worker seat adds the same things in every mode (its socket and its siblings, see ``node.py``).

A new mode is one more class here with the same members as :class:`Mode`, and one more line in
:func:`choose_mode` (see ``docs/architecture.md``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

from mogateway.config import Settings
from mogateway.core.clients import ClientRecord
from mogateway.core.immutable import immutable
from mogateway.core.message import Message
from mogateway.core.ports import Journal, NodeDirectory, NodeInfo, ReplyChannel, WorkQueue
from mogateway.core.workers import WorkerPlan
from mogateway.edges.cluster.directory import KvNodeDirectory, SingleNodeDirectory
from mogateway.edges.cluster.replies import ClusterReplyChannel, NatsRequests, ReplyResponder
from mogateway.edges.ipc import Handler
from mogateway.edges.queue.local import LocalQueue
from mogateway.edges.workers.owners import owner_rule
from mogateway.edges.workers.routed_queue import RoutedQueue
from mogateway.edges.workers.siblings import Siblings, WorkerDirectory, WorkerRequests
from mogateway.service.orphans import Holder, OrphanSweep
from mogateway.service.recovery import recover
from mogateway.service.replier import ReplyRouter
from mogateway.service.sweeper import Sweeper

if TYPE_CHECKING:  # imported by the cluster mode only: nats-py (and the aiohttp it loads) otherwise not
    from mogateway.edges.queue.jetstream import JetStreamQueue

__all__ = [
    "Cluster",
    "ClusterNode",
    "Mode",
    "SingleProcess",
    "WorkerProcesses",
    "WorkerSeat",
    "choose_mode",
    "owner_rule",
]

#: A background loop a mode asks the node to run until it stops.
Loop = Coroutine[Any, Any, None]


@immutable
class WorkerSeat:
    """Which worker process of the gateway this node is (``mogateway.cli.supervisor`` starts them)."""

    index: int
    count: int
    #: Where the workers' sockets and the journal's write lock are.
    directory: str

    def plan(self, settings: Settings) -> WorkerPlan:
        return WorkerPlan(self.count, len(settings.smpp.binds))


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


class Mode:
    """The parts that differ between the ways a node runs; the defaults are one process's."""

    #: The mode's name, as the log and ``describe`` say it.
    name: ClassVar[str]
    #: The work queue intake puts MOs on and the dispatcher takes them from.
    queue: WorkQueue
    #: Which worker owns an MO, and this worker's index: intake records the owner (None: no owners).
    owner_of: Callable[[Message], int] | None = None
    me: int | None = None
    #: Whether other processes write figures to the same journal (``service.stats``).
    shared_stats: ClassVar[bool] = False

    def touch_s(self) -> float:
        """How often the replier tells the queue it still holds an answered MO (0: never needed).
        Asked once the queue has started."""
        return 0.0

    def lane_cap(self) -> Callable[[ClientRecord], int] | None:
        """This node's share of a client's concurrency (None: all of it)."""
        return None

    def dispatch_handler(self) -> Handler | None:
        """What answers the siblings' dispatch hints on this worker's socket (None: no hints)."""
        return None

    def held(self) -> int:
        """MOs this node holds for a shared queue (its heartbeat says so)."""
        return 0

    async def recover(self, journal: Journal, holders: list[Holder]) -> list[Loop]:
        """Put what the journal left unfinished back on the queue, before any source can deliver; the
        loops that keep doing so while the node runs. ``holders``: what else holds MOs (the replier)."""
        await recover(journal, self.queue)
        return []

    def sibling_lost(self) -> None:
        """A sibling worker's connection ended."""

    async def join(
        self,
        name: str,
        describe: Callable[[], NodeInfo],
        journal: Journal,
        replies: ReplyRouter,
        local: ReplyChannel | None,
    ) -> Cluster:
        """This node's place among the nodes. Runs after the binds start (``local``: the reply channel
        over this node's own binds) and before the dispatcher does."""
        return Cluster(name, SingleNodeDirectory(describe))


class SingleProcess(Mode):
    """One process on the embedded queue: everything here, nothing shared."""

    name = "single"

    def __init__(self) -> None:
        self.queue = LocalQueue()


class WorkerProcesses(Mode):
    """One of several worker processes on the embedded queue: each dispatches the MOs it owns."""

    name = "workers"
    shared_stats = True

    def __init__(
        self,
        settings: Settings,
        seat: WorkerSeat,
        siblings: Siblings,
        route: Callable[[str, str], ClientRecord | None],
    ) -> None:
        self._plan = seat.plan(settings)
        self._seat = seat
        self._siblings = siblings
        self.owner_of = owner_rule(self._plan, settings, route)
        self.me = seat.index
        self.routed = RoutedQueue(LocalQueue(), siblings, self.owner_of)
        self.queue = self.routed
        self._orphans: OrphanSweep | None = None

    def lane_cap(self) -> Callable[[ClientRecord], int] | None:
        return functools.partial(_share_of_cap, self._plan, self._seat.index)

    def dispatch_handler(self) -> Handler | None:
        return self.routed.accept

    async def recover(self, journal: Journal, holders: list[Holder]) -> list[Loop]:
        local, me = self.routed.local, self._seat.index
        await recover(journal, local, owner=me)
        self._orphans = OrphanSweep(journal, local, [self.routed, *holders], owner=me)
        return [self._orphans.run_forever()]

    def sibling_lost(self) -> None:
        if self._orphans is not None:
            self._orphans.sibling_lost()

    async def join(
        self,
        name: str,
        describe: Callable[[], NodeInfo],
        journal: Journal,
        replies: ReplyRouter,
        local: ReplyChannel | None,
    ) -> Cluster:
        directory = WorkerDirectory(self._siblings, describe)
        to_worker = WorkerRequests(self._siblings)
        replies.register("smpp", ClusterReplyChannel(local, directory, to_worker, me=name))
        return Cluster(name, directory)


def _share_of_cap(plan: WorkerPlan, worker: int, client: ClientRecord) -> int:
    return plan.lane_cap(client, worker)


class ClusterNode(Mode):
    """A node on NATS JetStream, one queue shared by every node (and every worker process of each)."""

    name = "cluster"
    shared_stats = True

    def __init__(self, settings: Settings) -> None:
        from mogateway.edges.queue.jetstream import JetStreamQueue

        self.jetstream: JetStreamQueue = JetStreamQueue(settings.queue, settings.nats)
        self.queue = self.jetstream

    def touch_s(self) -> float:
        # The sweeper republishes answered MOs unchanged for sweep_after_s: the replier touches those
        # it holds well within that.
        return self.jetstream.settings.sweep_after_s / 3

    def held(self) -> int:
        return self.jetstream.held()

    async def recover(self, journal: Journal, holders: list[Holder]) -> list[Loop]:
        return []  # the stream keeps what is unfinished; the sweeper (see join) what never reached it

    async def join(
        self,
        name: str,
        describe: Callable[[], NodeInfo],
        journal: Journal,
        replies: ReplyRouter,
        local: ReplyChannel | None,
    ) -> Cluster:
        """Heartbeats in a KV bucket, the responder for replies other nodes route here, the "smpp" reply
        channel that routes to them, and the sweeper."""
        queue = self.jetstream
        s = queue.settings
        kv = KvNodeDirectory(
            queue.js, describe, bucket=s.nodes_bucket, heartbeat_s=s.heartbeat_s, ttl_s=s.node_ttl_s
        )
        await kv.start()
        cluster = Cluster(name, kv)
        if local is not None:
            cluster.responder = ReplyResponder(queue.nc, local, me=name, subject_prefix=s.reply_subject)
            await cluster.responder.start()
        requests = NatsRequests(queue.nc, subject_prefix=s.reply_subject)
        replies.register("smpp", ClusterReplyChannel(local, kv, requests, me=name))
        cluster.sweeper = Sweeper(
            journal,
            queue,
            after_s=s.sweep_after_s,
            interval_s=s.sweep_interval_s,
            duplicate_window_s=s.duplicate_window_s,
            page=s.sweep_page,
        )
        cluster.run(cluster.sweeper.run_forever(), "sweeper")
        return cluster


def choose_mode(
    settings: Settings,
    seat: WorkerSeat | None,
    siblings: Siblings | None,
    route: Callable[[str, str], ClientRecord | None],
) -> Mode:
    """The mode the settings and the seat name: a shared queue makes a cluster node (a seat or not);
    on the embedded queue, a seat makes one of several workers, and no seat one process."""
    if settings.queue != "local":
        return ClusterNode(settings)
    if seat is not None:
        assert siblings is not None, "a worker seat comes with its siblings"
        return WorkerProcesses(settings, seat, siblings, route)
    return SingleProcess()
