"""``mogateway serve --workers N`` as an operator runs it: one port and one journal shared by N worker
processes. A client's cap holds across them, a client registered on one routes on all at once, a
reply leaves over the bind its MO came in on whichever worker holds it, and a SIGKILLed worker loses
nothing and sends no reply twice."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_harness import (
    FINAL,
    INGEST_TOKEN,
    GatewayClient,
    ServeProcess,
    serve_env,
    start_serve,
    worker_pids,
)

from mogateway.cli.supervisor import DIRECTORY_PREFIX, HELD_BY, sweep_worker_directories
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall
from mogateway.testing.smsc import SimulatedSmsc

pytestmark = pytest.mark.slow
SC = "56767"


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return serve_env(tmp_path, **extra)


def peak_concurrency(calls: list[RecordedCall], hold_s: float) -> int:
    """The most callbacks the application held at once (each from its arrival for ``hold_s``)."""
    edges = sorted([(c.at, 1) for c in calls] + [(c.at + hold_s, -1) for c in calls])
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


def push_all(
    url: str, items: list[dict[str, Any]], *, connections: int = 4, batch: int = 25
) -> dict[str, str]:
    """Push ``items`` over several connections (so every worker takes some), as a source does: a batch
    that fails (its worker was killed) is pushed again. Returns source id -> message id."""
    accepted: dict[str, str] = {}
    batches = [items[i : i + batch] for i in range(0, len(items), batch)]

    def send(chunk: list[dict[str, Any]]) -> list[tuple[str, str]]:
        for _attempt in range(60):
            with httpx.Client(timeout=10) as http:  # a connection of its own: the kernel picks a worker
                try:
                    resp = http.post(
                        url + "/v1/inbound/batch",
                        json=chunk,
                        headers={"authorization": f"Bearer {INGEST_TOKEN}"},
                    )
                except httpx.HTTPError:
                    time.sleep(0.1)
                    continue
            if resp.status_code == 200:
                return [(i["id"], r["id"]) for i, r in zip(chunk, resp.json()["results"], strict=True)]
            time.sleep(0.1)
        raise AssertionError("a batch could not be pushed within 60 attempts")

    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        for pairs in pool.map(send, batches):
            accepted.update(pairs)
    return accepted


def wait_all_final(gw: GatewayClient, count: int, timeout: float = 90.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        listed: list[dict[str, Any]] = []
        before = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if before:
                params["before"] = before
            page = gw.admin("GET", "/v1/messages", params=params).json()
            listed.extend(page["messages"])
            before = page.get("next")
            if not before:
                break
        states = collections.Counter(m["state"] for m in listed)
        if len(listed) == count and all(m["state"] in FINAL for m in listed):
            return listed
        assert time.monotonic() < deadline, f"{len(listed)} of {count} stored; states {dict(states)}"
        time.sleep(0.3)


def metric_values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for line in text.splitlines():
        found = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if found:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', found.group(1))))
            out[labels] = float(found.group(2))
    return out


# ------------------------------------------------------------------------------------------ caps


def test_a_clients_cap_holds_across_workers_and_a_large_cap_is_shared_by_them(tmp_path: Path) -> None:
    hold = 0.25
    with (
        CallbackRecorder.in_thread(Answer.late(hold, "ok")) as small_app,
        CallbackRecorder.in_thread(Answer.late(hold, "ok")) as large_app,
    ):
        serve = start_serve(tmp_path, env_for(tmp_path), args=("--workers", "2"))
        gw = GatewayClient(serve.url)
        try:
            assert len(worker_pids(serve.process.pid)) == 2
            small = gw.add_client(
                name="small",
                shortcodes=[SC],
                keywords=["SMALL"],
                callback_url=small_app.url,
                max_concurrency=3,
            )
            large = gw.add_client(
                name="large",
                shortcodes=[SC],
                keywords=["LARGE"],
                callback_url=large_app.url,
                max_concurrency=6,
            )
            items = [
                {"shortcode": SC, "msisdn": "919810012345", "message": f"{kw} {n}", "id": f"{kw}-{n}"}
                for n in range(120)
                for kw in ("SMALL", "LARGE")
            ]
            accepted = push_all(serve.url, items)
            assert len(accepted) == len(items)
            listed = wait_all_final(gw, len(items))
            assert {m["state"] for m in listed} == {"replied"}
            metrics = gw.admin("GET", "/metrics").text
        finally:
            gw.close()
            serve.stop()
        # The small client's 3 were never exceeded; the large one's 6 were shared by both workers (3
        # each) and used in full, never more.
        assert 2 <= peak_concurrency(small_app.calls, hold) <= 3
        assert 5 <= peak_concurrency(large_app.calls, hold) <= 6
        assert len(small_app.calls) == len(large_app.calls) == 120
    callbacks = metric_values(metrics, "mogateway_callbacks_total")
    by_worker: dict[str, dict[str, float]] = collections.defaultdict(dict)
    for labels, value in callbacks.items():
        d = dict(labels)
        by_worker[d["client"]][d["worker"]] = value
    assert set(by_worker[large["id"]]) == {"0", "1"} and min(by_worker[large["id"]].values()) > 20
    assert len(by_worker[small["id"]]) == 1 and sum(by_worker[small["id"]].values()) == 120


def test_a_client_registered_on_one_worker_routes_on_every_worker_at_once(tmp_path: Path) -> None:
    with CallbackRecorder.in_thread(Answer.text("hi")) as app:
        serve = start_serve(tmp_path, env_for(tmp_path), args=("--workers", "2"))
        gw = GatewayClient(serve.url)
        try:
            for round_ in range(5):  # each round: a new shortcode, registered, then MOs on new connections
                shortcode = f"5{round_}100"
                gw.add_client(name=f"app{round_}", shortcodes=[shortcode], callback_url=app.url)
                items = [
                    {
                        "shortcode": shortcode,
                        "msisdn": "919810012345",
                        "message": f"M {n}",
                        "id": f"r{round_}-{n}",
                    }
                    for n in range(40)
                ]
                push_all(serve.url, items, connections=8, batch=5)
            listed = wait_all_final(gw, 200)
        finally:
            gw.close()
            serve.stop()
    assert collections.Counter(m["state"] for m in listed) == {"replied": 200}


# ------------------------------------------------------------------------------------------ crashes


def test_sigkilled_workers_lose_no_mo_and_send_no_reply_twice(tmp_path: Path) -> None:
    total = 3000
    items = [
        {"shortcode": SC, "msisdn": "919810012345", "message": f"MO {n:05d}", "id": f"src-{n}"}
        for n in range(total)
    ]
    with CallbackRecorder.in_thread(Answer.late(0.02, "thanks")) as app:
        env = env_for(tmp_path, MOGATEWAY_LOG_LEVEL="info")
        serve = start_serve(tmp_path, env, args=("--workers", "2"))
        gw = GatewayClient(serve.url)
        kills: list[tuple[int, int]] = []
        try:
            gw.add_client(shortcodes=[SC], callback_url=app.url, max_concurrency=40)

            def killer() -> None:
                # Three SIGKILLs spread over the run: worker 1, worker 0, worker 1 again.
                for share, worker in ((0.15, 1), (0.45, 0), (0.75, 1)):
                    while len(app.calls) < share * total:
                        time.sleep(0.005)
                    kills.append((worker, serve.kill_worker(worker)))
                    wait_restarted(serve, worker, kills[-1][1])

            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                killing = pool.submit(killer)
                accepted = push_all(serve.url, items, connections=4, batch=50)
                killing.result(timeout=120)
            listed = wait_all_final(gw, total, timeout=120)
            details = {m["id"]: gw.message(m["id"]) for m in listed if m["state"] != "replied"}
        finally:
            gw.close()
            serve.stop()
    assert len(kills) == 3
    assert len(accepted) == total and len(set(accepted.values())) == total  # each MO stored once
    assert {m["id"] for m in listed} == set(accepted.values())
    # Every MO reached the application, as the message the source was given.
    seen: dict[str, set[str]] = collections.defaultdict(set)
    for call in app.calls:
        seen["src-" + str(int(call.json()["message"].split()[1]))].add(call.headers["x-mogateway-message-id"])
    assert set(seen) == set(accepted)
    assert all(seen[s] == {m} for s, m in accepted.items())
    # A reply at most once: replied, or — an MO whose reply was being handed over at a kill — a reply
    # recorded as possibly sent, never sent again.
    assert not details, {k: v["state"] for k, v in details.items()}


def wait_restarted(serve: ServeProcess, worker: int, old_pid: int, timeout: float = 30.0) -> None:
    """Until the supervisor says the worker serves again (with a new pid)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = worker_pids(serve.process.pid).get(worker)
        if (
            pid is not None
            and pid != old_pid
            and f"worker {worker} serves again (pid {pid})" in serve.stderr()
        ):
            return
        time.sleep(0.05)
    raise AssertionError(
        f"worker {worker} was not serving again within {timeout} s: {serve.stderr()[-2000:]}"
    )


