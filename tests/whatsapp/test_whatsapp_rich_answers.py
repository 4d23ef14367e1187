"""Rich WhatsApp answers end to end: signed webhooks into a real ``mogateway serve`` (default workers), the
application answering ``{"whatsapp": ...}`` JSON, and what reaches the fake Graph API (a real server that
checks sends as Meta does). The client has DLT enforcement on and no template: DLT is for SMS only, so
its WhatsApp replies — text and rich — go out all the same."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.cli.common import console
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ADMIN_TOKEN, GatewayClient

from .test_whatsapp_end_to_end import Stack, _start, running_stack
from .whatsapp_harness import APP_SECRET, BUSINESS

PE = "1201159178420181234"  # a DLT principal entity id (19 digits)
REACTED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAEhgSQUJDREVGMDEyMzQ1Njc4OQA="

BUTTONS = {
    "type": "interactive",
    "interactive": {
        "type": "button",
        "header": {"type": "text", "text": "Your bill"},
        "body": {"text": "₹240 is due on the 5th. Pay now?"},
        "footer": {"text": "Reply any time"},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": "pay", "title": "Pay now"}},
                {"type": "reply", "reply": {"id": "later", "title": "Remind me"}},
                {"type": "reply", "reply": {"id": "agent", "title": "Talk to us"}},
            ]
        },
    },
}
LIST = {
    "type": "interactive",
    "interactive": {
        "type": "list",
        "body": {"text": "Choose a plan"},
        "action": {
            "button": "Plans",
            "sections": [
                {
                    "title": "Prepaid",
                    "rows": [
                        {"id": "p199", "title": "₹199", "description": "1.5 GB/day, 28 days"},
                        {"id": "p299", "title": "₹299", "description": "2 GB/day, 28 days"},
                    ],
                },
                {"title": "Postpaid", "rows": [{"id": "pp399", "title": "₹399"}]},
            ],
        },
    },
}
CTA = {
    "type": "interactive",
    "interactive": {
        "type": "cta_url",
        "body": {"text": "Track your order"},
        "action": {"name": "cta_url", "parameters": {"display_text": "Track", "url": "https://x.in/t/1"}},
    },
}
RICH: dict[str, dict[str, Any]] = {
    "buttons": BUTTONS,
    "list": LIST,
    "cta": CTA,
    "text": {"type": "text", "text": {"body": "Plain, as JSON", "preview_url": True}},
    "image": {"type": "image", "image": {"link": "https://x.in/bill.png", "caption": "Your bill"}},
    "document": {"type": "document", "document": {"id": "1013859600285441", "filename": "bill.pdf"}},
    "audio": {"type": "audio", "audio": {"link": "https://x.in/hello.ogg"}},
    "video": {"type": "video", "video": {"link": "https://x.in/how.mp4", "caption": "How to pay"}},
    "sticker": {"type": "sticker", "sticker": {"id": "798882015472548"}},
    "location": {
        "type": "location",
        "location": {"latitude": 28.6139, "longitude": 77.209, "name": "Office", "address": "New Delhi"},
    },
    "contacts": {
        "type": "contacts",
        "contacts": [{"name": {"formatted_name": "Help desk"}, "phones": [{"phone": "+911140000000"}]}],
    },
    "reaction": {"type": "reaction", "reaction": {"message_id": REACTED, "emoji": "👍"}},
}
THREE = [RICH["text"], RICH["image"], BUTTONS]
FOUR_BUTTONS = json.loads(json.dumps(BUTTONS))
FOUR_BUTTONS["interactive"]["action"]["buttons"].append(
    {"type": "reply", "reply": {"id": "x", "title": "More"}}
)


def _rich(data: Any) -> Answer:
    return Answer(body=json.dumps({"whatsapp": data}).encode(), content_type="application/json")


def _answer(call: RecordedCall) -> Answer:
    text = call.json()["message"]
    kind = text.removeprefix("RICH ")
    if kind in RICH:
        return _rich(RICH[kind])
    if kind in ("three", "mid", "retry"):
        return _rich(THREE)
    if kind == "bad":
        return _rich(FOUR_BUTTONS)
    return Answer.text(f"You said {text}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("wa-rich"), _answer, _register) as s:
        yield s


def _register(gw: GatewayClient, app: CallbackRecorder) -> None:
    resp = gw.admin(
        "POST",
        "/v1/clients",
        json={
            "name": "wa-dlt",
            "whatsapp_numbers": [BUSINESS],
            "callback_url": app.url,
            "dlt_pe_id": PE,
            "dlt_enforce": True,
        },
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["dlt_enforce"] is True and resp.json()["dlt_templates"] == 0


def _script(stack: Stack, **body: Any) -> None:
    assert httpx.post(stack.graph.url + "/__fake/messages/errors", json=body).status_code in (200, 201, 204)


def _event(msg: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(e for e in msg["timeline"] if e["event"] == kind)


# ------------------------------------------------------------------------------------ DLT


def test_dlt_enforce_does_not_block_whatsapp_replies(stack: Stack) -> None:
    """Issue 40: DLT is TRAI's rule for SMS; a client with DLT enforce and no template gets its WhatsApp
    reply sent, with no DLT note in its timeline."""
    sender = "919812310001"
    (mid,) = stack.deliver(wh.text(sender, "BALANCE"))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_blocked", "reply_failed"}))
    assert msg["state"] == "replied", msg["timeline"]
    assert not [e for e in msg["timeline"] if e["event"] == "reply_blocked"]
    assert "dlt_template" not in _event(msg, "reply_submitted")
    assert [s["text"] for s in stack.sends(to=sender)] == ["You said BALANCE"]


# ------------------------------------------------------------------------------------ each kind


@pytest.mark.parametrize("kind", sorted(RICH))
def test_a_rich_answer_of_each_kind_reaches_graph_as_meta_expects(stack: Stack, kind: str) -> None:
    sender = f"9198123200{sorted(RICH).index(kind):02d}"
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text(sender, f"RICH {kind}", wamid=wamid))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed", "no_reply", "reply_blocked"}))
    assert msg["state"] == "replied", msg["timeline"]
    (send,) = stack.sends(to=sender)
    assert send["error"] is None and send["type"] == RICH[kind]["type"]
    assert send["body"] == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": sender,
        **RICH[kind],
        "context": {"message_id": wamid},
    }
    outcome = _event(msg, "outcome")
    assert outcome["outcome"] == "reply" and json.loads(outcome["reply"]) == [RICH[kind]]
    submitted = _event(msg, "reply_submitted")
    assert submitted["refs"] == [send["wamid"]] and submitted["parts"] == 1


def test_three_messages_are_sent_in_order_the_first_as_the_reply(stack: Stack) -> None:
    sender = "919812330001"
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text(sender, "RICH three", wamid=wamid))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed"}))
    assert msg["state"] == "replied", msg["timeline"]
    sends = stack.sends(to=sender)
    assert [s["message"] for s in sends] == THREE
    assert [s["context_message_id"] for s in sends] == [wamid, None, None]
    submitted = _event(msg, "reply_submitted")
    assert submitted["parts"] == 3 and submitted["refs"] == [s["wamid"] for s in sends]
    assert submitted["detail"] == "text, image, interactive button"
    assert _event(msg, "outcome")["rich"] == ["text", "image", "interactive button"]
    assert json.loads(msg["reply"]) == THREE  # the API shows the messages, not the stored form


# ------------------------------------------------------------------------------------ refusals


def test_an_invalid_rich_answer_is_a_bad_response_with_the_reason_and_nothing_is_sent(stack: Stack) -> None:
    sender = "919812340001"
    (mid,) = stack.deliver(wh.text(sender, "RICH bad"))
    msg = stack.gw.wait_state(mid, frozenset({"bad_response", "replied", "reply_failed"}))
    assert msg["state"] == "bad_response", msg["timeline"]
    outcome = _event(msg, "outcome")
    assert outcome["outcome"] == "bad_response"
    assert outcome["detail"] == (
        "rich answer: whatsapp.interactive.action.buttons: must be a list of 1 to 3 buttons"
    )
    assert stack.sends(to=sender) == []


def test_a_failure_mid_list_says_which_parts_went(stack: Stack) -> None:
    sender = "919812350001"
    _script(stack, code=131026, to=sender, after=1)  # the second message is undeliverable
    try:
        (mid,) = stack.deliver(wh.text(sender, "RICH mid"))
        msg = stack.gw.wait_state(mid, frozenset({"reply_failed", "replied"}))
    finally:
        httpx.delete(stack.graph.url + "/__fake/messages/errors")
    assert msg["state"] == "reply_failed", msg["timeline"]
    sends = stack.sends(to=sender)
    assert [s["error"] for s in sends] == [None, 131026]
    failed = _event(msg, "reply_failed")
    assert "131026" in failed["detail"]
    assert f"after 1 of 3 parts: {sends[0]['wamid']}" in failed["detail"]


def test_a_retry_after_a_failure_mid_list_never_sends_a_part_twice(stack: Stack) -> None:
    sender = "919812360001"
    _script(stack, code=130429, to=sender, after=1, times=1)  # throughput: the second part waits
    try:
        (mid,) = stack.deliver(wh.text(sender, "RICH retry"))
        msg = stack.gw.wait_state(mid, frozenset({"reply_failed", "replied"}), timeout=20)
    finally:
        httpx.delete(stack.graph.url + "/__fake/messages/errors")
    assert msg["state"] == "replied", msg["timeline"]
    sends = stack.sends(to=sender)
    assert [(s["type"], s["error"]) for s in sends] == [
        ("text", None),
        ("image", 130429),
        ("image", None),
        ("interactive", None),
    ]
    waiting = _event(msg, "reply_waiting")
    assert "130429" in waiting["detail"] and "after 1 of 3 parts" in waiting["detail"]
    submitted = _event(msg, "reply_submitted")
    assert submitted["refs"] == [s["wamid"] for s in sends if s["error"] is None]


def test_messages_show_tells_the_reason_of_a_refused_rich_answer(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = "919812340002"
    (mid,) = stack.deliver(wh.text(sender, "RICH bad"))
    stack.gw.wait_state(mid, frozenset({"bad_response"}))
    monkeypatch.setattr(console, "_width", 400)
    env = {"MOGATEWAY_URL": stack.serve.url, "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN}
    shown = CliRunner().invoke(cli, ["messages", "show", mid], env=env)
    assert shown.exit_code == 0, shown.stdout
    assert "must be a list of 1 to 3 buttons" in " ".join(shown.stdout.split())


# ------------------------------------------------------------------------------------ a restart


def test_a_rich_answer_survives_a_restart_between_answer_and_send(tmp_path: Path) -> None:
    sender = "919812370001"
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_answer) as app:
        # Every send to this person fails (retryable) while the first gateway runs: the reply waits.
        httpx.post(graph.url + "/__fake/messages/errors", json={"code": 131000, "to": sender})
        serve = _start(tmp_path, graph, "first")
        gw = GatewayClient(serve.url)
        try:
            _register(gw, app)
            with wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
                delivery = meta.send(wh.text(sender, "RICH three"))
            (mid,) = json.loads(delivery.text)["ids"]
            gw.wait_state(mid, frozenset({"answered"}), timeout=15)
        finally:
            gw.close()
            serve.stop()
        httpx.delete(graph.url + "/__fake/messages/errors")
        second = _start(tmp_path, graph, "second")
        gw = GatewayClient(second.url)
        try:
            msg = gw.wait_state(mid, frozenset({"replied", "reply_failed", "reply_unknown"}), timeout=30)
            assert msg["state"] == "replied", msg["timeline"]
            sends = [s for s in httpx.get(graph.url + "/__fake/messages").json()["data"] if s["to"] == sender]
            assert [s["message"] for s in sends if s["error"] is None] == THREE
            assert len(app.calls) == 1  # the answer was kept: no second callback
        finally:
            gw.close()
            second.stop()
