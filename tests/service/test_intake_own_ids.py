"""With worker processes, an MO without a source id is given a fresh id that the worker storing it owns
(when it may dispatch the MO's client), while the owner stays the plan's pure function of the id
(service/intake.py, core/workers.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from mogateway.core.clients import ClientRecord, RoutingTable
from mogateway.core.message import Arrival, Message
from mogateway.core.ports import Stored
from mogateway.core.timeline import State
from mogateway.core.workers import WorkerPlan
from mogateway.edges.numbering_files import sender_resolver
from mogateway.service.intake import Intake
from mogateway.service.metrics import Metrics


class Journal:
    def __init__(self) -> None:
        self.stored: list[tuple[Message, int]] = []

    async def store(
        self,
        messages: Sequence[Message],
        owners: Sequence[int] | None = None,
        repeat_since: Sequence[float | None] | None = None,
    ) -> list[Stored]:
        assert owners is not None and repeat_since is None
        self.stored.extend(zip(messages, owners, strict=True))
        return [Stored(m.id, State.QUEUED, False, None) for m in messages]


class Queue:
    def __init__(self) -> None:
        self.put_ids: list[str] = []

    async def put(self, items: Sequence[Message], redelivered: bool = False, *, generation: str = "") -> None:
        self.put_ids.extend(m.id for m in items)


BIG = ClientRecord("cl_big", "big", ["56767"], [], "https://a.example/cb", "t", max_concurrency=64)
SMALL = ClientRecord("cl_small", "small", ["56768"], [], "https://b.example/cb", "t", max_concurrency=1)


def worker(me: int, plan: WorkerPlan) -> tuple[Intake, Journal, Queue]:
    table = RoutingTable([BIG, SMALL])

    def owner_of(m: Message) -> int:
        return plan.owner_of(m.id, table.route(m.shortcode, m.text) if m.accepted else None)

    journal, queue = Journal(), Queue()
    seeded = random.Random(me)
    intake = Intake(
        journal,  # type: ignore[arg-type]
        queue,  # type: ignore[arg-type]
        sender_resolver(),
        Metrics(),
        random_bytes=seeded.randbytes,
        owner_of=owner_of,
        me=me,
    )
    return intake, journal, queue


def arrival(n: int, shortcode: str = "56767", source_id: str | None = None) -> Arrival:
    return Arrival(Message("", shortcode, f"9198100{n:05d}", f"VOTE {n}", 1.7e9, "http", source_id=source_id))


async def test_fresh_ids_are_owned_by_the_worker_that_stores_them() -> None:
    plan = WorkerPlan(count=2)
    assert plan.workers_for(BIG) == (0, 1)  # the big client is dispatched by both workers
    for me in (0, 1):
        intake, journal, queue = worker(me, plan)
        await intake.accept([arrival(n) for n in range(2000)])
        owners = [owner for _, owner in journal.stored]
        # Every owner recorded is still the plan's pure function of the id...
        assert all(owner == plan.owner_of(m.id, BIG) for m, owner in journal.stored)
        # ...and nearly all are this worker (8 draws of 1 in 2 each: about 1 in 256 stays elsewhere).
        assert owners.count(me) >= 1980, owners.count(me)
        assert len({m.id for m, _ in journal.stored}) == 2000 and len(queue.put_ids) == 2000


async def test_ids_from_the_source_and_clients_this_worker_does_not_dispatch_keep_their_owner() -> None:
    plan = WorkerPlan(count=2)
    (small_worker,) = plan.workers_for(SMALL)
    other = 1 - small_worker
    intake, journal, _ = worker(other, plan)
    await intake.accept([arrival(n, shortcode="56768") for n in range(200)])
    assert {owner for _, owner in journal.stored} == {small_worker}
    intake, journal, _ = worker(0, plan)
    pushed = [arrival(n, source_id=f"op-{n}") for n in range(200)]
    await intake.accept(pushed)
    again, journal_again, _ = worker(1, plan)
    await again.accept(pushed)
    # An operator's id makes the message id: the same on any worker, whoever stores it.
    assert [m.id for m, _ in journal.stored] == [m.id for m, _ in journal_again.stored]
    assert {owner for _, owner in journal.stored} == {0, 1}
