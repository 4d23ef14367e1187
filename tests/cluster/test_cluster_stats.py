"""``GET /v1/stats`` in a cluster: any node answers for all of them (rows per node in PostgreSQL)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_harness import running_cluster

from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow


def test_every_node_reports_the_whole_clusters_figures(tmp_path: Path) -> None:
    with (
        CallbackRecorder.in_thread(Answer.text("OK")) as app,
        running_cluster(tmp_path, 2, nats={}) as cluster,
    ):
        first, second = cluster.nodes
        resp = httpx.post(
            first.url + "/v1/clients",
            json={"name": "app", "shortcodes": ["56767"], "callback_url": app.url},
            headers=cluster.admin(),
        )
        assert resp.status_code == 201, resp.text
        # Listing the clients on the second node loads its registry now, not at its next refresh.
        assert httpx.get(second.url + "/v1/clients", headers=cluster.admin()).status_code == 200
        for n, node in enumerate([first, first, first, second, second]):
            pushed = httpx.post(
                node.url + "/v1/inbound",
                json={"shortcode": "56767", "msisdn": f"98100{n:05d}", "message": "VOTE"},
                headers=cluster.ingest(),
            )
            assert pushed.status_code == 202, pushed.text

        def figures(url: str) -> dict[str, Any]:
            got = httpx.get(url + "/v1/stats", params={"window": "5m"}, headers=cluster.admin())
            assert got.status_code == 200, got.text
            return dict(got.json())

        deadline = time.monotonic() + 20
        while True:
            docs = [figures(node.url) for node in cluster.nodes]
            if all(d["totals"]["accepted"] == 5 and d["totals"]["outcomes"]["reply"] == 5 for d in docs):
                break
            assert time.monotonic() < deadline, str(
                [(d["totals"]["outcomes"], d["totals"]["replies"]) for d in docs]
            )
            time.sleep(0.3)
        doc = docs[0]
        assert {n["name"].split("/")[0] for n in doc["nodes"]} == {"node1", "node2"}  # "/w<i>": workers
        assert doc["clients"][0]["callbacks"] == 5
        deadline = time.monotonic() + 10
        while sum(figures(first.url)["series"]["mo_in"]) != 5:  # node2's seconds come from the journal
            assert time.monotonic() < deadline
            time.sleep(0.3)