# ------------------------------------------------------------------------------------------ SMPP


@contextlib.asynccontextmanager
async def two_binds_gateway(
    tmp_path: Path, *, workers: int, system_ids: tuple[str, str], cap: int = 20
) -> AsyncIterator[tuple[SimulatedSmsc, GatewayClient, CallbackRecorder]]:
    """``mogateway serve --workers N`` with two binds ``op0``/``op1`` (as ``system_ids``) to one
    simulator, held by workers 0 and 1, and one client of cap ``cap`` (20: at least twice the workers,
    every worker takes a share; below twice the workers, one worker dispatches it) answering every MO:
    the simulator, the gateway and the application."""
    smsc = await SimulatedSmsc().start()
    config = tmp_path / "gateway.toml"
    config.write_text(
        "".join(
            f"""
[[smpp.binds]]
name = "op{n}"
host = "127.0.0.1"
port = {smsc.port}
system_id = "{system_id}"
mode = "transceiver"
throughput = 1000
window = 50
"""
            for n, system_id in enumerate(system_ids)
        )
    )
    app_recorder = CallbackRecorder(Answer.text("got it"))
    await app_recorder.start()
    serve = await asyncio.to_thread(
        start_serve, tmp_path, env_for(tmp_path), args=("--config", str(config), "--workers", str(workers))
    )
    gw = GatewayClient(serve.url)
    try:
        await asyncio.to_thread(
            gw.add_client, shortcodes=[SC], callback_url=app_recorder.url, max_concurrency=cap
        )
        deadline = time.monotonic() + 20
        while len([c for c in smsc.clients if c.system_id]) < 2:
            assert time.monotonic() < deadline, "the two binds did not bind"
            await asyncio.sleep(0.05)
        binds = (await asyncio.to_thread(gw.admin, "GET", "/v1/binds")).json()["binds"]
        assert {b["name"]: b["node"].rsplit("/", 1)[1] for b in binds} == {"op0": "w0", "op1": "w1"}
        yield smsc, gw, app_recorder
    finally:
        gw.close()
        await asyncio.to_thread(serve.stop)
        await app_recorder.stop()
        await smsc.stop()


