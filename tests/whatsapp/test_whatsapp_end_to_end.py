"""WhatsApp end to end: signed webhooks into a real ``mogateway serve`` (default workers), the client's
callback with the pinned bytes, the reply at the fake Graph API (a real server), statuses, errors,
redeliveries, batches, foreign senders and a SIGKILL right after the 200."""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from prometheus_client.parser import text_string_to_metric_families

from mogateway.core.whatsapp import sign_body
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

from .webhook_mutations import expected_wamids, mutate, mutations, valid_body
from .whatsapp_harness import APP_SECRET, BUSINESS, PNID, VERIFY_TOKEN, WhatsAppStack, start_whatsapp_serve

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    GatewayClient,
    ServeProcess,
    default_workers,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
PNID_2 = "106540352242999"  # a second number, its client wants tsunix in seconds
BUSINESS_2 = "919876543299"
AT = 1764216000  # the golden fixtures' webhook timestamp
LONG = "Your statement: " + "₹240 paid. " * 500 + "End."  # > 4,096 characters: two parts
FINAL = frozenset(
    {"replied", "delivered", "undelivered", "reply_failed", "reply_unknown", "no_reply", "rejected"}
)


def _config(graph_url: str) -> str:
    return f"""
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "{VERIFY_TOKEN}"
graph_url = "{graph_url}"
api_version = "v21.0"
# The golden callbacks pin Meta's timestamp of 2025-11-27 (AT): older than the default replay window.
max_message_age_s = 3153600000

[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "rehearsal-token"
mark_read = true

[[whatsapp.numbers]]
phone_number_id = "{PNID_2}"
display_phone_number = "{BUSINESS_2}"
access_token = "rehearsal-token"
"""


def _answer(call: RecordedCall) -> Answer:
    text = call.json()["message"]
    if text == "LONG":
        return Answer.text(LONG)
    if text == "SLOW":
        return Answer.late(1.0, "slow answer")
    return Answer.text(f"You said {text}" if text else "Got your file")


class Stack(WhatsAppStack):
    """The gateway, the fake Graph API, the client application and Meta's webhook senders (one a number)."""

    def __init__(self, serve: ServeProcess, graph: FakeGraphServer, app: CallbackRecorder) -> None:
        super().__init__(serve, graph, app)
        self.meta2 = wh.WebhookSender(
            serve.url + "/v1/whatsapp/webhook",
            APP_SECRET,
            phone_number_id=PNID_2,
            display_phone_number=BUSINESS_2,
        )

    def close(self) -> None:
        self.meta2.close()
        super().close()

    def sends(self, **params: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx.get(self.graph.url + "/__fake/messages", params=params).json()[
            "data"
        ]
        return data

    def calls_for(self, message_id: str) -> list[RecordedCall]:
        return [c for c in self.app.calls if c.headers.get("x-mogateway-message-id") == message_id]

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.05)

    def deliver(self, *messages: dict[str, Any], sender: wh.WebhookSender | None = None) -> list[str]:
        delivery = (sender or self.meta).send(*messages)
        assert delivery.status == 200, delivery.text
        ids: list[str] = json.loads(delivery.text)["ids"]
        return ids


def _start(workdir: Path, graph: FakeGraphServer, name: str = "serve") -> ServeProcess:
    return start_whatsapp_serve(workdir, _config(graph.url), log_name=name)


def _register(gw: GatewayClient, app: CallbackRecorder) -> None:
    # WhatsApp numbers instead of shortcodes; the second number's client takes tsunix in seconds.
    for number, unit in ((BUSINESS, "ms"), (BUSINESS_2, "s")):
        resp = gw.admin(
            "POST",
            "/v1/clients",
            json={
                "name": f"wa-{unit}",
                "whatsapp_numbers": [number],
                "callback_url": app.url,
                "tsunix_unit": unit,
            },
        )
        assert resp.status_code == 201, resp.text
        assert resp.json()["whatsapp_numbers"] == [number] and resp.json()["shortcodes"] == []


@contextlib.contextmanager
def running_stack(
    workdir: Path,
    answer: Callable[[RecordedCall], Answer],
    register: Callable[[GatewayClient, CallbackRecorder], None] = _register,
) -> Iterator[Stack]:
    """The stack of this module's numbers: the application answers with ``answer``, and ``register``
    adds its clients before the block."""
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(answer) as app:
        s = Stack(_start(workdir, graph), graph, app)
        try:
            register(s.gw, app)
            yield s
        finally:
            s.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("wa"), _answer) as s:
        yield s


