"""WhatsApp media in cluster mode: the webhook taken by one node, the media fetched from the other —
by the callback's signed url (made by whichever node dispatched it) and by the client's token. Two
``mogateway serve`` nodes (two workers each) on PostgreSQL and JetStream, the fake Graph API serving the
media: no node keeps state of the URLs it signs, the key comes from the settings every node shares."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path

import httpx
import pytest
from cluster_harness import Cluster, running_cluster

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow

APP_SECRET = "cluster-app-secret-0123456789"
PNID = "106540352242922"
BUSINESS = "919876543210"
PUBLIC_URL = "https://gw.cluster.test"
SECRET_KEY = base64.urlsafe_b64encode(bytes(range(100, 132))).decode()


def _config(path: Path, graph_url: str) -> Path:
    path.write_text(
        f"""
public_url = "{PUBLIC_URL}"
secret_key = "{SECRET_KEY}"

[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "cluster-verify-token"
graph_url = "{graph_url}"

[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "rehearsal-token"
"""
    )
    return path


def test_media_is_fetched_from_the_node_that_did_not_take_the_webhook(tmp_path: Path) -> None:
    tokens: list[str] = []

    def register(cluster: Cluster) -> None:
        resp = httpx.post(
            cluster.nodes[0].url + "/v1/clients",
            json={"name": "wa shop", "whatsapp_numbers": [BUSINESS], "callback_url": app.url},
            headers=cluster.admin(),
            timeout=10,
        )
        assert resp.status_code == 201, resp.text
        tokens.append(resp.json()["token"])

    with FakeGraphServer() as graph, CallbackRecorder.in_thread(lambda call: Answer.text("")) as app:
        config = _config(tmp_path / "mogateway.toml", graph.url)
        args = [["--config", str(config)], ["--config", str(config)]]
        with running_cluster(tmp_path, 2, node_args=args, first=register) as cluster:
            photos = {}
            for n in range(4):
                media = httpx.post(
                    graph.url + "/__fake/media",
                    json={"size": 300_000 + n, "seed": n, "mime_type": "image/jpeg"},
                ).json()
                message = wh.media(f"91981234{n:04d}", "image", media_id=media["id"], sha256=media["sha256"])
                with wh.WebhookSender(cluster.nodes[0].url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
                    delivery = meta.send(message)  # always node 0
                assert delivery.status == 200, delivery.text
                (mid,) = json.loads(delivery.text)["ids"]
                photos[mid] = media

            deadline = time.monotonic() + 60
            while len({c.headers.get("x-mogateway-message-id") for c in app.calls} & set(photos)) < len(
                photos
            ):
                assert time.monotonic() < deadline, "not every callback came"
                time.sleep(0.1)
            other = cluster.nodes[1].url
            for call in app.calls:
                mid = call.headers.get("x-mogateway-message-id")
                if mid not in photos:
                    continue
                url = call.json()["whatsapp"]["image"]["url"]
                assert url.startswith(f"{PUBLIC_URL}/v1/whatsapp/media/{mid}?")
                signed = httpx.get(other + url[len(PUBLIC_URL) :], timeout=30)
                assert signed.status_code == 200, signed.text
                assert hashlib.sha256(signed.content).hexdigest() == photos[mid]["sha256_hex"]
                by_token = httpx.get(
                    f"{other}/v1/whatsapp/media/{mid}",
                    headers={"authorization": f"Bearer {tokens[0]}"},
                    timeout=30,
                )
                assert by_token.status_code == 200 and by_token.content == signed.content
