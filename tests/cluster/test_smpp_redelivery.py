"""Two nodes on PostgreSQL and JetStream, each holding a bind of the same SMSC account: an MO the SMSC
delivers over both binds is one MO (one row, one callback, one reply), whichever node stores it first
or whether both store it at the same moment (core.message.find_repeats, under PostgreSQL's lock per
number)."""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

import asyncpg
from cluster_harness import register_client, running_cluster, wait_until_finished

from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

BIND = """
[[smpp.binds]]
name = "op{n}"
host = "127.0.0.1"
port = {port}
system_id = "esme"
mode = "transceiver"
throughput = 1000
window = 50
"""


async def test_an_mo_delivered_over_two_nodes_binds_is_one_mo(tmp_path: Path) -> None:
    count = 200
    smsc = await SimulatedSmsc().start()
    app = CallbackRecorder(Answer.text("got it"))
    await app.start()
    configs = []
    for n in (1, 2):
        config = tmp_path / f"node{n}.toml"
        config.write_text(BIND.format(n=n, port=smsc.port))
        configs.append(("--config", str(config)))
    context = running_cluster(tmp_path, 2, node_args=configs)
    cluster = await asyncio.to_thread(context.__enter__)
    try:
        await asyncio.to_thread(register_client, cluster, app.url, max_concurrency=20)
        deadline = time.monotonic() + 30
        while len([c for c in smsc.clients if c.system_id]) < 2:
            assert time.monotonic() < deadline, "the two nodes' binds did not bind"
            await asyncio.sleep(0.1)
        for n in range(count):
            number, text = f"91981002{n:04d}", f"VOTE {n}"
            if n % 2:  # over one node's bind, then again over the other's
                first = await smsc.inject_mo(number, "56767", text)
                again = await smsc.inject_mo(number, "56767", text, receiver=1)
            else:  # over both at the same moment: both nodes store it at once
                first, again = await asyncio.gather(
                    smsc.inject_mo(number, "56767", text), smsc.inject_mo(number, "56767", text, receiver=1)
                )
            assert first == again == [0]
        await smsc.wait_submits(count, timeout=60)
        await asyncio.to_thread(wait_until_finished, cluster.database, count, 60)
        # One last MO over each node's bind, sent after all the others and answered: a second callback
        # or reply to any earlier MO would have come by now.
        last = ["919810030000", "919810030001"]
        for receiver, number in enumerate(last):
            assert await smsc.inject_mo(number, "56767", "VOTE last", receiver=receiver) == [0]
        deadline = time.monotonic() + 30
        while not set(last) <= {s.pdu.destination_addr for s in smsc.submits}:
            assert time.monotonic() < deadline, "the last MOs were not answered"
            await asyncio.sleep(0.05)
        states = await asyncio.to_thread(wait_until_finished, cluster.database, count + 2, 60)
        conn = await asyncpg.connect(cluster.database)
        try:
            stored = await conn.fetchrow("SELECT count(*), count(DISTINCT msisdn) FROM messages")
        finally:
            await conn.close()
        assert tuple(stored) == (count + 2, count + 2), states
        assert len(app.calls) == count + 2
        replies = collections.Counter(s.pdu.destination_addr for s in smsc.submits)
        assert replies == {number: 1 for number in [*(f"91981002{n:04d}" for n in range(count)), *last]}
    finally:
        await asyncio.to_thread(context.__exit__, None, None, None)
        await app.stop()
        await smsc.stop()