def _golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _seed_and_member(body: bytes) -> tuple[bytes, dict[str, Any]]:
    """A WhatsApp callback body as the seed's members (with ``channel``) and its ``whatsapp`` member,
    which comes last (tests/whatsapp/test_whatsapp_member.py pins its bytes)."""
    seed, marker, member = body.partition(b',"whatsapp":')
    assert marker, body
    return seed + b"}", json.loads(member[:-1])


def _timeline(stack: Stack, message_id: str) -> list[dict[str, Any]]:
    timeline: list[dict[str, Any]] = stack.gw.message(message_id)["timeline"]
    return timeline


# ------------------------------------------------------------------------------------ handshake


def test_handshake_answers_the_challenge_only_for_the_verify_token(stack: Stack) -> None:
    ok = stack.meta.handshake(VERIFY_TOKEN, challenge="1158201444")
    assert (ok.status_code, ok.text) == (200, "1158201444")
    assert stack.meta.handshake("wrong-token").status_code == 403
    assert stack.meta.handshake(VERIFY_TOKEN, mode="unsubscribe").status_code == 403


# ------------------------------------------------------------------------------------ signature


def test_unsigned_wrongly_signed_and_reserialised_bodies_are_refused_and_not_stored(stack: Stack) -> None:
    sender = "919812300001"
    body = stack.meta.body(wh.text(sender, "नमस्ते BAL"))
    assert stack.meta.post(body, signed=False).status == 401
    assert stack.meta.post(body, signature="sha256=" + "0" * 64).status == 401
    assert stack.meta.post(body, signature=sign_body(body, "another-app-secret")).status == 401
    # Parsed and re-serialised (non-ASCII escaped): the signature of the bytes Meta sent no longer fits.
    reserialised = json.dumps(json.loads(body)).encode()
    assert reserialised != body
    refused = stack.meta.post(reserialised, signature=sign_body(body, APP_SECRET))
    assert refused.status == 401
    assert json.loads(refused.text)["type"] == "urn:mogateway:problem:bad-signature"
    listed = stack.gw.admin("GET", "/v1/messages", params={"msisdn": sender}).json()["messages"]
    assert listed == []
    assert stack.serve.stderr().count("missing or wrong signature") == 1  # rate-limited: one line


# ------------------------------------------------------------------------------------ callbacks


def test_text_message_reaches_the_client_with_the_pinned_bytes_and_the_reply_reaches_the_fake(
    stack: Stack,
) -> None:
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text("919812345678", "HELLO", wamid=wamid, timestamp=AT))
    (call,) = stack.wait(lambda: stack.calls_for(mid), "callback")
    seed, member = _seed_and_member(call.body)
    assert seed == _golden("whatsapp_text.json")
    assert member == {
        "v": 1,
        "type": "text",
        "wamid": wamid,
        "profile_name": "Test User",
        "text": {"body": "HELLO"},
    }
    (send,) = stack.wait(
        lambda: (
            stack.sends(to="919812345678")
            and [s for s in stack.sends(to="919812345678") if s["context_message_id"] == wamid]
        ),
        "reply",
    )
    assert send["phone_number_id"] == PNID and send["text"] == "You said HELLO"
    assert send["body"] == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "919812345678",
        "type": "text",
        "text": {"preview_url": False, "body": "You said HELLO"},
        "context": {"message_id": wamid},
    }
    msg = stack.gw.wait_state(mid, frozenset({"replied"}))
    assert msg["channel"] == "whatsapp" and msg["origin"] == f"whatsapp:{PNID}" and msg["source_id"] == wamid
    submitted = next(e for e in msg["timeline"] if e["event"] == "reply_submitted")
    assert submitted["refs"] == [send["wamid"]] and submitted["channel"] == f"whatsapp:{PNID}"