async def run_two_binds(
    tmp_path: Path, *, workers: int, per_bind: int, cap: int = 20
) -> tuple[list[RecordedCall], list[Any]]:
    """:func:`two_binds_gateway` with the binds as ``esme0``/``esme1``; ``per_bind`` MOs delivered over
    each (msisdn digit 7 = the bind). Waits until every MO is final and a second reply would have
    arrived; the callbacks and submit_sm."""
    ids = ("esme0", "esme1")
    async with two_binds_gateway(tmp_path, workers=workers, system_ids=ids, cap=cap) as (smsc, gw, app):
        for n in range(per_bind):
            for b in range(2):
                smsc.queue_mo(f"9198100{b}{n:04d}", SC, f"HELLO {b} {n}", system_id=f"esme{b}")
        await smsc.wait_outbox_empty(60)
        await smsc.wait_submits(2 * per_bind, timeout=60)
        await asyncio.to_thread(wait_all_final, gw, 2 * per_bind)
        await asyncio.sleep(0.5)  # a second reply to any MO would arrive now
        return list(app.calls), list(smsc.submits)


async def test_each_reply_leaves_over_its_mos_bind_whichever_worker_holds_it(tmp_path: Path) -> None:
    per_bind = 150
    # A client of cap 2 on three workers is dispatched by one of them, which holds at most one of the
    # two binds: the replies to the other bind's MOs go back to the worker holding it.
    calls, submits = await run_two_binds(tmp_path, workers=3, per_bind=per_bind, cap=2)
    assert len(calls) == 2 * per_bind
    assert len(submits) == 2 * per_bind
    by_number = collections.Counter((s.system_id, s.pdu.destination_addr) for s in submits)
    assert set(by_number.values()) == {1}
    assert {(sid, number[7]) for sid, number in by_number} == {("esme0", "0"), ("esme1", "1")}


