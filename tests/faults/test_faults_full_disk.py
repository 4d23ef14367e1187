"""The full-disk episode of issue 28, reproduced: ``mogateway serve`` (default workers) with its SQLite
journal on a 12 MiB tmpfs, batches pushed until refused, then the tmpfs grown to 96 MiB — no restart.

The real journal code path fails with SQLite's own "database or disk is full". What must hold:
intake answers 503 and loses nothing it acknowledged; ``/readyz`` answers 503 with the reason while the
journal cannot write; no answered callback ends ``failed`` by the gateway's own error; every MO finishes
without a restart soon after the space is back, with one callback each; the log has no traceback and
one line per kind of failure (per worker process).
"""

from __future__ import annotations

import errno
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from faults_harness import FINAL, Serve, callbacks_per_message, grow, log_lines, tmpfs, wait_for

from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow

SC = "56767"
#: Seconds the gateway has to finish every acknowledged MO once the space is back.
FINISH_WITHIN_S = 60.0


def batch(start: int, count: int) -> list[dict[str, Any]]:
    filler = "journal filler " * 20  # ~300 characters: a few thousand MOs fill the file system
    return [
        {"id": f"mo-{n}", "shortcode": SC, "msisdn": "919810012345", "message": f"{n} {filler}"}
        for n in range(start, start + count)
    ]


def push_until_refused(gw: Serve, *, size: int = 200, limit: int = 400) -> tuple[dict[str, str], Any]:
    """Push batches until the gateway refuses one; source id -> message id of what it acknowledged,
    and the refusal."""
    accepted: dict[str, str] = {}
    for n in range(limit):
        items = batch(n * size, size)
        resp = gw.push(items)
        if resp.status_code == 503:
            return accepted, resp
        assert resp.status_code == 200, resp.text
        for item, result in zip(items, resp.json()["results"], strict=True):
            accepted[item["id"]] = result["id"]
    raise AssertionError(f"{len(accepted)} MOs accepted and never refused")


def fill(path: Path) -> int:
    """Write ``path`` until its file system is full; how many bytes it took."""
    written = 0
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as out:
        for _ in range(100_000):
            try:
                written += out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        else:
            raise AssertionError("the file system never filled up")
        os.fsync(out.fileno())
    return written


def test_a_full_disk_is_an_outage_that_ends_by_itself(tmp_path: Path) -> None:
    answer = Answer.text("OK thanks", delay_s=0.05)  # a backlog is in flight when the disk fills
    with CallbackRecorder.in_thread(answer) as app, tmpfs(tmp_path / "disk", "12m") as disk:
        gw = Serve(
            tmp_path,
            {
                "MOGATEWAY_DATABASE": str(disk / "journal.db"),
                "MOGATEWAY_JOURNAL_MIN_FREE_BYTES": "0",  # no guard: the disk really fills up
            },
        )
        try:
            resp = gw.admin(
                "POST",
                "/v1/clients",
                json={"name": "app", "shortcodes": [SC], "callback_url": app.url, "max_concurrency": 32},
            )
            assert resp.status_code == 201, resp.text

            accepted, refused = push_until_refused(gw)
            assert len(accepted) >= 2000, len(accepted)
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["status"] == 503
            assert "nothing was accepted" in refused.json()["detail"]

            # Whatever else shares the file system takes the last of it: from now on every journal
            # write fails until the space comes back, the answers of the callbacks in flight included.
            fill(disk / "ballast")

            # Not ready while the journal cannot write (each worker answers for itself: ask until the
            # one with answers waiting to be recorded answers).
            def not_ready() -> dict[str, Any] | None:
                r = gw.readyz()
                return r.json() if r.status_code == 503 else None

            body = wait_for("/readyz 503", not_ready, 20)
            assert body["ready"] is False
            kinds = {reason["kind"] for reason in body["reasons"]}
            assert "journal_not_writable" in kinds, body
            assert "disk" in body["detail"], body
            assert gw.http.get(gw.url + "/healthz").status_code == 200  # liveness is not readiness

            def scraped_not_ready() -> str | None:
                text = gw.admin("GET", "/metrics").text
                return text if re.search(r"^mogateway_ready(\{[^}]*\})? 0\.0$", text, re.M) else None

            metrics = wait_for("a worker's mogateway_ready 0", scraped_not_ready, 10)
            full = re.findall(
                r'^mogateway_journal_write_errors_total\{kind="disk_full"[^}]*\} (\S+)$', metrics, re.M
            )
            assert full and sum(float(v) for v in full) > 0, metrics[-2000:]

            # The outage goes on: the dispatcher makes no callback it could not record (each lane waits
            # with the answer it holds), and no answered MO is turned into a failure.
            time.sleep(1.0)  # the callbacks in flight when the disk filled come back
            calls_then = len(app.calls)
            time.sleep(2.0)  # an outage of some seconds (what is checked: nothing moves meanwhile)
            more = len(app.calls) - calls_then
            assert more <= 32, f"{more} callbacks made in 2 s while nothing could be recorded"
            failed = [m for m in gw.messages() if m["state"] == "failed"]
            assert not failed, failed[:3]
            body = wait_for("/readyz 503 during the outage", not_ready, 10)
            assert "journal_not_writable" in {reason["kind"] for reason in body["reasons"]}, body

            grow(disk, "96m")
            started = time.monotonic()

            def all_finished() -> list[dict[str, Any]] | None:
                listed = {m["id"]: m for m in gw.messages()}
                mine = [listed.get(mid) for mid in accepted.values()]
                if all(m is not None and m["state"] in FINAL for m in mine):
                    return [m for m in mine if m is not None]
                return None

            finished = wait_for("every acknowledged MO finished", all_finished, FINISH_WITHIN_S)
            took = time.monotonic() - started
            states = {m["state"] for m in finished}
            assert states == {"replied"}, {s: sum(m["state"] == s for m in finished) for s in states}
            assert len(finished) == len(accepted)  # not one acknowledged MO lost

            calls = callbacks_per_message(app.calls)
            assert set(calls) >= set(accepted.values())
            twice = {mid: n for mid, n in calls.items() if n > 1}
            assert not twice, f"{len(twice)} MOs called more than once"

            wait_for(
                "/readyz 200 on every worker",
                lambda: all(gw.readyz().status_code == 200 for _ in range(6)),
                30,
            )
            assert gw.push(batch(10**6, 10)).status_code == 200  # and intake takes MOs again
        finally:
            gw.stop()
        log = gw.log()
        print(f"{len(accepted)} acknowledged; all finished {took:.1f} s after the space came back")
        assert "Traceback" not in log, log[-5000:]
        workers = len(set(re.findall(r"\[w(\d+)\]", log))) or 1  # each worker process logs for itself
        per_kind = {
            kind: len(log_lines(log, rf"journal write failed \({kind}\)"))
            for kind in ("disk_full", "io_error", "unavailable", "other")
        }
        assert per_kind["disk_full"] >= 1, log[-3000:]
        assert all(n <= workers for n in per_kind.values()), (per_kind, log[-5000:])
        for storage_line in (r"journal write failed: ", r"journal checkpoint failed: "):
            assert len(log_lines(log, storage_line)) <= workers, log[-5000:]
