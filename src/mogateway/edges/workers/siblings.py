"""The other worker processes of this gateway, as this worker reaches them over their sockets
(``edges.ipc``): asking one or all of them, telling one, and the two views the rest of the node needs —
a :class:`~mogateway.core.ports.NodeDirectory` of the workers (each describes itself when asked, so the
console, ``/v1/nodes`` and reply routing see every worker's binds) and the
:class:`~mogateway.edges.cluster.replies.NodeRequests` that carry a reply to the worker holding its bind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mogateway.core.ports import NodeInfo
from mogateway.edges.cluster.replies import Unanswered, Unsent
from mogateway.edges.ipc import IpcError, Peer, PeerUnreachable, keep_connected, socket_path

__all__ = ["Siblings", "WorkerDirectory", "WorkerRequests", "worker_name"]

log = logging.getLogger(__name__)

#: How long a sibling has to answer a question about itself (describe, metrics, binds).
ASK_S = 2.0


def worker_name(base: str, index: int) -> str:
    """The node name of worker ``index`` of the gateway named ``base``."""
    return f"{base}/w{index}"


class Siblings:
    """Connections to the other ``count - 1`` workers; ``on_lost(index)`` when one's connection ends."""

    def __init__(
        self, directory: str, me: int, count: int, *, on_lost: Callable[[int], None] | None = None
    ) -> None:
        self.me = me
        self.count = count
        self.peers = {i: Peer(i, socket_path(directory, i), on_lost=on_lost) for i in range(count) if i != me}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(
            keep_connected(list(self.peers.values()), self._stop), name="siblings"
        )

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        for peer in self.peers.values():
            await peer.close()

    def tell(self, worker: int, op: str, args: Any) -> None:
        """A notification to one sibling (dropped when it cannot be reached, see ``edges.ipc``)."""
        self.peers[worker].notify(op, args)

    async def ask(self, worker: int, op: str, args: Any = None, *, timeout: float = ASK_S) -> Any:
        return await self.peers[worker].request(op, args, timeout=timeout)

    async def ask_all(self, op: str, args: Any = None, *, timeout: float = ASK_S) -> dict[int, Any]:
        """The answers of every sibling that answered in time (the others are left out)."""
        indexes = list(self.peers)
        answers = await asyncio.gather(
            *(self.ask(i, op, args, timeout=timeout) for i in indexes), return_exceptions=True
        )
        out: dict[int, Any] = {}
        for i, answer in zip(indexes, answers, strict=True):
            if isinstance(answer, (IpcError, TimeoutError)):
                log.debug("worker %d did not answer %s: %s", i, op, answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            out[i] = answer
        return out


class WorkerDirectory:
    """The workers of this gateway as nodes: this one, and every sibling that answers."""

    def __init__(self, siblings: Siblings, describe: Callable[[], NodeInfo]) -> None:
        self._siblings = siblings
        self._describe = describe

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def nodes(self) -> list[NodeInfo]:
        answers = await self._siblings.ask_all("describe")
        nodes = [self._describe()]
        nodes.extend(NodeInfo(**doc) for _, doc in sorted(answers.items()))
        return nodes


class WorkerRequests:
    """Reply requests to the worker named in the directory (``<gateway>/w<i>``), over its socket."""

    def __init__(self, siblings: Siblings, *, timeout_s: float = 30.0) -> None:
        self._siblings = siblings
        self._timeout = timeout_s

    async def ask(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            index = int(node.rsplit("/w", 1)[1])
        except (IndexError, ValueError):
            raise Unsent(f"{node} is not a worker of this gateway") from None
        if index not in self._siblings.peers:
            raise Unsent(f"{node} is not a worker of this gateway")
        try:
            answer: dict[str, Any] = await self._siblings.ask(index, "reply", request, timeout=self._timeout)
        except PeerUnreachable:
            raise Unsent(f"worker {node} is not running") from None
        except (IpcError, TimeoutError) as exc:
            raise Unanswered(f"worker {node} did not answer: {exc or 'timed out'}") from None
        return answer
