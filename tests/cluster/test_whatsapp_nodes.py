"""WhatsApp in cluster mode: two ``mogateway serve`` nodes (two workers each) on PostgreSQL and JetStream,
Meta's webhooks posted to either node.

What must hold: each message is stored once, called back once and answered once at the (fake) Graph API,
whichever node took its webhook; a webhook Meta delivers again to the *other* node is the same message;
the statuses of a reply are recorded whichever node takes them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from cluster_harness import Cluster, running_cluster, wait_until_finished

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

pytestmark = pytest.mark.slow

APP_SECRET = "cluster-app-secret-0123456789"
VERIFY_TOKEN = "cluster-verify-token"
PNID = "106540352242922"  # the fake's default cloud number
BUSINESS = "919876543210"
TOTAL = 24


def _config(path: Path, graph_url: str) -> Path:
    path.write_text(
        f"""
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "{VERIFY_TOKEN}"
graph_url = "{graph_url}"

[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "rehearsal-token"
"""
    )
    return path


def _answer(call: RecordedCall) -> Answer:
    return Answer.text("You said " + call.json()["message"])


def _register(cluster: Cluster, callback_url: str) -> None:
    resp = httpx.post(
        cluster.nodes[0].url + "/v1/clients",
        json={"name": "wa shop", "whatsapp_numbers": [BUSINESS], "callback_url": callback_url},
        headers=cluster.admin(),
        timeout=10,
    )
    assert resp.status_code == 201, resp.text


async def _rows(database: str) -> tuple[int, dict[str, int]]:
    conn = await asyncpg.connect(database)
    try:
        count = await conn.fetchval("SELECT count(*) FROM messages WHERE origin LIKE 'whatsapp:%'")
        deliveries = dict(
            await conn.fetch(
                "SELECT message_id, count(*) FROM events WHERE kind='delivery' GROUP BY message_id"
            )
        )
        return int(count), deliveries
    finally:
        await conn.close()


def _sends(graph: FakeGraphServer) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = httpx.get(graph.url + "/__fake/messages", timeout=5).json()["data"]
    return data


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


def test_webhooks_on_either_node_are_one_message_one_callback_one_reply(tmp_path: Path) -> None:
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        config = _config(tmp_path / "mogateway.toml", graph.url)
        args = [["--config", str(config)], ["--config", str(config)]]
        with running_cluster(tmp_path, 2, node_args=args, first=lambda c: _register(c, app.url)) as cluster:
            hooks = [
                wh.WebhookSender(node.url + "/v1/whatsapp/webhook", APP_SECRET) for node in cluster.nodes
            ]
            try:
                # Both nodes answer Meta's handshake.
                for meta in hooks:
                    ok = meta.handshake(VERIFY_TOKEN, challenge="4242")
                    assert (ok.status_code, ok.text) == (200, "4242")

                wamids: dict[str, str] = {}  # wamid -> message id
                images: dict[str, dict[str, Any]] = {}  # wamid -> the image object Meta sent
                deliveries: list[tuple[int, wh.Delivery]] = []
                for n in range(TOTAL):
                    wamid = wh.new_wamid()
                    node = n % 2
                    sender = f"9198120{n:05d}"
                    if n % 4 == 3:  # an image: its callback member must cross the journal and the queue
                        message = wh.media(sender, "image", caption=f"HELLO {n}", wamid=wamid)
                        images[wamid] = message["image"]
                    else:
                        message = wh.text(sender, f"HELLO {n}", wamid=wamid)
                    delivery = hooks[node].send(message)
                    assert delivery.status == 200, delivery.text
                    (mid,) = json.loads(delivery.text)["ids"]
                    wamids[wamid] = mid
                    deliveries.append((node, delivery))

                # Meta delivers every one again, this time to the other node: the same messages.
                for node, delivery in deliveries:
                    again = hooks[1 - node].redeliver(delivery)
                    assert again.status == 200, again.text
                    answer = json.loads(again.text)
                    assert answer["duplicates"] == 1
                    assert answer["ids"][0] in wamids.values()

                states = wait_until_finished(cluster.database, TOTAL, timeout=60)
                assert states == {"replied": TOTAL}, states
                count, _ = asyncio.run(_rows(cluster.database))
                assert count == TOTAL

                # One callback per message...
                calls = collections.Counter(c.headers["x-mogateway-message-id"] for c in app.calls)
                assert set(calls) == set(wamids.values())
                assert set(calls.values()) == {1}
                assert {c.json()["channel"] for c in app.calls} == {"whatsapp"}
                # Each callback carries the member of its own webhook, whichever node made it (the
                # member rode in PostgreSQL and JetStream as the message's text).
                by_mid = {mid: wamid for wamid, mid in wamids.items()}
                for c in app.calls:
                    member = c.json()["whatsapp"]
                    wamid = by_mid[c.headers["x-mogateway-message-id"]]
                    assert member["wamid"] == wamid and member["profile_name"] == "Test User"
                    if wamid in images:
                        assert member["type"] == "image" and member["image"] == images[wamid]
                    else:
                        assert member["type"] == "text" and member["text"]["body"].startswith("HELLO ")
                assert len(images) == TOTAL // 4
                # ...and one reply per message at the Graph API, as a reply to its wamid.
                sends = _wait(lambda: len(_sends(graph)) >= TOTAL and _sends(graph), "replies")
                by_context = collections.Counter(s["context_message_id"] for s in sends)
                assert set(by_context) == set(wamids) and set(by_context.values()) == {1}
                for s in sends:
                    assert s["phone_number_id"] == PNID and s["text"].startswith("You said HELLO ")

                # Statuses of each reply, to the node that did not take the message.
                for (node, _), wamid in zip(deliveries, wamids, strict=True):
                    send = next(s for s in sends if s["context_message_id"] == wamid)
                    status = wh.status(send["wamid"], "delivered", send["to"])
                    assert hooks[1 - node].send(statuses=[status]).status == 200

                def delivered() -> bool:
                    _, events = asyncio.run(_rows(cluster.database))
                    return set(events) == set(wamids.values()) and set(events.values()) == {1}

                _wait(delivered, "a delivery event per message")
                states = wait_until_finished(cluster.database, TOTAL, timeout=10)
                assert states == {"delivered": TOTAL}, states
            finally:
                for meta in hooks:
                    meta.close()


# ------------------------------------------------------------------------------------ every type

ASKED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSMDAwMDAwMDAwMDAwMDAwMDAxAA=="
RICH = [
    {"type": "text", "text": {"body": "Your bill"}},
    {"type": "image", "image": {"link": "https://x.in/bill.png", "caption": "₹240"}},
    {
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": "Pay now?"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "pay", "title": "Pay"}}]},
        },
    },
]


def _every_type(sender: str) -> list[dict[str, Any]]:
    """One message of every inbound type a person sends (the fake's builders, Meta's shapes)."""
    return [
        wh.forwarded(wh.text(sender, "RICH", context=ASKED)),
        wh.with_referral(wh.text(sender, "I saw your ad")),
        wh.image(sender, caption="my bill"),
        wh.audio(sender),
        wh.video(sender, caption="the meter"),
        wh.document(sender, "bill.pdf", caption="statement", file_size=303833),
        wh.sticker(sender, animated=True),
        wh.location(sender, 19.076, 72.8777, name="Gateway of India", address="Colaba"),
        wh.contacts(sender, wh.contact_card("Ravi Kumar", "+91 98123 45679", wa_id="919812345679")),
        wh.reaction(sender, ASKED, "👍"),
        wh.button_reply(sender, "pay-1", "Pay now"),
        wh.list_reply(sender, "p299", "Plan 299", "2 GB/day"),
        wh.nfm_reply(sender, '{"rating": "5"}'),
        wh.quick_reply(sender, "Stop promotions", "STOP"),
        wh.order(sender, "1537264876583739", wh.product_item("sku-101", 2, 149.5)),
        wh.unsupported(sender, "poll"),
    ]


def _typed_answer(call: RecordedCall) -> Answer:
    body = call.json()
    if body["message"] == "RICH":
        return Answer(body=json.dumps({"whatsapp": RICH}).encode(), content_type="application/json")
    return Answer.text("Got your " + body["whatsapp"]["type"])


def test_every_type_crosses_the_cluster_typed_and_a_rich_answer_goes_out_in_order(tmp_path: Path) -> None:
    """Each type posted to either node reaches the application once, with the member core.whatsapp_member
    makes of the message Meta sent (it rode in PostgreSQL and JetStream); the reaction's answer is
    withheld; the rich answer's three messages reach the Graph API in order, the first as the reply."""
    from mogateway.client import parse_message
    from mogateway.core.whatsapp_member import member_json

    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_typed_answer) as app:
        config = _config(tmp_path / "mogateway.toml", graph.url)
        args = [["--config", str(config)], ["--config", str(config)]]
        with running_cluster(tmp_path, 2, node_args=args, first=lambda c: _register(c, app.url)) as cluster:
            hooks = [
                wh.WebhookSender(node.url + "/v1/whatsapp/webhook", APP_SECRET) for node in cluster.nodes
            ]
            try:
                sent: dict[str, dict[str, Any]] = {}  # message id -> the message Meta sent
                for n, message in enumerate(_every_type("919812500001")):
                    delivery = hooks[n % 2].send(message)
                    assert delivery.status == 200, delivery.text
                    (mid,) = json.loads(delivery.text)["ids"]
                    sent[mid] = message
                states = wait_until_finished(cluster.database, len(sent), timeout=60)
                assert states == {"replied": len(sent) - 1, "no_reply": 1}, states

                calls = {c.headers["x-mogateway-message-id"]: c for c in app.calls}
                assert set(calls) == set(sent) and len(app.calls) == len(sent)
                for mid, message in sent.items():
                    body = calls[mid].body
                    _, _, member = body.partition(b',"whatsapp":')
                    assert member[:-1].decode() == member_json(message, "Test User"), message["type"]
                    typed = parse_message(body).whatsapp
                    assert typed is not None and typed.type == message["type"]

                sends = _wait(lambda: len(_sends(graph)) >= len(sent) + 1 and _sends(graph), "replies")
                by_wamid = {m["id"]: m for m in sent.values()}
                replied = collections.Counter(s["context_message_id"] for s in sends)
                reaction = next(m["id"] for m in sent.values() if m["type"] == "reaction")
                assert reaction not in replied  # withheld
                assert set(replied) - {None} == set(by_wamid) - {reaction}
                rich_wamid = next(w for w, m in by_wamid.items() if m.get("text", {}).get("body") == "RICH")
                # Only the rich reply's later parts have no context: its messages, in the order sent.
                rich = [s for s in sends if s["context_message_id"] in (rich_wamid, None)]
                assert [s["message"] for s in rich] == RICH
                assert [s["context_message_id"] for s in rich] == [rich_wamid, None, None]
                for s in sends:
                    if s["context_message_id"] not in (None, rich_wamid):
                        assert s["text"] == "Got your " + by_wamid[s["context_message_id"]]["type"]
            finally:
                for meta in hooks:
                    meta.close()
