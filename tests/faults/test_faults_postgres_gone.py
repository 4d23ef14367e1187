"""PostgreSQL going away under traffic and coming back (issue 28 §1), with no restart: the gateway's
journal connection runs through a TCP forwarder the test cuts for some seconds (the shared PostgreSQL
server itself is never touched). Intake answers 503 meanwhile, ``/readyz`` says the journal cannot
write, the answers of callbacks already made are kept and recorded once PostgreSQL is back, every MO
finishes with one callback, and the log has no traceback."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from faults_harness import FINAL, Serve, TcpCut, callbacks_per_message, log_lines, wait_for

from mogateway.testing.recorder import Answer, CallbackRecorder
from postgres_databases import throwaway_database

pytestmark = pytest.mark.slow

SC = "56767"


def batch(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"pg-{n}", "shortcode": SC, "msisdn": "919810012345", "message": f"hello {n}"}
        for n in range(start, start + count)
    ]


def test_postgresql_gone_and_back_loses_nothing_and_calls_nobody_twice(tmp_path: Path) -> None:
    with (
        throwaway_database("mogw_faults") as url,
        CallbackRecorder.in_thread(Answer.text("OK thanks", delay_s=0.05)) as app,
    ):
        cut = TcpCut(5432)
        through = re.sub(r"@[^/]+/", f"@127.0.0.1:{cut.port}/", url)
        try:
            gw = Serve(tmp_path, {"MOGATEWAY_DATABASE": through})
            try:
                run(gw, app, cut)
            finally:
                gw.stop()
        finally:
            cut.close()
    log = gw.log()
    assert "Traceback" not in log, log[-6000:]
    workers = len(set(re.findall(r"\[w(\d+)\]", log))) or 1  # each worker process logs for itself
    assert 1 <= len(log_lines(log, r"journal write failed \(unavailable\)")) <= workers, log[-6000:]
    for kind in ("disk_full", "io_error", "other"):
        assert not log_lines(log, rf"journal write failed \({kind}\)"), log[-6000:]
    assert len(log_lines(log, "asyncpg.pool")) <= 2 * workers, log[-6000:]


def run(gw: Serve, app: CallbackRecorder, cut: TcpCut) -> None:
    resp = gw.admin(
        "POST",
        "/v1/clients",
        json={"name": "app", "shortcodes": [SC], "callback_url": app.url, "max_concurrency": 16},
    )
    assert resp.status_code == 201, resp.text
    accepted: dict[str, str] = {}
    for n in range(10):
        items = batch(n * 200, 200)
        resp = gw.push(items)
        assert resp.status_code == 200, resp.text
        accepted.update((i["id"], r["id"]) for i, r in zip(items, resp.json()["results"], strict=True))
    wait_for("callbacks under way", lambda: len(app.calls) >= 50, 20)

    cut.cut()  # PostgreSQL is gone for the gateway
    refused = gw.push(batch(10**5, 10))
    assert refused.status_code == 503, refused.text
    assert refused.headers["content-type"] == "application/problem+json"

    def not_ready() -> dict[str, Any] | None:
        r = gw.readyz()
        return r.json() if r.status_code == 503 else None

    body = wait_for("/readyz 503 while PostgreSQL is gone", not_ready, 20)
    assert "journal_not_writable" in {reason["kind"] for reason in body["reasons"]}, body
    time.sleep(1.0)  # the callbacks in flight when it went come back
    calls_then = len(app.calls)
    time.sleep(3.0)  # an outage of some seconds (what is checked: no callback is made meanwhile)
    assert len(app.calls) - calls_then <= 16, "callbacks made while nothing could be recorded"

    cut.restore()
    started = time.monotonic()

    def all_finished() -> list[dict[str, Any]] | None:
        resp = gw.admin("GET", "/v1/messages", params={"limit": 1})
        if resp.status_code != 200:
            return None
        listed = {m["id"]: m for m in gw.messages()}
        mine = [listed.get(mid) for mid in accepted.values()]
        return [m for m in mine if m is not None] if all(m and m["state"] in FINAL for m in mine) else None

    finished = wait_for("every acknowledged MO finished", all_finished, 60)
    took = time.monotonic() - started
    print(f"{len(accepted)} acknowledged; all finished {took:.1f} s after PostgreSQL came back")
    assert len(finished) == len(accepted)
    assert {m["state"] for m in finished} == {"replied"}
    calls = callbacks_per_message(app.calls)
    assert all(calls[mid] == 1 for mid in accepted.values()), "an MO was called twice (or never)"
    wait_for("/readyz 200", lambda: gw.readyz().status_code == 200, 20)
    assert gw.push(batch(10**6, 5)).status_code == 200
