"""Real gateway clusters for tests: ``mogateway serve`` processes on loopback sharing one throwaway
PostgreSQL database and one JetStream stream whose names are unique to the test run.

PostgreSQL and NATS must be running (``bash scripts/ensure-services.sh``); when they are not, the tests
fail and say so — they are never skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
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
    #: Worker processes of this node (``serve --workers``): each is a node of the cluster itself.
    workers: int = 2
    #: More ``serve`` options (``--config <file>``).
    args: Sequence[str] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mogateway.cli",
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                *self.args,
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() reaches every worker
        )
        log.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
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
        """SIGKILL to the node and its workers at once: no shutdown, no acknowledgements, no goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
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
def running_cluster(
    tmp_path: Path,
    count: int,
    nats: dict[str, Any] | None = None,
    node_args: Sequence[Sequence[str]] = (),
    first: Callable[[Cluster], None] | None = None,
) -> Iterator[Cluster]:
    """``count`` nodes, started and ready; all stopped (and the stream deleted) afterwards.
    ``node_args``: more ``serve`` options for the first nodes, one sequence per node. ``first``: called
    once the first node is ready and before the others start, for what every node must have read when
    traffic begins (``register_client``: the others read the clients as they start, rather than within
    their registry's refresh period)."""
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
            args = tuple(node_args[n - 1]) if n <= len(node_args) else ()
            cluster.nodes.append(Node(f"node{n}", free_port(), env, tmp_path / f"node{n}.log", args=args))
        try:
            waves = [cluster.nodes[:1], cluster.nodes[1:]] if first is not None else [cluster.nodes]
            for wave in waves:
                for node in wave:
                    node.start()
                for node in wave:
                    node.wait_ready()
                if first is not None and wave is waves[0]:
                    first(cluster)
            yield cluster
        finally:
            for node in cluster.nodes:
                node.stop()
            asyncio.run(_delete_nats_names(names["stream"], names["nodes_bucket"]))


# ------------------------------------------------------------------------------------------ traffic


def register_client(cluster: Cluster, callback_url: str, **fields: Any) -> None:
    """The "tv vote" client on shortcode 56767 (``fields``: max_concurrency, ...)."""
    resp = httpx.post(
        cluster.nodes[0].url + "/v1/clients",
        json={"name": "tv vote", "shortcodes": ["56767"], "callback_url": callback_url, **fields},
        headers=cluster.admin(),
        timeout=10,
    )
    assert resp.status_code == 201, resp.text


def vote(n: int) -> dict[str, Any]:
    """MO number ``n``: its own source id, msisdn and text."""
    return {"id": f"op-{n}", "shortcode": "56767", "msisdn": f"98{n:08d}", "message": f"VOTE {n}"}


class Pusher:
    """Pushes batches round-robin over ``nodes`` (default: all); a batch a dead node refused goes to the
    next one, with the same source ids (the same messages)."""

    def __init__(self, cluster: Cluster, batch: int, nodes: Sequence[Node] | None = None) -> None:
        self.cluster = cluster
        self.batch = batch
        self.nodes = list(nodes or cluster.nodes)
        self.accepted: dict[str, str] = {}  # source id -> message id
        self.lock = threading.Lock()
        self.retried = 0

    def push(self, start: int) -> None:
        batch = [vote(n) for n in range(start, start + self.batch)]
        nodes = self.nodes
        for attempt in range(len(nodes) * 2):
            node = nodes[(start // self.batch + attempt) % len(nodes)]
            try:
                resp = httpx.post(
                    node.url + "/v1/inbound/batch", json=batch, headers=self.cluster.ingest(), timeout=10
                )
            except httpx.HTTPError:
                with self.lock:
                    self.retried += 1
                continue  # the same source ids on another node are the same messages
            assert resp.status_code in (200, 202, 207), resp.text
            results = resp.json()
            results = results.get("results", results) if isinstance(results, dict) else results
            with self.lock:
                for mo, res in zip(batch, results, strict=True):
                    assert res["state"] != "rejected", res
                    self.accepted[mo["id"]] = res["id"]
            return
        raise AssertionError(f"no node accepted batch {start}")


# ------------------------------------------------------------------------------------------ the journal


async def journal_facts(database: str) -> tuple[dict[str, int], dict[str, int], int]:
    """MOs by state, ``reply_submitted`` events by message id, and how many ``recovered`` events."""
    conn = await asyncpg.connect(database)
    try:
        states = dict(await conn.fetch("SELECT state, count(*) FROM message_states GROUP BY state"))
        replies = dict(
            await conn.fetch(
                "SELECT message_id, count(*) FROM events WHERE kind='reply_submitted' GROUP BY message_id"
            )
        )
        recovered = await conn.fetchval("SELECT count(*) FROM events WHERE kind='recovered'")
        return states, replies, int(recovered)
    finally:
        await conn.close()


def wait_until_finished(database: str, expected: int, timeout: float) -> dict[str, int]:
    """Wait until the journal holds ``expected`` MOs and none is unfinished; their count by state."""
    deadline = time.monotonic() + timeout
    states: dict[str, int] = {}
    while time.monotonic() < deadline:
        states, _, _ = asyncio.run(journal_facts(database))
        unfinished = sum(states.get(s, 0) for s in ("queued", "answered", "replying"))
        if sum(states.values()) >= expected and unfinished == 0:
            return states
        time.sleep(0.1)
    raise AssertionError(f"messages still unfinished after {timeout} s: {states}")
