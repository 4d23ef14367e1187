"""WhatsApp under overload, at small scale (issue 38): more offered means refusals Meta retries, never
replies ending ``reply_unknown`` because the gateway was busy.

Real ``mogateway serve`` processes (one worker, so one backlog), a real callback application and a real
HTTP server as the Graph API; the limits are set small so a handful of messages is an overload.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

from .whatsapp_harness import APP_SECRET, PNID, add_whatsapp_client, start_whatsapp_serve, whatsapp_config

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    GatewayClient,
    ServeProcess,
)

ENDS = frozenset({"replied", "reply_failed", "reply_unknown"})


def _start(workdir: Path, graph_url: str, extra: str) -> ServeProcess:
    config = whatsapp_config(graph_url, whatsapp=extra)
    return start_whatsapp_serve(workdir, config, args=["--workers", "1"])


def _register(gw: GatewayClient, url: str, max_concurrency: int) -> None:
    add_whatsapp_client(gw, url, name="wa", max_concurrency=max_concurrency)


def _samples(gw: GatewayClient, name: str) -> list[Any]:
    return [
        sample
        for family in text_string_to_metric_families(gw.admin("GET", "/metrics").text)
        for sample in family.samples
        if sample.name == name and sample.labels.get("phone_number_id") == PNID
    ]


def _metric(gw: GatewayClient, name: str, **labels: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(gw.admin("GET", "/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


class _Graph:
    """The Graph API's messages endpoint as a plain HTTP server: each send answered with a new wamid
    after ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._ids = itertools.count(1)

    def __call__(self, call: RecordedCall) -> Answer:
        body = json.dumps({"messages": [{"id": f"wamid.OUT{next(self._ids):06d}"}]})
        return Answer(body=body.encode(), content_type="application/json", delay_s=self.delay_s)


@pytest.fixture
def graph_ok() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(_Graph(0.0)) as graph:
        yield graph


def _sent_contexts(graph: CallbackRecorder) -> list[str]:
    return [
        json.loads(c.body)["context"]["message_id"]
        for c in graph.calls
        if c.path.endswith("/messages") and c.body
    ]


def test_a_busy_worker_refuses_webhooks_503_and_every_accepted_message_is_answered(
    tmp_path: Path, graph_ok: CallbackRecorder
) -> None:
    """With at most 3 unanswered messages held and a slow application, the fourth webhook onwards is
    refused 503 before anything is stored; every accepted one is replied to once, none ends unknown;
    once the backlog drains, the refused ones delivered again are taken."""
    with CallbackRecorder.in_thread(lambda _c: Answer.late(1.0, "OK thanks")) as app:
        serve = _start(tmp_path, graph_ok.url, "max_pending_webhook_messages = 3")
        gw = GatewayClient(serve.url)
        meta = wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET)
        try:
            _register(gw, app.url, max_concurrency=2)
            offered = [wh.text(f"91981230{n:04d}", f"HI {n}", wamid=wh.new_wamid()) for n in range(10)]
            accepted: dict[str, str] = {}  # wamid -> message id
            refused: list[dict[str, Any]] = []
            for message in offered:
                delivery = meta.send(message)
                if delivery.status == 200:
                    (mid,) = json.loads(delivery.text)["ids"]
                    accepted[message["id"]] = mid
                else:
                    assert delivery.status == 503, delivery.text
                    problem = json.loads(delivery.text)
                    assert problem["status"] == 503 and "busy" in problem["detail"]
                    refused.append(message)
            assert refused, "nothing was refused: the bound did not act"
            assert 3 <= len(accepted) <= 6
            assert _metric(gw, "mogateway_admission_refused_total", source="whatsapp") >= len(refused)
            for mid in accepted.values():
                assert gw.wait_state(mid, ENDS, timeout=30)["state"] == "replied"
            # Meta delivers the refused ones again later: now they are taken and answered.
            deadline = time.monotonic() + 60
            while refused:
                assert time.monotonic() < deadline, f"{len(refused)} webhooks still refused after 60 s"
                delivery = meta.send(refused[0])
                if delivery.status == 200:
                    (mid,) = json.loads(delivery.text)["ids"]
                    accepted[refused.pop(0)["id"]] = mid
                else:
                    time.sleep(0.3)
            for mid in accepted.values():
                assert gw.wait_state(mid, ENDS, timeout=30)["state"] == "replied"
            contexts = _sent_contexts(graph_ok)
            assert sorted(contexts) == sorted(accepted)  # each message answered exactly once
        finally:
            meta.close()
            gw.close()
            serve.stop()


def test_graph_sends_queued_behind_a_slow_api_are_retried_unsent_never_unknown(tmp_path: Path) -> None:
    """One Graph connection, a Graph API that takes 0.7 s per send and a 1 s network deadline: the
    sends queued behind each other wait in the number's queue on a budget of their own (a deadline
    covering the queue too would leave a late request too little time and end it "possibly sent"); the
    queue holds one, the rest are refused unsent and retried. Every reply goes out once, none unknown."""
    with (
        CallbackRecorder.in_thread(_Graph(0.7)) as graph,
        CallbackRecorder.in_thread(lambda _c: Answer.text("OK thanks")) as app,
    ):
        extra = (
            "graph_max_connections = 1\ngraph_max_queued = 1\n"
            "graph_timeout_s = 1.0\ngraph_queue_timeout_s = 5.0"
        )
        serve = _start(tmp_path, graph.url, extra)
        gw = GatewayClient(serve.url)
        meta = wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET)
        try:
            _register(gw, app.url, max_concurrency=8)
            wamids = [wh.new_wamid() for _ in range(5)]
            mids = []
            for n, wamid in enumerate(wamids):
                delivery = meta.send(wh.text(f"91981240{n:04d}", f"HI {n}", wamid=wamid))
                assert delivery.status == 200, delivery.text
                mids.extend(json.loads(delivery.text)["ids"])
            states = [gw.wait_state(mid, ENDS, timeout=60)["state"] for mid in mids]
            assert states == ["replied"] * 5
            assert sorted(_sent_contexts(graph)) == sorted(wamids)  # each sent exactly once
            # The number's queue is in the metrics: nothing in flight or waiting once all is sent.
            samples = _samples(gw, "mogateway_whatsapp_graph_sends")
            assert {(s.labels["state"], s.value) for s in samples} == {("in_flight", 0.0), ("waiting", 0.0)}
            assert _samples(gw, "mogateway_whatsapp_graph_sends_refused_total")
        finally:
            meta.close()
            gw.close()
            serve.stop()
