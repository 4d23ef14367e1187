"""The nodes of a gateway cluster: who is alive, which SMPP binds each holds, and replies across nodes.

Every node with the JetStream queue writes a heartbeat (its name, address, binds, queue lag) every
``heartbeat_s`` into a NATS KV bucket whose entries expire after ``node_ttl_s``: a node that stops
beating (SIGKILL, lost network) disappears from ``GET /v1/nodes`` by itself. A single node (SQLite +
in-process queue) has a directory of one.

Replies and binds: a reply to an MO that came over an SMPP bind must leave over that bind (or another
bind to the same operator), and binds are spread over nodes. :class:`ClusterReplyChannel` is the "smpp"
reply channel of a clustered node: it uses a local bind when it can, else it asks the node whose
heartbeat shows a bind that can transmit, over NATS request/reply on ``<reply_subject>.<node>``; that
node's :class:`ReplyResponder` submits through its own binds and answers with the message ids. A request
that times out has an unknown outcome (the other node may have submitted it), so it fails without retry:
a reply is never sent twice on our account.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import orjson

from mogateway.service.replies import Reply, ReplyChannel, ReplyError, ReplySubmitted

__all__ = [
    "ClusterReplyChannel",
    "KvNodeDirectory",
    "NodeDirectory",
    "NodeInfo",
    "ReplyResponder",
    "SingleNodeDirectory",
    "kv_key",
]

log = logging.getLogger(__name__)

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]")


def kv_key(name: str) -> str:
    """A node name as a KV key / subject token (only ``[A-Za-z0-9_=-]``)."""
    return _KEY_UNSAFE.sub("_", name) or "node"


@dataclass(slots=True)
class NodeInfo:
    """One node as its heartbeat describes it."""

    name: str
    address: str
    version: str
    started_at: float
    seen_at: float
    queue_lag: int = 0
    held: int = 0
    waiting: int = 0
    binds: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> NodeInfo:
        doc = orjson.loads(data)
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class NodeDirectory(Protocol):
    """Where nodes announce themselves and find each other."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def nodes(self) -> list[NodeInfo]: ...


class SingleNodeDirectory:
    """The embedded default: the only node is this one."""

    def __init__(self, describe: Callable[[], NodeInfo]) -> None:
        self._describe = describe

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def nodes(self) -> list[NodeInfo]:
        return [self._describe()]