def test_statuses_out_of_order_appear_in_the_timeline(stack: Stack) -> None:
    sender = "919812300002"
    (mid,) = stack.deliver(wh.text(sender, "STATUS"))
    stack.gw.wait_state(mid, frozenset({"replied"}))
    (send,) = stack.sends(to=sender)
    reply = send["wamid"]
    for value in ("read", "delivered", "sent"):  # Meta does not promise order
        assert stack.meta.send(statuses=[wh.status(reply, value, sender)]).status == 200
    msg = stack.wait(
        lambda: (
            (m := stack.gw.message(mid))
            and len([e for e in m["timeline"] if e["event"] == "delivery"]) == 3
            and m
        ),
        "three statuses",
    )
    assert msg["state"] == "delivered"
    assert [e["status"] for e in msg["timeline"] if e["event"] == "delivery"] == ["read", "delivered", "sent"]
    # A failed status after them: the reply did not reach the person after all.
    failed = wh.status(reply, "failed", sender, error_code=131026, error_title="Message undeliverable")
    assert stack.meta.send(statuses=[failed]).status == 200
    msg = stack.gw.wait_state(mid, frozenset({"undelivered"}))
    assert "131026" in [e for e in msg["timeline"] if e["event"] == "delivery"][-1]["detail"]


def test_interactive_reply_reaches_the_client_with_the_pinned_bytes(stack: Stack) -> None:
    (mid,) = stack.deliver(wh.button_reply("919812345678", "yes-1", "Yes, book it ✅", timestamp=AT))
    (call,) = stack.wait(lambda: stack.calls_for(mid), "callback")
    seed, member = _seed_and_member(call.body)
    assert seed == _golden("whatsapp_button_reply.json")
    assert member["interactive"] == {
        "type": "button_reply",
        "button_reply": {"id": "yes-1", "title": "Yes, book it ✅"},
    }
    msg = stack.gw.wait_state(mid, frozenset({"replied"}))
    assert "reply id yes-1" in msg["timeline"][0]["notes"]


def test_media_message_carries_its_type_and_media_id_in_the_timeline(stack: Stack) -> None:
    (mid,) = stack.deliver(
        wh.media("919812345678", "image", media_id="1003383421387123", timestamp=AT), sender=stack.meta2
    )
    (call,) = stack.wait(lambda: stack.calls_for(mid), "callback")
    seed, member = _seed_and_member(call.body)
    assert seed == _golden("whatsapp_media_no_caption_s.json")
    assert member["type"] == "image" and member["image"]["id"] == "1003383421387123"
    assert member["image"]["mime_type"] == "image/jpeg" and "caption" not in member["image"]
    # The admin API's message view shows the same member.
    assert stack.gw.message(mid)["whatsapp"] == member
    received = _timeline(stack, mid)[0]
    assert received["event"] == "received"
    assert received["notes"] == ["whatsapp image", "media id 1003383421387123 (image/jpeg)"]


def test_a_long_reply_is_split_at_4096_characters(stack: Stack) -> None:
    sender = "919812300003"
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text(sender, "LONG", wamid=wamid))
    msg = stack.gw.wait_state(mid, frozenset({"replied"}))
    sends = stack.sends(to=sender)
    assert len(sends) == 2
    assert all(len(s["text"]) <= 4096 for s in sends)
    assert "".join(s["text"] for s in sends) == LONG
    assert [s["context_message_id"] for s in sends] == [wamid, None]
    submitted = next(e for e in msg["timeline"] if e["event"] == "reply_submitted")
    assert submitted["parts"] == 2 and submitted["refs"] == [s["wamid"] for s in sends]


# ------------------------------------------------------------------------------------ errors


def _script(stack: Stack, **body: Any) -> None:
    assert httpx.post(stack.graph.url + "/__fake/messages/errors", json=body).status_code in (200, 201, 204)


def test_131047_fails_at_once_with_its_code_and_no_retry(stack: Stack) -> None:
    sender = "919812300004"
    _script(stack, code=131047, to=sender)
    try:
        (mid,) = stack.deliver(wh.text(sender, "LATE"))
        msg = stack.gw.wait_state(mid, frozenset({"reply_failed"}))
        failed = next(e for e in msg["timeline"] if e["event"] == "reply_failed")
        assert "131047" in failed["detail"] and "24 hours" in failed["detail"]
        time.sleep(1.5)  # long enough for the replier's first retries, were there any
        assert len(stack.sends(to=sender)) == 1
    finally:
        httpx.delete(stack.graph.url + "/__fake/messages/errors")