async def test_with_a_bind_per_worker_each_mo_is_dispatched_and_answered_by_its_binds_worker(
    tmp_path: Path,
) -> None:
    per_bind = 300
    calls, submits = await run_two_binds(tmp_path, workers=2, per_bind=per_bind)
    assert len(calls) == 2 * per_bind
    by_number = collections.Counter((s.system_id, s.pdu.destination_addr) for s in submits)
    assert set(by_number.values()) == {1}  # one reply per MO
    assert {(sid, number[7]) for sid, number in by_number} == {("esme0", "0"), ("esme1", "1")}
    # the journal names the worker that dispatched each MO: the one holding the bind it came on
    with contextlib.closing(sqlite3.connect(tmp_path / "journal.db")) as db:
        owners = collections.Counter(
            db.execute("SELECT origin, owner, state FROM messages JOIN message_states USING (id)").fetchall()
        )
    assert owners == {("smpp:op0", 0, "delivered"): per_bind, ("smpp:op1", 1, "delivered"): per_bind}


async def test_an_mo_redelivered_over_the_other_bind_of_its_account_is_one_mo(tmp_path: Path) -> None:
    # Two binds of one account, a worker each. The SMSC sends every MO over one bind and again over the
    # other: 100 after the first was answered, 100 at the same moment (two workers storing it at once).
    # Content ids only (no SMSC message id): the journal recognises the repeat inside its write.
    count = 200
    async with two_binds_gateway(tmp_path, workers=2, system_ids=("esme", "esme")) as (smsc, gw, app):
        for n in range(count):
            number, text = f"91981001{n:04d}", f"VOTE {n}"
            if n % 2:
                first, again = (
                    await smsc.inject_mo(number, SC, text),
                    await smsc.inject_mo(number, SC, text, receiver=1),
                )
            else:
                first, again = await asyncio.gather(
                    smsc.inject_mo(number, SC, text), smsc.inject_mo(number, SC, text, receiver=1)
                )
            assert first == again == [0]
        await smsc.wait_submits(count, timeout=60)
        await asyncio.to_thread(wait_all_final, gw, count)
        await asyncio.sleep(0.5)  # a second callback or reply to any MO would arrive now
        calls, submits = list(app.calls), list(smsc.submits)
    assert len(calls) == count
    assert collections.Counter(s.pdu.destination_addr for s in submits) == {
        f"91981001{n:04d}": 1 for n in range(count)
    }
    with contextlib.closing(sqlite3.connect(tmp_path / "journal.db")) as db:
        stored = db.execute("SELECT count(*), count(DISTINCT msisdn) FROM messages").fetchone()
    assert stored == (count, count)


# ------------------------------------------------------------------------------------------ directories


def test_a_start_removes_the_workers_directories_only_of_supervisors_that_are_gone(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    gone, alive, unmarked = (root / f"{DIRECTORY_PREFIX}{n}" for n in ("gone", "alive", "old"))
    for d in (gone, alive, unmarked):
        d.mkdir()
        (d / "w0.sock").touch()
    other = root / "something-else"
    other.mkdir()
    (gone / HELD_BY).touch()  # its supervisor died: nobody holds the file
    (alive / HELD_BY).touch()
    holder = subprocess.Popen(  # a live supervisor holds its file
        [sys.executable, "-c", HOLD, str(alive / HELD_BY)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert sweep_worker_directories(str(root)) == 1
        assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in (alive, unmarked, other))
    finally:
        holder.kill()
        holder.wait()
    assert sweep_worker_directories(str(root)) == 1  # gone now too
    assert not alive.exists() and unmarked.exists()


HOLD = """
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A TMPDIR with a short path: the workers' sockets live in it, and an AF_UNIX path is at most 107
    bytes (a pytest-xdist worker's tmp_path is ten longer)."""
    root = Path(tempfile.mkdtemp(prefix="mgw-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_sigkilled_supervisors_directory_is_removed_by_the_next_start(
    tmp_path: Path, short_tmpdir: Path
) -> None:
    root = short_tmpdir
    env = env_for(tmp_path, TMPDIR=str(root))

    def directories() -> list[Path]:
        return sorted(root.glob(f"{DIRECTORY_PREFIX}*"))

    first = start_serve(tmp_path, env, log_name="first", args=("--workers", "2"))
    try:
        (left,) = directories()
        assert (left / HELD_BY).exists()  # (a worker's socket may not be there yet: another one answered)
    finally:
        first.kill()  # SIGKILL to the supervisor and its workers: no cleanup runs
    assert directories() == [left]
    second = start_serve(tmp_path, env, log_name="second", args=("--workers", "2"))
    try:
        (now,) = directories()
        assert now != left
    finally:
        assert second.stop() == 0
    assert directories() == []
