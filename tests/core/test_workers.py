"""The worker plan (core/workers.py): binds, dispatchers, the owner of an MO and each worker's share of
a client's cap."""

from __future__ import annotations

import collections

import pytest

from mogateway.core.clients import ClientRecord
from mogateway.core.workers import WorkerPlan, stable_hash


def client(client_id: str, cap: int) -> ClientRecord:
    return ClientRecord(
        client_id, client_id, ["56767"], [], "https://app.example/cb", "t", max_concurrency=cap
    )


def test_stable_hash_is_the_same_in_every_process() -> None:
    # blake2b, not hash(): a fixed value, whatever PYTHONHASHSEED is.
    assert stable_hash("cl_1") == 0x43F731CDAA6738EC
    assert stable_hash("a") != stable_hash("b")


def test_binds_go_round_the_workers_and_every_worker_dispatches() -> None:
    plan = WorkerPlan(count=3, binds=4)
    assert [plan.bind_worker(j) for j in range(4)] == [0, 1, 2, 0]
    assert plan.dispatchers == (0, 1, 2)
    # a worker holding a bind dispatches too (share nothing per bind: its MOs stay in its process)
    assert WorkerPlan(count=3, binds=1).dispatchers == (0, 1, 2)
    assert WorkerPlan(count=2, binds=0).dispatchers == (0, 1)
    with pytest.raises(ValueError):
        WorkerPlan(count=0)


def test_a_small_client_has_one_worker_and_its_whole_cap() -> None:
    plan = WorkerPlan(count=4)
    small = client("cl_small", 7)
    (worker,) = plan.workers_for(small)
    assert plan.lane_cap(small, worker) == 7
    ids = [f"m{n}" for n in range(200)]
    assert {plan.owner_of(i, small) for i in ids} == {worker}


def test_a_large_client_is_shared_and_the_shares_add_up_to_its_cap() -> None:
    plan = WorkerPlan(count=3)
    big = client("cl_big", 64)
    assert plan.workers_for(big) == (0, 1, 2)
    assert sum(plan.lane_cap(big, w) for w in range(3)) == 64
    owners = collections.Counter(plan.owner_of(f"m{n}", big) for n in range(3000))
    assert set(owners) == {0, 1, 2} and min(owners.values()) > 800  # spread evenly


def test_the_owner_of_an_mo_depends_only_on_its_id_route_and_plan() -> None:
    plan = WorkerPlan(count=2)
    big = client("cl_big", 10)
    first = [plan.owner_of(f"m{n}", big) for n in range(100)]
    assert first == [WorkerPlan(count=2).owner_of(f"m{n}", big) for n in range(100)]
    unrouted = collections.Counter(plan.owner_of(f"m{n}", None) for n in range(1000))
    assert set(unrouted) == {0, 1}
    assert WorkerPlan(count=1).owner_of("m1", big) == 0


def test_an_mo_stays_with_the_worker_holding_its_bind_when_that_worker_may_dispatch_it() -> None:
    plan = WorkerPlan(count=3, binds=3)  # every worker holds a bind: all dispatch
    shared = client("cl_shared", 30)  # cap >= 2 x dispatchers: every worker takes a share
    small = client("cl_small", 2)  # one worker only
    (small_worker,) = plan.workers_for(small)
    for bind in range(3):
        ids = [f"m{bind}-{n}" for n in range(300)]
        assert {plan.owner_of(i, shared, bind) for i in ids} == {plan.bind_worker(bind)}
        assert {plan.owner_of(i, None, bind) for i in ids} == {plan.bind_worker(bind)}  # not routed
        # a client the bind's worker does not dispatch: its own worker, whichever bind the MO came on
        assert {plan.owner_of(i, small, bind) for i in ids} == {small_worker}
    # one bind on three workers: its MOs stay with its worker too, within that worker's share of the
    # cap; MOs from elsewhere (HTTP) are spread over all three by their id
    one_bind = WorkerPlan(count=3, binds=1)
    assert {one_bind.owner_of(f"m{n}", shared, 0) for n in range(1000)} == {0}
    assert one_bind.lane_cap(shared, 0) == 10
    owners = collections.Counter(one_bind.owner_of(f"m{n}", shared) for n in range(1000))
    assert set(owners) == {0, 1, 2}


def test_a_worker_outside_a_clients_share_serves_its_stray_mos_one_at_a_time() -> None:
    plan = WorkerPlan(count=4)
    small = client("cl_small", 3)
    (worker,) = plan.workers_for(small)
    other = next(w for w in range(4) if w != worker)
    assert plan.lane_cap(small, other) == 1