def test_130429_is_retried_with_backoff_then_sent(stack: Stack) -> None:
    sender = "919812300005"
    _script(stack, code=130429, to=sender, times=2)
    (mid,) = stack.deliver(wh.text(sender, "BUSY"))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed"}), timeout=20)
    assert msg["state"] == "replied", msg["timeline"]
    sends = stack.sends(to=sender)
    assert [s["error"] for s in sends] == [130429, 130429, None]
    waiting = [e for e in msg["timeline"] if e["event"] == "reply_waiting"]
    assert waiting and "130429" in waiting[0]["detail"]


def test_131056_holds_back_that_person_only_then_sends(stack: Stack) -> None:
    """The pair rate limit: the reply to that person is retried with backoff; another person's reply
    is not held behind it."""
    held, other = "919812300015", "919812300016"
    _script(stack, code=131056, to=held, times=2)
    (mid_held,) = stack.deliver(wh.text(held, "PAIR"))
    (mid_other,) = stack.deliver(wh.text(other, "FREE"))
    msg_other = stack.gw.wait_state(mid_other, frozenset({"replied", "reply_failed"}), timeout=20)
    assert msg_other["state"] == "replied", msg_other["timeline"]
    assert [s["error"] for s in stack.sends(to=other)] == [None]
    msg = stack.gw.wait_state(mid_held, frozenset({"replied", "reply_failed"}), timeout=20)
    assert msg["state"] == "replied", msg["timeline"]
    assert [s["error"] for s in stack.sends(to=held)] == [131056, 131056, None]
    waiting = [e for e in msg["timeline"] if e["event"] == "reply_waiting"]
    assert waiting and "131056" in waiting[0]["detail"]


def test_190_fails_the_reply_and_tells_the_operator_once_per_number(stack: Stack) -> None:
    """A refused access token: each reply fails at once with the code, and the log says what to do in
    one line per number (per worker process, each of which sends replies), not one per reply."""
    senders = ["919812300017", "919812300018", "919812300019", "919812300020"]
    for sender in senders:
        _script(stack, code=190, to=sender)
    try:
        ids = [mid for sender in senders for mid in stack.deliver(wh.text(sender, "TOKEN"))]
        for mid in ids:
            msg = stack.gw.wait_state(mid, frozenset({"reply_failed", "replied"}), timeout=20)
            assert msg["state"] == "reply_failed", msg["timeline"]
            failed = next(e for e in msg["timeline"] if e["event"] == "reply_failed")
            assert "190" in failed["detail"]
        assert [len(stack.sends(to=sender)) for sender in senders] == [1, 1, 1, 1]  # no retry
        told = [
            line
            for line in stack.serve.stderr().splitlines()
            if "cannot send replies, its access token was refused" in line
        ]
        assert 1 <= len(told) <= default_workers(), told
        assert all(PNID in line for line in told) and "rehearsal-token" not in stack.serve.stderr()
    finally:
        httpx.delete(stack.graph.url + "/__fake/messages/errors")


def test_mark_read_marks_each_stored_message_read_once(stack: Stack) -> None:
    inbound = wh.text("919812300021", "READ ME")
    first = stack.meta.send(inbound)  # the first number has mark_read = true
    assert first.status == 200
    (mid,) = json.loads(first.text)["ids"]
    stack.gw.wait_state(mid, frozenset({"replied"}))

    def reads() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx.get(stack.graph.url + "/__fake/messages/reads").json()["data"]
        return [r for r in data if r["message_id"] == inbound["id"]]

    stack.wait(reads, "the mark-read call")
    assert stack.meta.redeliver(first).status == 200  # Meta's redelivery: stored already, not read again
    (marker,) = stack.deliver(wh.text("919812300023", "AFTER"))  # sent after the redelivery was answered
    stack.gw.wait_state(marker, frozenset({"replied"}))
    assert [r["phone_number_id"] for r in reads()] == [PNID]


# ------------------------------------------------------------------------------------ delivery rules


def test_a_redelivered_webhook_is_one_message_and_one_callback(stack: Stack) -> None:
    sender = "919812300006"
    first = stack.meta.send(wh.text(sender, "TWICE"))
    assert first.status == 200
    again = stack.meta.redeliver(first)
    assert again.status == 200 and json.loads(again.text)["duplicates"] == 1
    (mid,) = json.loads(first.text)["ids"]
    assert json.loads(again.text)["ids"] == [mid]
    stack.gw.wait_state(mid, frozenset({"replied"}))
    stack.meta.redeliver(first)  # even after the reply
    assert len(stack.calls_for(mid)) == 1
    assert len(stack.gw.admin("GET", "/v1/messages", params={"msisdn": sender}).json()["messages"]) == 1
    assert len(stack.sends(to=sender)) == 1


