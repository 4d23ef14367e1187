"""Three gateway processes share PostgreSQL and a JetStream stream; one is SIGKILLed mid-flight.

What must hold afterwards: every accepted MO reached the application, none reached it as two different
messages, and every answered MO has exactly one reply (``reply_submitted``) — including the MOs the
killed node held, and an MO committed to the journal but never published (a node that died in between).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from cluster_harness import Cluster, running_cluster

from mogateway.core.timeline import State
from mogateway.storage.journal import NewMessage, id_for_source
from mogateway.storage.postgres import PostgresJournal
from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow

TOTAL = 240
BATCH = 10
REPLY = "Thanks for voting"


def _register_client(cluster: Cluster, callback_url: str) -> None:
    resp = httpx.post(
        cluster.nodes[0].url + "/v1/clients",
        json={"name": "tv vote", "shortcodes": ["56767"], "callback_url": callback_url},
        headers=cluster.admin(),
        timeout=10,
    )
    assert resp.status_code == 201, resp.text


def _mo(n: int) -> dict[str, Any]:
    return {"id": f"op-{n}", "shortcode": "56767", "msisdn": f"98{n:08d}", "message": f"VOTE {n}"}


class Pusher:
    """Pushes batches round-robin over the nodes; a batch a dead node refused goes to the next node."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.accepted: dict[str, str] = {}  # source id -> message id
        self.lock = threading.Lock()
        self.retried = 0

    def push(self, start: int) -> None:
        batch = [_mo(n) for n in range(start, start + BATCH)]
        nodes = self.cluster.nodes
        for attempt in range(len(nodes) * 2):
            node = nodes[(start // BATCH + attempt) % len(nodes)]
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


async def _journal_facts(database: str) -> tuple[dict[str, int], dict[str, int], int]:
    conn = await asyncpg.connect(database)
    try:
        states = dict(await conn.fetch("SELECT state, count(*) FROM messages GROUP BY state"))
        replies = dict(
            await conn.fetch(
                "SELECT message_id, count(*) FROM events WHERE kind='reply_submitted' GROUP BY message_id"
            )
        )
        recovered = await conn.fetchval("SELECT count(*) FROM events WHERE kind='recovered'")
        return states, replies, int(recovered)
    finally:
        await conn.close()


async def _store_without_publishing(database: str) -> str:
    """What a node leaves behind when it dies between the journal commit and the publish."""
    journal = PostgresJournal(database)
    await journal.open()
    try:
        message_id = id_for_source("http:stranded-1")
        await journal.store(
            [
                NewMessage(
                    id=message_id,
                    origin="http",
                    source_id="stranded-1",
                    shortcode="56767",
                    msisdn="919876500000",
                    message="VOTE stranded",
                    received_at=time.time(),
                    state=State.QUEUED,
                    cc=91,
                    ndc=98765,
                    sn=0,
                    operator="",
                    circle="",
                )
            ]
        )
        return message_id
    finally:
        await journal.close()


def _wait_until_finished(database: str, expected: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    states: dict[str, int] = {}
    while time.monotonic() < deadline:
        states, _, _ = asyncio.run(_journal_facts(database))
        unfinished = sum(states.get(s, 0) for s in ("queued", "dispatching", "answered"))
        if sum(states.values()) >= expected and unfinished == 0:
            return states
        time.sleep(0.5)
    raise AssertionError(f"messages still unfinished after {timeout} s: {states}")


def test_three_nodes_survive_a_sigkill_with_one_reply_per_answer(tmp_path: Path) -> None:
    started = time.monotonic()
    with (
        CallbackRecorder.in_thread(Answer.late(0.2, REPLY)) as app,
        running_cluster(tmp_path, 3) as cluster,
    ):
        _register_client(cluster, app.url)
        time.sleep(2.5)  # every node's registry picks the new client up (it refreshes every 2 s)
        stranded = asyncio.run(_store_without_publishing(cluster.database))

        pusher = Pusher(cluster)
        victim = cluster.nodes[1]
        with ThreadPoolExecutor(6) as pool:
            first = list(pool.map(pusher.push, range(0, TOTAL // 2, BATCH)))
            # Mid-flight: node2 holds MOs whose callbacks are running (0.2 s each) or waiting in its lane.
            victim.kill()
            rest = list(pool.map(pusher.push, range(TOTAL // 2, TOTAL, BATCH)))
        assert len(first) + len(rest) == TOTAL // BATCH
        assert len(pusher.accepted) == TOTAL
        victim.start()
        victim.wait_ready()

        states = _wait_until_finished(cluster.database, TOTAL + 1, timeout=40)
        _, replies, recovered = asyncio.run(_journal_facts(cluster.database))

        calls_by_id: collections.Counter[str] = collections.Counter()
        ids_by_content: dict[str, set[str]] = collections.defaultdict(set)
        for call in app.calls:
            message_id = call.headers["x-mogateway-message-id"]
            calls_by_id[message_id] += 1
            body = call.json()
            ids_by_content[f"{body['msisdn']} {body['message']}"].add(message_id)

        expected_ids = set(pusher.accepted.values()) | {stranded}
        # Every accepted MO (and the stranded one) reached the application...
        assert expected_ids <= set(calls_by_id), sorted(expected_ids - set(calls_by_id))[:5]
        # ...never as two different messages...
        assert all(len(ids) == 1 for ids in ids_by_content.values())
        assert len(ids_by_content) == TOTAL + 1
        # ...and every answered MO has exactly one reply.
        assert states == {"replied": TOTAL + 1}, states
        assert set(replies) == expected_ids
        assert set(replies.values()) == {1}
        # The kill really was mid-flight: some MOs were picked up again after it.
        assert recovered > 0

        nodes = httpx.get(cluster.nodes[0].url + "/v1/nodes", headers=cluster.admin(), timeout=5).json()
        assert sorted(n["name"] for n in nodes["nodes"]) == ["node1", "node2", "node3"]
        assert httpx.get(cluster.nodes[0].url + "/v1/nodes", timeout=5).status_code == 401
    assert time.monotonic() - started < 90
