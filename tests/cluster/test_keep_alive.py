"""The short ``ack_wait`` and what keeps it safe: a live node keeps every MO it holds however long it holds
it, at one ``in_progress`` per MO every ``ack_wait / 3`` — only for MOs held that long — and a node
that goes without a word hands its MOs to another node after ``ack_wait``.

Real NATS JetStream; two queues on one consumer are two nodes. One holds ``node_max_pending`` (2,000,
the most a node holds) for twice ``ack_wait``. The test prints what the keep-alive cost: in_progress per
held MO per second, and CPU per 1,000 in_progress in this process and, when /proc shows it, in
nats-server (other work on the machine adds to that figure; take the lowest of a few runs).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from cluster_harness import NATS_URL

from mogateway.config.nats import NatsSettings
from mogateway.core.message import Message, Sender
from mogateway.edges.queue.jetstream import JetStreamEntry, JetStreamQueue

pytestmark = pytest.mark.slow

#: Shorter than the default (6 s) to keep the test short; the in_progress rate scales with 1 / ack_wait.
ACK_WAIT_S = 3.0
HELD = NatsSettings().node_max_pending


def _nats_server_cpu() -> Callable[[], float] | None:
    """A reader of the local nats-server's CPU seconds (utime + stime), or None when /proc cannot tell."""
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "nats-server":
                continue
        except OSError:
            continue
        stat = entry / "stat"

        def read(stat: Path = stat) -> float:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick

        try:
            read()
        except OSError:
            return None
        return read
    return None


@pytest.fixture
async def names() -> AsyncIterator[dict[str, str]]:
    run = secrets.token_hex(4)
    yield {"stream": f"MOGW_K_{run}", "subject": f"mogwk.{run}", "consumer": f"k_{run}"}
    import nats

    nc = await nats.connect(NATS_URL, connect_timeout=5)
    try:
        await nc.jetstream().delete_stream(f"MOGW_K_{run}")
    finally:
        await nc.close()


async def _node(names: dict[str, str]) -> JetStreamQueue:
    queue = JetStreamQueue(NATS_URL, {**names, "ack_wait_s": ACK_WAIT_S, "fetch_batch": 500})
    try:
        await queue.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `bash scripts/ensure-services.sh`")
    return queue


def _mos(count: int, prefix: str) -> list[Message]:
    now = time.time()
    return [
        Message(f"{prefix}{n}", "56767", f"9198{n:08d}", "VOTE", now, sender=Sender(91, 9800, n))
        for n in range(count)
    ]


async def _take_all(queue: JetStreamQueue, into: list[JetStreamEntry]) -> None:
    """What a dispatcher does with what it gets: hold it (here: forever)."""
    while True:
        into.append(await queue.get())


async def _wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def test_a_live_node_keeps_what_it_holds_and_a_silent_one_hands_it_over(names: dict[str, str]) -> None:
    first = await _node(names)
    second: JetStreamQueue | None = None
    held: list[JetStreamEntry] = []
    holder = asyncio.create_task(_take_all(first, held))
    try:
        await first.put(_mos(HELD, "h"))
        await _wait_for(lambda: len(held) == HELD, 20)  # node_max_pending: it asks for no more
        assert first.held() == HELD
        second = await _node(names)

        # Hold every MO for twice ack_wait: none may go to the other node.
        server_cpu = _nats_server_cpu()
        told0, cpu0 = first.refreshes, time.process_time()
        srv0 = server_cpu() if server_cpu else 0.0
        hold_s = 2 * ACK_WAIT_S
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(second.get(), timeout=hold_s)
        told, cpu = first.refreshes - told0, time.process_time() - cpu0
        srv = server_cpu() - srv0 if server_cpu else None
        info = await first.consumer_info()
        assert info.num_redelivered == 0
        assert info.num_ack_pending == HELD
        # Each held MO is told about every ack_wait / 3 (at most a check interval later).
        assert HELD * (hold_s / (ACK_WAIT_S * 5 / 12) - 1) <= told <= HELD * (hold_s / (ACK_WAIT_S / 3) + 1)

        # MOs finished within ack_wait / 3 cost no in_progress at all.
        await first.put(_mos(200, "q"))
        for _ in range(200):
            quick = await asyncio.wait_for(second.get(), timeout=10)
            await quick.ack()
        assert second.refreshes == 0

        # The holder goes without acknowledging anything (its connection closes, as at a SIGKILL): the
        # other node gets all of it after ack_wait, from the last in_progress.
        gone = time.monotonic()
        await first.close()
        taken: list[JetStreamEntry] = []
        while len(taken) < HELD:
            taken.append(await asyncio.wait_for(second.get(), timeout=ACK_WAIT_S + 5))
        handed_over_s = time.monotonic() - gone
        assert all(d.redelivered for d in taken)
        assert {d.item.id for d in taken} == {f"h{n}" for n in range(HELD)}
        assert ACK_WAIT_S / 4 <= handed_over_s <= ACK_WAIT_S + 1.5
        for entry in taken:
            await entry.ack()

        per_mo_s = told / HELD / hold_s
        print(
            f"\nkeep-alive: {HELD} held {hold_s:g} s at ack_wait {ACK_WAIT_S:g} s: {told} in_progress"
            f" = {per_mo_s:.2f} per held MO per second (at the default ack_wait of"
            f" {NatsSettings().ack_wait_s:g} s: {per_mo_s * ACK_WAIT_S / NatsSettings().ack_wait_s:.2f});"
            f" this process {cpu / told * 1000 * 1000:.1f} ms CPU per 1,000 in_progress (both queues);"
            + (f" nats-server {srv / told * 1000 * 1000:.1f} ms CPU per 1,000;" if srv is not None else "")
            + f" handed over {handed_over_s:.2f} s after the holder went"
        )
    finally:
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)
        await first.close()
        if second is not None:
            await second.close()
