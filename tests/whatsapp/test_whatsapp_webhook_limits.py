"""The webhook's own bounds, on a real ``mogateway serve`` (default workers) with small limits: a body
without a well-formed signature header is refused before it is read, a body over ``max_webhook_bytes``
gets 413, at most ``max_webhook_items`` messages and statuses of a body are taken; a message is its
number and wamid (not Meta's timestamp), one older than ``max_message_age_s`` is not stored, and one
whose row retention deleted is not stored again when its signed body is posted again."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mogateway.core.whatsapp import sign_body
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

from .whatsapp_harness import add_whatsapp_client, start_whatsapp_serve, whatsapp_config

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, ServeProcess

APP_SECRET = "app-secret-for-limits-0123456789"
LIMIT = 16 * 1024
ITEMS = 3


class Stack:
    def __init__(self, serve: ServeProcess, app: CallbackRecorder) -> None:
        self.serve = serve
        self.gw = GatewayClient(serve.url)
        self.app = app
        self.url = serve.url + "/v1/whatsapp/webhook"
        self.meta = wh.WebhookSender(self.url, APP_SECRET)

    def left_out(self, reason: str) -> float:
        total = 0.0
        for family in text_string_to_metric_families(self.gw.admin("GET", "/metrics").text):
            for sample in family.samples:
                if sample.name == "mogateway_whatsapp_left_out_total" and sample.labels["reason"] == reason:
                    total += sample.value
        return total


def _answer(call: RecordedCall) -> Answer:
    return Answer.text(f"You said {call.json()['message']}")


def _serve(workdir: Path, graph: FakeGraphServer, retention_days: int = 30) -> ServeProcess:
    limits = f"max_webhook_bytes = {LIMIT}\nmax_webhook_items = {ITEMS}"
    config = whatsapp_config(graph.url, whatsapp=limits, app_secret=APP_SECRET)
    return start_whatsapp_serve(workdir, config, MOGATEWAY_MESSAGE_RETENTION_DAYS=str(retention_days))


def _register(s: Stack) -> None:
    add_whatsapp_client(s.gw, s.app.url, name="wa")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("wa-limits")
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        s = Stack(_serve(workdir, graph), app)
        try:
            _register(s)
            yield s
        finally:
            s.meta.close()
            s.gw.close()
            s.serve.stop()


def _held_open(stack: Stack, signature: str | None) -> tuple[float, bytes]:
    """Send the headers of a body announced as 8 KiB and 10 bytes of it, hold the rest; the time the
    answer took and its first bytes (b"" when none came within 5 s)."""
    where = urlsplit(stack.serve.url)
    headers = [
        "POST /v1/whatsapp/webhook HTTP/1.1",
        f"Host: {where.hostname}:{where.port}",
        "Content-Type: application/json",
        "Content-Length: 8192",
    ]
    if signature is not None:
        headers.append(f"X-Hub-Signature-256: {signature}")
    with socket.create_connection((where.hostname, where.port), timeout=5.0) as sock:
        started = time.monotonic()
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode() + b'{"object":')
        try:
            answer = sock.recv(200)
        except TimeoutError:
            answer = b""
        return time.monotonic() - started, answer


@pytest.mark.parametrize("signature", [None, "sha256=", "sha1=" + "0" * 40, "sha256=" + "z" * 64])
def test_a_body_without_a_well_formed_signature_header_is_refused_before_it_is_read(
    stack: Stack, signature: str | None
) -> None:
    took, answer = _held_open(stack, signature)
    assert answer.startswith(b"HTTP/1.1 401"), answer
    assert took < 2.0


def test_a_well_formed_header_waits_for_the_body_it_signs(stack: Stack) -> None:
    # The contrast: with a header of the right form, the body is read (and its HMAC computed) first.
    took, answer = _held_open(stack, "sha256=" + "0" * 64)
    assert answer == b"" and took >= 4.5


def test_a_body_over_the_webhook_limit_is_refused_with_413(stack: Stack) -> None:
    big = stack.meta.body(wh.text("919812300301", "x" * LIMIT))
    assert len(big) > LIMIT
    assert stack.meta.post(big).status == 413  # content-length: refused before the route reads it

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 4096):
            yield big[i : i + 4096]

    streamed = httpx.post(
        stack.url,
        content=chunks(),  # no content-length: counted while it streams
        headers={"X-Hub-Signature-256": sign_body(big, APP_SECRET), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert stack.gw.admin("GET", "/v1/messages", params={"msisdn": "919812300301"}).json()["messages"] == []
    small = stack.meta.send(wh.text("919812300301", "x" * (LIMIT // 2)))
    assert small.status == 200 and len(json.loads(small.text)["ids"]) == 1


def test_at_most_max_webhook_items_of_a_body_are_taken_and_the_rest_counted(stack: Stack) -> None:
    before = stack.left_out("too_many")
    senders = [f"9198123004{i:02d}" for i in range(5)]
    delivery = stack.meta.send(*(wh.text(s, "MANY") for s in senders))
    assert delivery.status == 200
    assert len(json.loads(delivery.text)["ids"]) == ITEMS
    assert stack.left_out("too_many") == before + 2


# ------------------------------------------------------------------- replays (issue 36.4)


def _calls(stack: Stack, mid: str) -> list[RecordedCall]:
    return [c for c in stack.app.calls if c.headers.get("x-mogateway-message-id") == mid]


def test_the_same_wamid_with_another_timestamp_is_one_message_and_one_callback(stack: Stack) -> None:
    now = int(time.time())
    wamid = wh.new_wamid()
    first = stack.meta.send(wh.text("919812300501", "ONCE", wamid=wamid, timestamp=now - 60))
    again = stack.meta.send(wh.text("919812300501", "ONCE", wamid=wamid, timestamp=now - 30))
    assert first.status == again.status == 200
    (mid,) = json.loads(first.text)["ids"]
    assert json.loads(again.text)["ids"] == [mid] and json.loads(again.text)["duplicates"] == 1
    stack.gw.wait_state(mid, frozenset({"replied"}))
    time.sleep(0.3)
    assert len(_calls(stack, mid)) == 1


def test_a_message_older_than_max_message_age_s_is_acknowledged_not_stored_and_counted(stack: Stack) -> None:
    before = stack.left_out("too_old")
    now = int(time.time())
    old = stack.meta.send(wh.text("919812300502", "STALE", timestamp=now - 8 * 86400 - 60))
    assert old.status == 200 and json.loads(old.text)["ids"] == []
    assert stack.left_out("too_old") == before + 1
    assert stack.gw.admin("GET", "/v1/messages", params={"msisdn": "919812300502"}).json()["messages"] == []
    recent = stack.meta.send(wh.text("919812300502", "LATE BUT FINE", timestamp=now - 7 * 86400))
    assert recent.status == 200 and len(json.loads(recent.text)["ids"]) == 1


def test_a_body_re_posted_after_retention_deleted_its_message_is_not_stored_again(tmp_path: Path) -> None:
    sender = "919812300503"
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        # The first gateway keeps messages 30 days: with one day its own sweep could delete the message
        # before the test saw it replied (a CI run did). The second keeps one day and sweeps at start.
        s = Stack(_serve(tmp_path, graph), app)
        try:
            _register(s)
            # Sent three days ago (within the 8-day window), so retention of one day deletes it.
            first = s.meta.send(wh.text(sender, "ONCE", timestamp=int(time.time()) - 3 * 86400))
            (mid,) = json.loads(first.text)["ids"]
            s.gw.wait_state(mid, frozenset({"replied"}))
            assert s.meta.redeliver(first).status == 200  # the row is there: a duplicate
        finally:
            s.meta.close()
            s.gw.close()
            s.serve.stop()
        s = Stack(_serve(tmp_path, graph, retention_days=1), app)  # a sweep at start
        try:
            deadline = time.monotonic() + 15
            while s.gw.admin("GET", f"/v1/messages/{mid}").status_code != 404:
                assert time.monotonic() < deadline, "retention did not delete the message"
                time.sleep(0.1)
            again = s.meta.post(first.body, signature=first.signature)
            assert again.status == 200 and json.loads(again.text)["ids"] == []
            assert s.left_out("replayed") == 1
            assert s.gw.admin("GET", "/v1/messages", params={"msisdn": sender}).json()["messages"] == []
            time.sleep(0.5)
            assert len(_calls(s, mid)) == 1 and len(graph_sends(graph, sender)) == 1
        finally:
            s.meta.close()
            s.gw.close()
            s.serve.stop()


def graph_sends(graph: FakeGraphServer, to: str) -> list[dict[str, object]]:
    data: list[dict[str, object]] = httpx.get(graph.url + "/__fake/messages", params={"to": to}).json()[
        "data"
    ]
    return data