class KvNodeDirectory:
    """Heartbeats in a NATS KV bucket with a TTL (see the module docstring)."""

    def __init__(
        self, js: Any, describe: Callable[[], NodeInfo], *, bucket: str, heartbeat_s: float, ttl_s: float
    ) -> None:
        self._js = js
        self._describe = describe
        self._bucket = bucket
        self._heartbeat_s = heartbeat_s
        self._ttl_s = ttl_s
        self._kv: Any = None
        self._task: asyncio.Task[None] | None = None
        self._key = ""

    async def start(self) -> None:
        from nats.js.api import KeyValueConfig

        self._kv = await self._js.create_key_value(
            KeyValueConfig(bucket=self._bucket, ttl=self._ttl_s, history=1)
        )
        me = self._describe()
        self._key = kv_key(me.name)
        await self._kv.put(self._key, me.to_json())
        self._task = asyncio.create_task(self._beat_forever(), name="node-heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._kv is not None:
            with contextlib.suppress(Exception):  # leaving early is a courtesy; the TTL covers it
                await self._kv.delete(self._key)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self._kv.put(self._key, self._describe().to_json())
            except Exception as exc:
                log.warning("node heartbeat failed: %s", exc)

    async def nodes(self) -> list[NodeInfo]:
        from nats.js.errors import KeyNotFoundError, NoKeysError

        try:
            keys = await self._kv.keys()
        except NoKeysError:
            return []
        found: list[NodeInfo] = []
        cutoff = time.time() - self._ttl_s
        for key in keys:
            try:
                entry = await self._kv.get(key)
            except KeyNotFoundError:
                continue
            if entry.value:
                info = NodeInfo.from_json(entry.value)
                if info.seen_at >= cutoff:
                    found.append(info)
        found.sort(key=lambda n: n.name)
        return found


def describe_binds(smpp: Any) -> list[dict[str, Any]]:
    """The binds of a running SMPP service as a heartbeat lists them (name, operator, state, transmit)."""
    if smpp is None:
        return []
    out: list[dict[str, Any]] = []
    for name, bind in getattr(smpp, "binds", {}).items():
        config = getattr(bind, "config", None)
        out.append(
            {
                "name": name,
                "operator": getattr(config, "operator", ""),
                "state": str(getattr(bind, "state", "")),
                "transmit": bool(getattr(bind, "can_transmit", False)),
            }
        )
    return out


def _pick_node(nodes: list[NodeInfo], me: str, origin: str, operator: str) -> NodeInfo | None:
    """The node to send a reply to an MO from ``origin`` through: its own bind first, then its operator's."""
    bind_name = origin.split(":", 1)[1] if ":" in origin else ""
    others = [n for n in nodes if n.name != me]
    for node in others:
        if any(b["name"] == bind_name and b.get("transmit") for b in node.binds):
            return node
    wanted = operator
    for node in nodes:
        for b in node.binds:
            if b["name"] == bind_name and b.get("operator"):
                wanted = b["operator"]
    if not wanted:
        return None
    for node in others:
        if any(b.get("operator") == wanted and b.get("transmit") for b in node.binds):
            return node
    return None


class _Picker(Protocol):
    def pick(self, origin: str, operator: str = "") -> Any: ...


class ClusterReplyChannel:
    """The "smpp" reply channel of a clustered node: a local bind, else the node that holds one."""

    name = "smpp"

    def __init__(
        self,
        local: ReplyChannel | None,
        directory: NodeDirectory,
        nc: Any,
        *,
        me: str,
        subject_prefix: str,
        timeout_s: float = 30.0,
    ) -> None:
        self._local = local
        self._directory = directory
        self._nc = nc
        self._me = me
        self._prefix = subject_prefix
        self._timeout = timeout_s

    async def send(self, reply: Reply) -> ReplySubmitted:
        local = self._local
        picker: _Picker | None = local if hasattr(local, "pick") else None  # type: ignore[assignment]
        if local is not None and picker is not None and picker.pick(reply.origin, reply.operator) is not None:
            return await local.send(reply)
        node = _pick_node(await self._directory.nodes(), self._me, reply.origin, reply.operator)
        if node is None:
            if local is not None:
                return await local.send(reply)  # it says why it cannot (and whether to retry)
            raise ReplyError(f"no node holds a bind that can send a reply for {reply.origin}", retryable=True)
        return await self._ask(node, reply)

    async def _ask(self, node: NodeInfo, reply: Reply) -> ReplySubmitted:
        import nats.errors

        body = orjson.dumps(asdict(reply))
        subject = f"{self._prefix}.{kv_key(node.name)}"
        try:
            answer = await self._nc.request(subject, body, timeout=self._timeout)
        except nats.errors.NoRespondersError:
            raise ReplyError(f"node {node.name} is gone", retryable=True) from None
        except (nats.errors.TimeoutError, TimeoutError):
            # It may have submitted the reply: trying again could send it twice.
            raise ReplyError(f"node {node.name} did not answer in time; outcome unknown") from None
        doc = orjson.loads(answer.data)
        if "error" in doc:
            raise ReplyError(f"via {node.name}: {doc['error']}", retryable=bool(doc.get("retryable")))
        return ReplySubmitted(
            doc["channel"],
            int(doc["parts"]),
            list(doc.get("refs", [])),
            f"via {node.name}: {doc.get('detail', '')}",
        )


class ReplyResponder:
    """Submits replies other nodes route here through this node's own channel (its SMPP binds)."""

    def __init__(self, nc: Any, channel: ReplyChannel, *, me: str, subject_prefix: str) -> None:
        self._nc = nc
        self._channel = channel
        self._subject = f"{subject_prefix}.{kv_key(me)}"
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self._subject, cb=self._handle)

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _handle(self, msg: Any) -> None:
        try:
            reply = Reply(**orjson.loads(msg.data))
        except (ValueError, TypeError):
            await msg.respond(orjson.dumps({"error": "unreadable reply request", "retryable": False}))
            return
        try:
            done = await self._channel.send(reply)
        except ReplyError as exc:
            answer = {"error": exc.detail, "retryable": exc.retryable}
        except Exception as exc:
            log.exception("reply for another node failed")
            answer = {"error": f"{type(exc).__name__}: {exc}", "retryable": False}
        else:
            answer = {
                "channel": done.channel,
                "parts": done.parts,
                "refs": list(done.refs),
                "detail": done.detail,
            }
        await msg.respond(orjson.dumps(answer))


