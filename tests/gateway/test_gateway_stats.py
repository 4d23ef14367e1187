"""``GET /v1/stats``: figures from the gateway's own counters, kept in the journal across restarts.

Each test counts a whole gateway's figures, so each has a ``mogateway serve`` of its own, with several
workers: the figures are every worker's, added up."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway_harness import GatewayClient, serve_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder


def wait_for(
    get: Callable[[], dict[str, Any]], check: Callable[[dict[str, Any]], bool], timeout: float = 10.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        doc = get()
        if check(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"figures never matched: {doc['totals']}")
        time.sleep(0.2)


def stats(gw: GatewayClient, window: str = "5m") -> dict[str, Any]:
    resp = gw.admin("GET", "/v1/stats", params={"window": window})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def test_outcomes_clients_series_and_latency(tmp_path: Path, app: CallbackRecorder) -> None:
    with (
        CallbackRecorder.in_thread(Answer(status=500, body=b"no")) as broken,
        serve_gateway(tmp_path, stats_flush_s=0.5) as gw,
    ):
        good = gw.add_client(name="good", shortcodes=["56767"], callback_url=app.url)
        bad = gw.add_client(name="bad", shortcodes=["56768"], callback_url=broken.url)
        ids = [gw.push("56767", f"HI {n}")["id"] for n in range(3)]
        ids.append(gw.push("56768", "HI")["id"])
        ids.append(gw.push("51111", "NOBODY")["id"])
        refused = gw.ingest(
            "POST", "/v1/inbound", json={"shortcode": "56767", "msisdn": "123", "message": "x"}
        )
        assert refused.status_code == 422
        for message_id in ids:
            gw.wait_state(message_id)

        # Each worker flushes its own figures: wait until every outcome is in (the workers that took the
        # MOs are not the ones that dispatched them all), then compare the whole.
        doc = wait_for(
            lambda: stats(gw),
            lambda d: (
                d["totals"]["replies"] == 3
                and d["totals"]["rejected"] == 1
                and d["totals"]["outcomes"]["http_error"] == 1
                and d["totals"]["outcomes"]["unroutable"] == 1
            ),
        )
        totals = doc["totals"]
        assert totals["outcomes"] == {
            "reply": 3,
            "blank": 0,
            "timeout": 0,
            "http_error": 1,
            "bad_response": 0,
            "failed": 0,
            "unroutable": 1,
            "rejected": 1,
        }
        assert totals["accepted"] == 5 and totals["mo_in"] == 6 and totals["callbacks"] == 4
        assert totals["latency_ms"]["p50"] is not None and totals["latency_ms"]["p50"] > 0
        clients = {c["id"]: c for c in doc["clients"]}
        assert clients[good["id"]]["name"] == "good"
        assert clients[good["id"]]["callbacks"] == 3 and clients[good["id"]]["reply_rate"] == 1.0
        assert clients[bad["id"]]["outcomes"]["http_error"] == 1 and clients[bad["id"]]["reply_rate"] == 0.0
        assert clients[good["id"]]["latency_ms"]["p99"] >= clients[good["id"]]["latency_ms"]["p50"]
        series = doc["series"]
        assert len(series["mo_in"]) == len(series["replies"]) == 300 and series["step_s"] == 1
        assert sum(series["mo_in"]) == 6 and sum(series["replies"]) == 3
        assert doc["queue_lag"] == 0 and doc["binds"] == [] and doc["nodes"][0]["self"] is True


def test_figures_survive_a_restart_and_add_up(tmp_path: Path, app: CallbackRecorder) -> None:
    with serve_gateway(tmp_path, stats_flush_s=0.5, node_name="n1") as gw:
        gw.add_client(name="good", shortcodes=["56767"], callback_url=app.url)
        for n in range(4):
            gw.wait_state(gw.push("56767", f"HI {n}")["id"])
        wait_for(lambda: stats(gw, "1h"), lambda d: d["totals"]["replies"] == 4)
    with serve_gateway(tmp_path, stats_flush_s=0.5, node_name="n1") as gw:
        assert stats(gw, "1h")["totals"]["replies"] == 4  # from the journal: memory is new
        gw.wait_state(gw.push("56767", "ONE MORE")["id"])
        doc = wait_for(lambda: stats(gw, "today"), lambda d: d["totals"]["replies"] == 5)
        assert doc["totals"]["outcomes"]["reply"] == 5
    with serve_gateway(tmp_path, stats_flush_s=0.5, node_name="n1") as gw:
        assert stats(gw, "1h")["totals"]["outcomes"]["reply"] == 5  # nothing replaced, nothing lost


def test_window_is_checked_and_the_admin_token_required(gw: GatewayClient) -> None:
    for bad in ("week", "0m", "30s", "999d"):
        resp = gw.admin("GET", "/v1/stats", params={"window": bad})
        assert resp.status_code == 422, bad
        assert resp.headers["content-type"] == "application/problem+json"
        assert resp.json()["field"] == "window"
    assert gw.request("GET", "/v1/stats").status_code == 401
    assert gw.request("GET", "/v1/stats", token=gw.ingest_token).status_code == 401
    doc = stats(gw, "today")
    assert doc["window"]["name"] == "today" and doc["totals"]["mo_in"] == 0