def test_a_batch_with_several_messages_and_entries(stack: Stack) -> None:
    senders = ["919812300007", "919812300008", "919812300009"]
    one = wh.webhook_body([wh.text(senders[0], "ONE"), wh.text(senders[1], "TWO")])
    two = wh.webhook_body([wh.list_reply(senders[2], "l-3", "Three", "the third")])
    delivery = stack.meta.post(wh.encode(wh.merge(one, two)))
    assert delivery.status == 200
    ids = json.loads(delivery.text)["ids"]
    assert len(ids) == 3
    for mid in ids:
        stack.gw.wait_state(mid, frozenset({"replied"}))
    texts = [s["text"] for sender in senders for s in stack.sends(to=sender)]
    assert texts == ["You said ONE", "You said TWO", "You said Three"]


def test_a_sender_outside_india_is_rejected_and_never_reaches_the_client(stack: Stack) -> None:
    delivery = stack.meta.send(wh.text("14155550123", "HELLO FROM ABROAD"))
    assert delivery.status == 200
    (mid,) = json.loads(delivery.text)["ids"]
    msg = stack.gw.message(mid)
    assert msg["state"] == "rejected" and msg["timeline"][0]["field"] == "msisdn"
    time.sleep(0.5)
    assert stack.calls_for(mid) == []


def test_a_message_for_an_unknown_number_is_acknowledged_and_not_stored(stack: Stack) -> None:
    with wh.WebhookSender(
        stack.serve.url + "/v1/whatsapp/webhook",
        APP_SECRET,
        phone_number_id="999",
        display_phone_number="919800000999",
    ) as stranger:
        delivery = stranger.send(wh.text("919812300010", "WHO"))
    assert delivery.status == 200 and json.loads(delivery.text)["ids"] == []
    assert stack.gw.admin("GET", "/v1/messages", params={"msisdn": "919812300010"}).json()["messages"] == []


# ---------------------------------------------------- shapes Meta sends now (issues 39 and 40)


