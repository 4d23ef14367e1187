"""The portal in a cluster (two ``serve`` nodes with workers sharing PostgreSQL and JetStream): a session
opened on one node works on the other, sign-out everywhere on one ends it on both, the other node's
pages read the same scoped data (the portal's SQL on PostgreSQL)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "cluster"))
from cluster_harness import register_client, running_cluster

from mogateway.testing.recorder import Answer, CallbackRecorder

from .portal_harness import PASSWORD, csrf_of

pytestmark = pytest.mark.slow


def test_a_portal_session_opened_on_one_node_works_on_the_other(tmp_path: Path) -> None:
    with (
        CallbackRecorder.in_thread(Answer.text("Thanks")) as app,
        running_cluster(tmp_path, 2, nats={}, first=lambda c: register_client(c, app.url)) as cluster,
    ):
        first, second = cluster.nodes
        client = httpx.get(first.url + "/v1/clients", headers=cluster.admin()).json()["clients"][0]
        pushed = httpx.post(
            second.url + "/v1/inbound",
            json={"shortcode": "56767", "msisdn": "9810012345", "message": "VOTE 1"},
            headers=cluster.ingest(),
        ).json()
        made = httpx.post(
            first.url + f"/v1/clients/{client['id']}/portal/invites",
            json={"email": "ann@tv.example", "role": "admin"},
            headers=cluster.admin(),
        )
        assert made.status_code == 201, made.text
        with httpx.Client(base_url=first.url, timeout=20) as on_first:
            path = made.json()["invite_path"]
            assert on_first.post(path, data={"password": PASSWORD, "again": PASSWORD}).status_code == 303
            cookie = on_first.cookies["mogateway_portal"]
            with httpx.Client(
                base_url=second.url, cookies={"mogateway_portal": cookie}, timeout=20
            ) as on_second:
                for _ in range(50):  # the message is finished by whichever node took it
                    page = on_second.get(f"/portal/messages/{pushed['id']}")
                    if "replied" in page.text:
                        break
                    time.sleep(0.2)
                assert page.status_code == 200 and "replied" in page.text
                assert "ann@tv.example" in on_second.get("/portal/account").text
                csrf = csrf_of(on_second.get("/portal/").text)
                assert on_second.post("/portal/logout/everywhere", data={"csrf": csrf}).status_code == 303
            assert on_first.get("/portal/", follow_redirects=False).status_code == 303
