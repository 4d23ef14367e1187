"""Real gateway clusters for tests: ``mogateway serve`` processes on loopback sharing one throwaway
PostgreSQL database and one JetStream stream whose names are unique to the test run.

PostgreSQL and NATS must be running (``bash scripts/ensure-services.sh``); when they are not, the tests
fail and say so — they are never skipped.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from postgres_databases import throwaway_database

NATS_URL = os.environ.get("MOGATEWAY_TEST_NATS", "nats://127.0.0.1:4222")
ADMIN_TOKEN = "cluster-admin-token-" + secrets.token_hex(8)
INGEST_TOKEN = "cluster-ingest-token-" + secrets.token_hex(8)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _check_nats() -> None:
    host, _, port = NATS_URL.removeprefix("nats://").partition(":")
    try:
        socket.create_connection((host, int(port or 4222)), timeout=3).close()
    except OSError as exc:
        pytest.fail(f"NATS is not reachable at {NATS_URL} ({exc}); run `bash scripts/ensure-services.sh`")


async def _delete_nats_names(stream: str, bucket: str) -> None:
    import nats

    nc = await nats.connect(NATS_URL, connect_timeout=5)
    try:
        js = nc.jetstream()
        for name in (stream, f"KV_{bucket}"):
            try:
                await js.delete_stream(name)
            except Exception:
                pass
    finally:
        await nc.close()


@dataclass
class Node:
    """One ``mogateway serve`` process."""

    name: str
    port: int
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mogateway.cli", "serve", "--port", str(self.port)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"node {self.name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"node {self.name} did not start: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no acknowledgements, no goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Cluster:
    """Nodes sharing one database and one stream; ``names`` are unique to this run."""

    database: str
    nodes: list[Node] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)

    def admin(self) -> dict[str, str]:
        return {"authorization": f"Bearer {ADMIN_TOKEN}"}

    def ingest(self) -> dict[str, str]:
        return {"authorization": f"Bearer {INGEST_TOKEN}"}


@contextmanager
def running_cluster(tmp_path: Path, count: int, nats: dict[str, Any] | None = None) -> Iterator[Cluster]:
    """``count`` nodes, started and ready; all stopped (and the stream deleted) afterwards."""
    _check_nats()
    run = secrets.token_hex(4)
    names = {
        "stream": f"MOGW_T_{run}",
        "subject": f"mogwt.{run}.mo",
        "consumer": f"dispatch_{run}",
        "nodes_bucket": f"mogwt_nodes_{run}",
        "reply_subject": f"mogwt.{run}.reply",
    }
    settings: dict[str, Any] = {
        **names,
        "ack_wait_s": 3,
        "sweep_after_s": 3,
        "sweep_interval_s": 1,
        "heartbeat_s": 0.5,
        "node_ttl_s": 3,
        **(nats or {}),
    }
    with throwaway_database("mogw_cluster") as database:
        cluster = Cluster(database, names=names)
        base = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
        base.update(
            MOGATEWAY_DATABASE=database,
            MOGATEWAY_QUEUE=NATS_URL,
            MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
            MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
            MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
            MOGATEWAY_LOG_LEVEL="warning",
        )
        base.update({f"MOGATEWAY_NATS__{k.upper()}": str(v) for k, v in settings.items()})
        for n in range(1, count + 1):
            env = dict(base, MOGATEWAY_NODE_NAME=f"node{n}")
            cluster.nodes.append(Node(f"node{n}", free_port(), env, tmp_path / f"node{n}.log"))
        try:
            for node in cluster.nodes:
                node.start()
            for node in cluster.nodes:
                node.wait_ready()
            yield cluster
        finally:
            for node in cluster.nodes:
                node.stop()
            asyncio.run(_delete_nats_names(names["stream"], names["nodes_bucket"]))