class Cluster:
    """What a node runs to take part in a cluster: its directory entry, the sweeper, reply routing."""

    def __init__(self, name: str, directory: NodeDirectory) -> None:
        self.name = name
        self.directory = directory
        self.responder: ReplyResponder | None = None
        self.sweeper: Any = None
        self._tasks: list[asyncio.Task[Any]] = []

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.responder is not None:
            await self.responder.stop()
        await self.directory.stop()


def node_name(settings: Any) -> str:
    """The configured node name, else ``<host name>-<port>`` (unique per machine and port)."""
    import socket

    return str(settings.node_name or f"{socket.gethostname()}-{settings.port}")


async def start_cluster(gateway: Any) -> Cluster:
    """Join ``gateway`` to its cluster (JetStream queue), or make a directory of one (local queue).

    Call after the queue and SMPP binds are started and before the dispatcher starts: with JetStream it
    replaces the "smpp" reply channel by a :class:`ClusterReplyChannel`.
    """
    from mogateway import __version__
    from mogateway.queue.jetstream import JetStreamQueue
    from mogateway.service.app import queued_from_record
    from mogateway.service.sweeper import Sweeper

    settings = gateway.settings
    name = node_name(settings)
    queue = gateway.queue
    started_at = time.time()

    def describe() -> NodeInfo:
        dispatcher = gateway.dispatcher
        return NodeInfo(
            name=name,
            address=f"http://{settings.host}:{settings.port}",
            version=__version__,
            started_at=started_at,
            seen_at=time.time(),
            queue_lag=queue.lag(),
            held=queue.held() if hasattr(queue, "held") else 0,
            waiting=dispatcher.waiting() if dispatcher is not None else 0,
            binds=describe_binds(gateway.smpp),
        )

    if not isinstance(queue, JetStreamQueue):
        return Cluster(name, SingleNodeDirectory(describe))
    s = queue.settings
    directory = KvNodeDirectory(
        queue.js, describe, bucket=s.nodes_bucket, heartbeat_s=s.heartbeat_s, ttl_s=s.node_ttl_s
    )
    await directory.start()
    cluster = Cluster(name, directory)
    local = gateway.smpp.reply_channel if gateway.smpp is not None else None
    if local is not None:
        cluster.responder = ReplyResponder(queue.nc, local, me=name, subject_prefix=s.reply_subject)
        await cluster.responder.start()
    if gateway.replies is not None:
        gateway.replies.register(
            "smpp", ClusterReplyChannel(local, directory, queue.nc, me=name, subject_prefix=s.reply_subject)
        )
    cluster.sweeper = Sweeper(
        gateway.journal,
        queue,
        queued_from_record,
        after_s=s.sweep_after_s,
        interval_s=s.sweep_interval_s,
        duplicate_window_s=s.duplicate_window_s,
        page=s.sweep_page,
    )
    cluster._tasks.append(asyncio.create_task(cluster.sweeper.run_forever(), name="sweeper"))
    return cluster
