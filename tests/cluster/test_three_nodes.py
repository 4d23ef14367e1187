"""Three gateway processes share PostgreSQL and a JetStream stream; one is SIGKILLed mid-flight.

What must hold afterwards: every accepted MO reached the application, none reached it as two different
messages, and every answered MO has exactly one reply (``reply_submitted``) — including the MOs the
killed node held, and an MO committed to the journal but never published (a node that died in between).
"""

from __future__ import annotations

import asyncio
import collections
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from cluster_harness import Pusher, journal_facts, register_client, running_cluster, wait_until_finished

from mogateway.core.message import Message, Sender, id_for_source
from mogateway.edges.storage.postgres import PostgresJournal
from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow

TOTAL = 240
BATCH = 10
REPLY = "Thanks for voting"


async def _store_without_publishing(database: str) -> str:
    """What a node leaves behind when it dies between the journal commit and the publish."""
    journal = PostgresJournal(database)
    await journal.open()
    try:
        message_id = id_for_source("http:stranded-1")
        await journal.store(
            [
                Message(
                    id=message_id,
                    origin="http",
                    source_id="stranded-1",
                    shortcode="56767",
                    msisdn="919876500000",
                    text="VOTE stranded",
                    received_at=time.time(),
                    sender=Sender(91, 9876, 500000),
                )
            ]
        )
        return message_id
    finally:
        await journal.close()


def test_three_nodes_survive_a_sigkill_with_one_reply_per_answer(tmp_path: Path) -> None:
    started = time.monotonic()
    with (
        CallbackRecorder.in_thread(Answer.late(0.2, REPLY)) as app,
        running_cluster(tmp_path, 3, first=lambda c: register_client(c, app.url)) as cluster,
    ):
        stranded = asyncio.run(_store_without_publishing(cluster.database))

        pusher = Pusher(cluster, BATCH)
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

        states = wait_until_finished(cluster.database, TOTAL + 1, timeout=40)
        _, replies, recovered = asyncio.run(journal_facts(cluster.database))

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

        # Each node runs two workers, each a node of the cluster. node2's were started again after the
        # kill: on a loaded machine a worker may still be starting, so give the directory a moment.
        wanted = [f"node{n}/w{w}" for n in (1, 2, 3) for w in (0, 1)]
        deadline = time.monotonic() + 20
        while True:
            nodes = httpx.get(cluster.nodes[0].url + "/v1/nodes", headers=cluster.admin(), timeout=5).json()
            names = sorted(n["name"] for n in nodes["nodes"])
            if names == wanted or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert names == wanted
        assert httpx.get(cluster.nodes[0].url + "/v1/nodes", timeout=5).status_code == 401
    assert time.monotonic() - started < 90
