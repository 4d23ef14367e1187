"""Replies across nodes: a reply to an MO that came over an SMPP bind must leave over that bind (or
another bind to the same operator), and binds are spread over nodes — the nodes of a cluster, or the
worker processes of one gateway (``mogateway serve --workers N``).

:class:`ClusterReplyChannel` is the "smpp" reply channel of such a node: it uses a local bind when it
can, else it asks the node whose description (heartbeat) shows a bind that can transmit; that node
submits through its own binds (:func:`answer_reply`) and answers with the message ids. The asking goes
through :class:`NodeRequests`: NATS request/reply on ``<reply_subject>.<node>`` between the nodes of a
cluster (:class:`NatsRequests`, answered by :class:`ReplyResponder`), the workers' sockets between the
workers (``edges.workers``). A request that was sent and got no answer has an unknown outcome (the
other node may have submitted it): it is reported as possibly sent, so a reply is never sent twice on
our account; one that could not be sent at all may be tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from mogateway.core.dlt import DltIds
from mogateway.core.message import Message
from mogateway.core.ports import NodeDirectory, NodeInfo, Reply, ReplyChannel, ReplyError, ReplySubmitted
from mogateway.edges.cluster.directory import kv_key

__all__ = [
    "ClusterReplyChannel",
    "NatsRequests",
    "NodeRequests",
    "ReplyResponder",
    "Unanswered",
    "Unsent",
    "answer_reply",
    "reply_from_request",
    "reply_request",
]

log = logging.getLogger(__name__)


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


def reply_request(reply: Reply) -> dict[str, Any]:
    """The request asking another node to send ``reply``."""
    return {
        "message": reply.message.to_array(),
        "text": reply.text,
        "dlt": None if reply.dlt is None else [reply.dlt.pe_id, reply.dlt.template_id],
    }


def reply_from_request(doc: Any) -> Reply:
    """The reply a :func:`reply_request` document describes (raises on a malformed one)."""
    message = Message.from_array(doc["message"])
    dlt = doc.get("dlt")
    return Reply(message, str(doc["text"]), None if dlt is None else DltIds(str(dlt[0]), str(dlt[1])))


class Unsent(Exception):
    """The request did not reach the other node: asking again is safe."""


class Unanswered(Exception):
    """The request went out and no answer came back: the other node may have acted on it."""


class NodeRequests(Protocol):
    """How one node asks another to send a reply (a JSON document in, one out)."""

    async def ask(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        """The answer of ``node``; raises :class:`Unsent` or :class:`Unanswered`."""
        ...


class NatsRequests:
    """Asking over NATS request/reply, on ``<subject_prefix>.<node>``."""

    def __init__(self, nc: Any, *, subject_prefix: str, timeout_s: float = 30.0) -> None:
        self._nc = nc
        self._prefix = subject_prefix
        self._timeout = timeout_s

    async def ask(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        import nats.errors

        subject = f"{self._prefix}.{kv_key(node)}"
        try:
            answer = await self._nc.request(subject, orjson.dumps(request), timeout=self._timeout)
        except nats.errors.NoRespondersError:
            raise Unsent(f"node {node} is gone") from None
        except (nats.errors.TimeoutError, TimeoutError):
            raise Unanswered(f"node {node} did not answer in time") from None
        doc: dict[str, Any] = orjson.loads(answer.data)
        return doc


class ClusterReplyChannel:
    """The "smpp" reply channel of a node among others: a local bind, else the node that holds one.

    Whether another node can take a reply is only known by asking the directory, so :meth:`ready` is
    always true and :meth:`send` says (retryable) when no node can.

    The directory's view is kept for ``view_s`` (asking it costs a round trip to every other node or
    to the KV bucket, per reply otherwise) and read again at once after a node could not take a reply
    or when no node could: a stale view only ever sends a reply to a node that answers that it cannot,
    and the reply waits and is tried again on a fresh view."""

    name = "smpp"
    needs_intent = True

    def __init__(
        self,
        local: ReplyChannel | None,
        directory: NodeDirectory,
        requests: NodeRequests,
        *,
        me: str,
        view_s: float = 1.0,
    ) -> None:
        self._local = local
        self._directory = directory
        self._requests = requests
        self._me = me
        self._view_s = view_s
        self._view: list[NodeInfo] = []
        self._view_at = -math.inf
        self._reading: asyncio.Future[list[NodeInfo]] | None = None

    async def _nodes(self) -> list[NodeInfo]:
        """The directory's nodes as read at most ``view_s`` ago; callers waiting share one read."""
        if time.monotonic() - self._view_at < self._view_s:
            return self._view
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read_view())
        return await asyncio.shield(self._reading)

    async def _read_view(self) -> list[NodeInfo]:
        nodes = await self._directory.nodes()
        self._view, self._view_at = nodes, time.monotonic()
        return nodes

    def _forget_view(self) -> None:
        self._view_at = -math.inf

    def ready(self, reply: Reply) -> bool:
        return True

    async def send(
        self, reply: Reply, handover: Callable[[], Awaitable[None]] | None = None
    ) -> ReplySubmitted:
        local = self._local
        origin = reply.message.origin
        operator = reply.message.sender.operator if reply.message.sender is not None else ""
        if local is not None and local.ready(reply):
            return await local.send(reply, handover)
        node = _pick_node(await self._nodes(), self._me, origin, operator)
        if node is None:
            self._forget_view()
            if local is not None:
                return await local.send(reply, handover)  # it says why it cannot (and whether to retry)
            raise ReplyError(f"no node holds a bind that can send a reply for {origin}", retryable=True)
        if handover is not None:
            await handover()
        return await self._ask(node, reply)

    async def _ask(self, node: NodeInfo, reply: Reply) -> ReplySubmitted:
        try:
            doc = await self._requests.ask(node.name, reply_request(reply))
        except Unsent as exc:
            self._forget_view()
            raise ReplyError(str(exc), retryable=True) from None
        except Unanswered as exc:
            self._forget_view()
            # It may have submitted the reply: trying again could send it twice.
            raise ReplyError(str(exc), possibly_sent=True) from None
        if "error" in doc:
            self._forget_view()
            raise ReplyError(
                f"via {node.name}: {doc['error']}",
                retryable=bool(doc.get("retryable")),
                possibly_sent=bool(doc.get("possibly_sent")),
            )
        return ReplySubmitted(
            doc["channel"],
            int(doc["parts"]),
            list(doc.get("refs", [])),
            f"via {node.name}: {doc.get('detail', '')}",
        )


async def answer_reply(channel: ReplyChannel, request: Any) -> dict[str, Any]:
    """Submit a reply another node routed here through ``channel`` (this node's binds); the answer."""
    try:
        reply = reply_from_request(request)
    except (ValueError, TypeError, KeyError):
        return {"error": "unreadable reply request", "retryable": False}
    try:
        done = await channel.send(reply)
    except ReplyError as exc:
        return {"error": exc.detail, "retryable": exc.retryable, "possibly_sent": exc.possibly_sent}
    except Exception as exc:
        log.exception("reply for another node failed")
        return {"error": f"{type(exc).__name__}: {exc}", "retryable": False, "possibly_sent": True}
    return {"channel": done.channel, "parts": done.parts, "refs": list(done.refs), "detail": done.detail}


class ReplyResponder:
    """Submits replies other nodes route here over NATS through this node's own channel."""

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
            request = orjson.loads(msg.data)
        except orjson.JSONDecodeError:
            request = None
        await msg.respond(orjson.dumps(await answer_reply(self._channel, request)))
