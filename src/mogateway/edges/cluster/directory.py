"""The node directory of a cluster: who is alive, which SMPP binds each holds.

Every node with the JetStream queue writes a heartbeat (its name, address, binds, queue lag) every
``heartbeat_s`` into a NATS KV bucket whose entries expire after ``node_ttl_s``: a node that stops
beating (SIGKILL, lost network) disappears from ``GET /v1/nodes`` by itself. A single node (SQLite +
in-process queue) has a directory of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from mogateway.core.ports import NodeInfo

__all__ = ["KvNodeDirectory", "SingleNodeDirectory", "kv_key"]

log = logging.getLogger(__name__)

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]")


def kv_key(name: str) -> str:
    """A node name as a KV key / subject token (only ``[A-Za-z0-9_=-]``)."""
    return _KEY_UNSAFE.sub("_", name) or "node"


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