def _metric(stack: Stack, name: str, **labels: str) -> float:
    """The sum over workers of the samples of /metrics named ``name`` with these ``labels``."""
    total = 0.0
    for family in text_string_to_metric_families(stack.gw.admin("GET", "/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_a_type_without_its_object_is_acknowledged_and_called_back_with_meta_s_errors(stack: Stack) -> None:
    # Meta's "Unsupported webhook payload": type interactive, no interactive object, value-level errors.
    (mid,) = stack.deliver(wh.unrendered("919812300201"))
    (call,) = stack.wait(lambda: stack.calls_for(mid), "callback")
    assert call.json()["message"] == "" and call.json()["msisdn"] == 919812300201
    first = _timeline(stack, mid)[0]
    assert "whatsapp interactive" in first["notes"]
    assert "error 131000: Something went wrong" in first["notes"]


def test_one_unreadable_item_never_sinks_the_batch(stack: Stack) -> None:
    good = wh.text("919812300202", "STILL HERE")
    no_sender = wh.text("919812300203", "LOST")
    del no_sender["from"]
    body = wh.webhook_body([no_sender, {"id": 5}, good, wh.username_text("IN.7788", "hi")])
    body["entry"].append({"id": "1", "changes": "not a list"})
    before = _metric(stack, "mogateway_whatsapp_left_out_total", reason="message")
    delivery = stack.meta.post(wh.encode(body))
    assert delivery.status == 200, delivery.text
    answer = json.loads(delivery.text)
    assert answer["messages"] == 2 and answer["rejected"] == 1
    good_id = answer["ids"][0]
    stack.gw.wait_state(good_id, frozenset({"replied"}))
    assert [s["text"] for s in stack.sends(to="919812300202")] == ["You said STILL HERE"]
    assert _metric(stack, "mogateway_whatsapp_left_out_total", reason="message") == before + 2
    assert _metric(stack, "mogateway_whatsapp_left_out_total", reason="change") >= 1
    # Signed JSON of any shape is acknowledged; only bytes that are not JSON are refused.
    assert stack.meta.post(b'{"object": "page"}').status == 200
    assert stack.meta.post(b"[1, 2]").status == 200
    assert stack.meta.post(b"not json").status == 400


def test_a_username_user_without_a_phone_number_is_stored_refused_visible_and_counted(stack: Stack) -> None:
    before = _metric(stack, "mogateway_mo_rejected_total", field="msisdn", channel="whatsapp")
    (mid,) = stack.deliver(wh.username_text("IN.1502576394655843", "BAL"))
    msg = stack.gw.message(mid)
    assert msg["state"] == "rejected" and msg["msisdn"] == "IN.1502576394655843"
    first = msg["timeline"][0]
    assert first["field"] == "msisdn" and "business-scoped user id" in first["reason"]
    assert "user id IN.1502576394655843" in first["notes"]
    listed = stack.gw.admin("GET", "/v1/messages", params={"state": "rejected", "limit": 500}).json()
    assert mid in [m["id"] for m in listed["messages"]]
    assert _metric(stack, "mogateway_mo_rejected_total", field="msisdn", channel="whatsapp") == before + 1
    time.sleep(0.3)
    assert stack.calls_for(mid) == []


def test_a_group_message_is_stored_refused_and_not_answered(stack: Stack) -> None:
    (mid,) = stack.deliver(wh.username_text("IN.55", "hello all", sender="919812300204", group_id="G.1"))
    msg = stack.gw.message(mid)
    assert msg["state"] == "rejected" and msg["timeline"][0]["field"] == "group_id"
    assert "group G.1" in msg["timeline"][0]["notes"]
    time.sleep(0.3)
    assert stack.calls_for(mid) == []


def test_a_changed_user_id_notice_without_from_is_acknowledged_and_stored(stack: Stack) -> None:
    (mid,) = stack.deliver(wh.system_user_changed_user_id("IN.900", "IN.901"))
    msg = stack.gw.message(mid)
    assert msg["state"] == "rejected" and msg["timeline"][0]["field"] == "type"
    assert "system notice" in msg["timeline"][0]["reason"]


def test_a_delivered_status_without_recipient_id_is_recorded_by_its_wamid(stack: Stack) -> None:
    sender = "919812300205"
    (mid,) = stack.deliver(wh.text(sender, "NO RECIPIENT"))
    stack.gw.wait_state(mid, frozenset({"replied"}))
    (sent,) = stack.sends(to=sender)
    delivery = stack.meta.send(statuses=[wh.status(sent["wamid"], "delivered", None)])
    assert delivery.status == 200 and json.loads(delivery.text)["statuses"] == 1
    assert stack.gw.wait_state(mid, frozenset({"delivered"}))["state"] == "delivered"


def test_a_status_moves_only_a_reply_of_the_number_it_came_with(stack: Stack) -> None:
    sender = "919812300208"
    (mid,) = stack.deliver(wh.text(sender, "NUMBER A"))
    stack.gw.wait_state(mid, frozenset({"replied"}))
    (sent,) = stack.sends(to=sender)
    before = _metric(stack, "mogateway_whatsapp_left_out_total", reason="other_number")
    # Number B's webhook names number A's reply: acknowledged, not applied.
    wrong = stack.meta2.send(statuses=[wh.status(sent["wamid"], "failed", sender, error_code=131026)])
    assert wrong.status == 200
    assert _metric(stack, "mogateway_whatsapp_left_out_total", reason="other_number") == before + 1
    time.sleep(0.5)
    msg = stack.gw.message(mid)
    assert msg["state"] == "replied" and not [e for e in msg["timeline"] if e["event"] == "delivery"]
    right = stack.meta.send(statuses=[wh.status(sent["wamid"], "delivered", sender)])
    assert right.status == 200
    assert stack.gw.wait_state(mid, frozenset({"delivered"}))["state"] == "delivered"


def test_reactions_and_edits_reach_the_application_and_are_never_answered(stack: Stack) -> None:
    sender = "919812300206"
    (thumbs, edited) = stack.deliver(
        wh.reaction(sender, "wamid.EARLIER", "\U0001f44d"), wh.edit(sender, "wamid.EARLIER", "BAL 2")
    )
    for mid, text in ((thumbs, "\U0001f44d"), (edited, "BAL 2")):
        (call,) = stack.wait(lambda mid=mid: stack.calls_for(mid), "callback")
        assert call.json()["message"] == text
        msg = stack.gw.wait_state(mid, frozenset({"no_reply"}))
        outcome = next(e for e in msg["timeline"] if e["event"] == "outcome")
        assert outcome["withheld_reply"] == f"You said {text}" and "never sent" in outcome["detail"]
    time.sleep(0.5)
    assert stack.sends(to=sender) == []


def test_a_removed_reaction_and_a_deletion_are_stored_and_never_called_back(stack: Stack) -> None:
    sender = "919812300207"
    ids = stack.deliver(wh.reaction(sender, "wamid.EARLIER", ""), wh.revoke(sender, "wamid.EARLIER"))
    for mid, what in zip(ids, ("removed reaction", "deleted message"), strict=True):
        msg = stack.gw.message(mid)
        assert msg["state"] == "rejected" and msg["timeline"][0]["field"] == "type"
        assert what in msg["timeline"][0]["reason"]
    time.sleep(0.3)
    assert all(stack.calls_for(mid) == [] for mid in ids) and stack.sends(to=sender) == []


_mutated = itertools.count(1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=mutations)
def test_every_mutated_signed_body_is_acknowledged_and_each_readable_message_stored(
    stack: Stack, ops: Any
) -> None:
    body = mutate(valid_body(f"e2e{next(_mutated)}"), ops)
    delivery = stack.meta.post(json.dumps(body).encode())
    assert delivery.status == 200, delivery.text
    expected = expected_wamids(body, PNID)
    ids = json.loads(delivery.text)["ids"]
    assert len(ids) == len(expected)
    assert [stack.gw.message(mid)["source_id"] for mid in ids] == expected


def test_sigkill_right_after_the_200_loses_nothing(tmp_path: Path) -> None:
    sender = "919812300011"
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        serve = _start(tmp_path, graph, "first")
        gw = GatewayClient(serve.url)
        try:
            _register(gw, app)
            with wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
                delivery = meta.send(wh.text(sender, "SLOW"))
            serve.kill()  # right after the 200: the callback has not even been answered
            assert delivery.status == 200
            (mid,) = json.loads(delivery.text)["ids"]
        finally:
            gw.close()
            serve.kill()
        second = _start(tmp_path, graph, "second")
        gw = GatewayClient(second.url)
        try:
            msg = gw.wait_state(mid, FINAL, timeout=30)
            assert msg["state"] in ("replied", "reply_unknown"), msg["timeline"]
            assert app.calls and all(c.headers["x-mogateway-message-id"] == mid for c in app.calls)
            sends = [s for s in httpx.get(graph.url + "/__fake/messages").json()["data"] if s["to"] == sender]
            assert len(sends) <= 1 and (msg["state"] == "reply_unknown" or len(sends) == 1)
        finally:
            gw.close()
            second.stop()


def test_the_whatsapp_member_survives_a_restart(tmp_path: Path) -> None:
    """A signed webhook with an image; the gateway is killed right after the 200, before the callback
    is answered; the node that starts next calls back from the journal with the member unchanged."""
    sender = "919812300012"
    image = wh.media(sender, "image", caption="SLOW", media_id="1003383421387999", timestamp=AT)
    image["context"] = {"forwarded": True}
    expected = {
        "v": 1,
        "type": "image",
        "wamid": image["id"],
        "profile_name": "Test User",
        "context": {"forwarded": True},
        "image": {
            "id": "1003383421387999",
            "mime_type": "image/jpeg",
            "sha256": image["image"]["sha256"],
            "caption": "SLOW",
        },
    }
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        serve = _start(tmp_path, graph, "first")
        gw = GatewayClient(serve.url)
        try:
            _register(gw, app)
            with wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
                delivery = meta.send(image)
            serve.kill()  # the callback takes a second to answer: it is not done
            assert delivery.status == 200, delivery.text
            (mid,) = json.loads(delivery.text)["ids"]
        finally:
            gw.close()
            serve.kill()
        before = len(app.calls)
        second = _start(tmp_path, graph, "second")
        gw = GatewayClient(second.url)
        try:
            msg = gw.wait_state(mid, FINAL, timeout=30)
            assert msg["state"] in ("replied", "reply_unknown"), msg["timeline"]
            assert len(app.calls) > before  # the second gateway called back
            for call in app.calls:
                seed, member = _seed_and_member(call.body)
                assert member == expected
                assert json.loads(seed)["message"] == "SLOW"
            assert msg["whatsapp"] == expected
        finally:
            gw.close()
            second.stop()
