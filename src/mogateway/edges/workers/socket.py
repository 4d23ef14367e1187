"""This worker's socket: what the other worker processes of the gateway may ask it, and its answers
(``edges.ipc`` carries them; ``edges.workers.siblings`` asks).

===========  ==========================================================  ===================================
op           answer                                                      asked by
===========  ==========================================================  ===================================
describe     this worker as its heartbeat describes it (``NodeInfo``)    ``WorkerDirectory``: console,
                                                                         ``/v1/nodes``, reply routing
metrics      this process's Prometheus exposition                        ``/metrics`` on any worker
binds        the status of the binds this worker holds                   ``GET /v1/binds`` on any worker
live_binds   those binds with their live figures                         the console's Binds page
clients      reloads the client registry from the journal; ``True``      a worker whose registry changed
reply        sends a reply over one of this worker's binds               ``WorkerRequests`` (reply routing)
dispatch     (embedded queue only) MOs this worker owns, to dispatch     a sibling's ``RoutedQueue``
===========  ==========================================================  ===================================

The socket starts before recovery (see ``service.recovery``), so the binds are not up yet when it
does: ``binds`` is asked for them at each question.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from mogateway.core.ports import NodeInfo
from mogateway.edges.cluster.replies import answer_reply
from mogateway.edges.ipc import Handler, IpcServer, socket_path
from mogateway.edges.smpp.binds import SmppBinds
from mogateway.edges.workers.routed_queue import DISPATCH

__all__ = ["WorkerSocket"]


class WorkerSocket:
    """Worker ``index``'s socket in ``directory``, answering with the parts it is given."""

    def __init__(
        self,
        directory: str,
        index: int,
        *,
        name: str,
        describe: Callable[[], NodeInfo],
        metrics: Callable[[], bytes],
        binds: Callable[[], SmppBinds | None],
        live_binds: Callable[[], list[dict[str, Any]]],
        reload_clients: Callable[[], Awaitable[None]],
        dispatch: Handler | None = None,
    ) -> None:
        self._name = name
        self._describe = describe
        self._metrics = metrics
        self._binds = binds
        self._live_binds = live_binds
        self._reload_clients = reload_clients
        handlers: dict[str, Handler] = {
            "describe": self._answer_describe,
            "metrics": self._answer_metrics,
            "binds": self._answer_binds,
            "live_binds": self._answer_live_binds,
            "clients": self._answer_clients,
            "reply": self._answer_reply,
        }
        if dispatch is not None:
            handlers[DISPATCH] = dispatch
        self._server = IpcServer(socket_path(directory, index), handlers)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def _answer_describe(self, _args: Any) -> dict[str, Any]:
        return asdict(self._describe())

    async def _answer_metrics(self, _args: Any) -> str:
        return self._metrics().decode()

    async def _answer_binds(self, _args: Any) -> list[dict[str, Any]]:
        binds = self._binds()
        return binds.status() if binds is not None else []

    async def _answer_live_binds(self, _args: Any) -> list[dict[str, Any]]:
        return self._live_binds()

    async def _answer_clients(self, _args: Any) -> bool:
        await self._reload_clients()
        return True

    async def _answer_reply(self, request: Any) -> dict[str, Any]:
        binds = self._binds()
        if binds is None:
            return {"error": f"worker {self._name} holds no bind", "retryable": True}
        return await answer_reply(binds.reply_channel, request)
