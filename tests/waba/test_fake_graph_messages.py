"""The fake Graph API's /messages endpoint and the Meta-like webhook sender (mogateway.testing)."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mogateway.core.whatsapp import StatusKind, parse_webhook, verify_signature
from mogateway.testing.fake_graph import FakeGraphServer, WebhookSender, default_fixtures
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.fake_graph.fixtures import CLOUD_PHONE_NUMBER_ID, SOURCE_WABA
from mogateway.testing.recorder import Answer, CallbackRecorder

from .conftest import DEST_WABA, TOKEN, Fake

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PATH = f"/v21.0/{CLOUD_PHONE_NUMBER_ID}/messages"
TO = "919812345678"


def send(
    fake: Fake,
    body: str = "Your balance is ₹240",
    *,
    to: str = TO,
    pid: str = CLOUD_PHONE_NUMBER_ID,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> httpx.Response:
    message: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "text",
        "text": {"preview_url": False, "body": body},
    }
    message.update(extra)
    return fake.http.post(
        f"/v21.0/{pid}/messages", headers=AUTH if headers is None else headers, json=message
    )


def sent(fake: Fake, **query: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = fake.http.get("/__fake/messages", params=query).json()["data"]
    return data


def script(fake: Fake, **fields: Any) -> None:
    fake.http.post("/__fake/messages/errors", json=fields).raise_for_status()


def error_of(r: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = r.json()["error"]
    return error


# -- /messages ---------------------------------------------------------------------------------------


def test_a_text_send_answers_a_wamid_and_is_recorded(fake: Fake) -> None:
    r = send(fake, context={"message_id": "wamid.INBOUND"})
    assert r.status_code == 200, r.text
    answer = r.json()
    wamid = answer["messages"][0]["id"]
    assert wamid.startswith("wamid.") and answer["contacts"] == [{"input": TO, "wa_id": TO}]
    assert answer["messaging_product"] == "whatsapp"
    (record,) = sent(fake)
    assert (record["to"], record["text"], record["context_message_id"], record["wamid"], record["error"]) == (
        TO,
        "Your balance is ₹240",
        "wamid.INBOUND",
        wamid,
        None,
    )
    assert record["phone_number_id"] == CLOUD_PHONE_NUMBER_ID and record["from"] == "919876543210"
    assert send(fake, to="+91 98123 45679").json()["contacts"][0]["wa_id"] == "919812345679"
    assert [m["to"] for m in sent(fake, to="919812345679")] == ["919812345679"]
    assert send(fake).json()["messages"][0]["id"] != wamid


def test_the_4096_limit_counts_utf16_units(fake: Fake) -> None:
    assert send(fake, "a" * 4096).status_code == 200
    assert send(fake, "😀" * 2048).status_code == 200
    for body in ("a" * 4097, "😀" * 2048 + "a"):
        r = send(fake, body)
        assert r.status_code == 400 and error_of(r)["code"] == 100
        assert "4096" in error_of(r)["error_data"]["details"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"messaging_product": "sms"}, 100),
        ({"to": "asha"}, 100),
        ({"recipient_type": "group"}, 100),
        ({"type": "carrier_pigeon"}, 131051),
        ({"text": {"body": ""}}, 100),
        ({"text": "hello"}, 100),
        ({"context": {"message_id": 5}}, 100),
    ],
)
def test_bad_sends_are_refused_with_graph_s_envelope(fake: Fake, change: dict[str, Any], code: int) -> None:
    r = send(fake, **change)
    error = error_of(r)
    assert r.status_code == 400 and error["code"] == code and error["message"].startswith(f"(#{code}) ")
    assert error["fbtrace_id"] and error["error_data"]["details"]
    assert sent(fake) == []


def test_who_may_send(fixtures: dict[str, Any]) -> None:
    fixtures["tokens"]["management-only"] = {
        "app_id": "1",
        "scopes": ["whatsapp_business_management"],
        "waba_ids": [DEST_WABA],
    }
    fixtures["tokens"]["old-provider"] = {
        "app_id": "1",
        "waba_ids": [SOURCE_WABA],
        "scopes": ["whatsapp_business_messaging"],
    }
    fixtures["cloud_numbers"]["106540352200001"] = {
        "display_phone_number": "919876500001",
        "waba_id": DEST_WABA,
        "registered": False,
    }
    fixtures["numbers"]["919876543213"]["status"] = "DISCONNECTED"
    with FakeGraphServer(fixtures) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        fake = Fake(server, http)
        assert error_of(send(fake, headers={}))["code"] == 104
        assert error_of(send(fake, headers={"Authorization": "Bearer nope"}))["code"] == 190
        r = send(fake, headers={"Authorization": "Bearer management-only"})
        assert (r.status_code, error_of(r)["code"]) == (403, 10)
        assert error_of(send(fake, pid="999"))["error_subcode"] == 33
        assert error_of(send(fake, pid="106540352200001"))["code"] == 133010
        # A number of the migration world, reached by a token of its WABA, on the Cloud API.
        old = {"Authorization": "Bearer old-provider"}
        assert send(fake, pid="106540352243210", headers=old).status_code == 200
        assert sent(fake)[0]["from"] == "919876543210"
        assert error_of(send(fake, pid="106540352243213", headers=old))["code"] == 133010


REFERENCE_CODES = [
    (131047, 400),
    (131026, 400),
    (130429, 400),
    (131056, 400),
    (1, 500),
    (2, 503),
    (131000, 500),
    (190, 401),
    (100, 400),
]


@pytest.mark.parametrize(("code", "http_status"), REFERENCE_CODES)
def test_an_error_for_the_next_call(fake: Fake, code: int, http_status: int) -> None:
    script(fake, code=code)
    r = send(fake)
    error = error_of(r)
    assert r.status_code == http_status
    assert error["code"] == code and error["message"].startswith(f"(#{code}) ")
    assert error["error_data"]["messaging_product"] == "whatsapp" and error["error_data"]["details"]
    assert error["type"] == "OAuthException" and error["fbtrace_id"]
    assert error["is_transient"] is (code in (130429, 131056, 1, 2, 131000))
    assert send(fake).status_code == 200  # only the next call
    assert [m["error"] for m in sent(fake)] == [code, None]


def test_errors_for_one_recipient_until_cleared_or_counted(fake: Fake) -> None:
    script(fake, code=131056, to="+91 98123 45678", details="slow down")
    for _ in range(3):
        r = send(fake)
        assert error_of(r)["code"] == 131056 and error_of(r)["error_data"]["details"] == "slow down"
    assert send(fake, to="919812345679").status_code == 200
    fake.http.delete("/__fake/messages/errors").raise_for_status()
    assert send(fake).status_code == 200
    script(fake, code=131047, to=TO, times=2)
    assert [error_of(send(fake))["code"] for _ in range(2)] == [131047, 131047]
    assert send(fake).status_code == 200


def test_scripting_refuses_nonsense(fake: Fake) -> None:
    for body in ({"code": "131047"}, {"code": 1, "times": 0}, {"code": 1, "to": 9198}, {"code": True}):
        assert fake.http.post("/__fake/messages/errors", json=body).status_code == 400


def test_mark_read_and_reset(fake: Fake) -> None:
    r = fake.http.post(
        PATH, headers=AUTH, json={"messaging_product": "whatsapp", "status": "read", "message_id": "wamid.IN"}
    )
    assert r.json() == {"success": True}
    reads = fake.http.get("/__fake/messages/reads").json()["data"]
    assert [(x["phone_number_id"], x["message_id"]) for x in reads] == [(CLOUD_PHONE_NUMBER_ID, "wamid.IN")]
    bad = fake.http.post(PATH, headers=AUTH, json={"messaging_product": "whatsapp", "status": "read"})
    assert error_of(bad)["code"] == 100
    send(fake)
    script(fake, code=190, to=TO)
    fake.http.post("/__fake/reset", json={}).raise_for_status()
    assert sent(fake) == [] and fake.http.get("/__fake/messages/reads").json()["data"] == []
    assert send(fake).status_code == 200


def test_faults_apply_to_messages_too(fake: Fake) -> None:
    fake.fault(path_regex="/messages$", http=502, code=1)
    assert send(fake).status_code == 502
    assert send(fake).status_code == 200


def test_default_fixtures_have_a_cloud_number() -> None:
    assert default_fixtures()["cloud_numbers"][CLOUD_PHONE_NUMBER_ID]["waba_id"] == DEST_WABA


# -- the webhook sender ------------------------------------------------------------------------------

SECRET = "app-secret"


@pytest.fixture
def receiver() -> Any:
    with CallbackRecorder.in_thread(Answer.text("EVENT_RECEIVED"), path="/v1/whatsapp/webhook") as app:
        yield app


def test_sender_posts_meta_shaped_signed_bodies(receiver: CallbackRecorder) -> None:
    with WebhookSender(receiver.url, SECRET) as meta:
        first = meta.send(
            wh.text(TO, "BAL नमस्ते 😀", wamid="wamid.T1", timestamp=1764216000),
            wh.button_reply(TO, "bal", "Balance", context="wamid.OUT1"),
            wh.list_reply("919812345679", "p2", "Plan ₹299", "28 days"),
            wh.quick_reply(TO, "Stop promotions", "STOP"),
            wh.media(TO, "image", caption="मेरा बिल", media_id="77"),
            wh.media(TO, "document"),
        )
        assert (first.status, first.text) == (200, "EVENT_RECEIVED")
        (call,) = receiver.wait_for_calls(1)
        assert call.method == "POST" and call.body == first.body
        assert call.headers["content-type"] == "application/json"
        assert verify_signature(call.body, call.headers["x-hub-signature-256"], SECRET)
        assert "नमस्ते".encode() in call.body  # UTF-8, not \u escapes
        hook = parse_webhook(call.body)
        got = [(m.type, m.text, m.sender, m.media_id) for m in hook.messages]
        assert got == [
            ("text", "BAL नमस्ते 😀", TO, None),
            ("interactive", "Balance", TO, None),
            ("interactive", "Plan ₹299", "919812345679", None),
            ("button", "Stop promotions", TO, None),
            ("image", "मेरा बिल", TO, "77"),
            ("document", "", TO, hook.messages[5].media_id),
        ]
        assert hook.messages[0].wamid == "wamid.T1" and hook.messages[0].timestamp == 1764216000
        assert hook.messages[1].context_wamid == "wamid.OUT1"
        assert {m.business_number for m in hook.messages} == {"919876543210"}
        assert {m.phone_number_id for m in hook.messages} == {CLOUD_PHONE_NUMBER_ID}
        assert len({m.wamid for m in hook.messages}) == 6


def test_statuses_redelivery_unsigned_and_batches(receiver: CallbackRecorder) -> None:
    with WebhookSender(receiver.url, SECRET) as meta:
        delivery = meta.send(
            statuses=[
                wh.status("wamid.R1", "read", TO, timestamp=20),
                wh.status("wamid.R1", "delivered", TO, timestamp=10),
                wh.status(
                    "wamid.R2",
                    "failed",
                    TO,
                    error_code=131047,
                    error_title="Re-engagement message",
                    details="more than 24 hours",
                ),
            ]
        )
        again = meta.redeliver(delivery)
        unsigned = meta.post(delivery.body, signed=False)
        forged = meta.post(delivery.body, signature="sha256=" + "0" * 64)
        other = WebhookSender(receiver.url, SECRET, phone_number_id="2", display_phone_number="+1 555 0100")
        with other:
            batch = wh.merge(
                wh.webhook_body([wh.text(TO, "one"), wh.text(TO, "two")]),
                wh.webhook_body(
                    [wh.text("15551234567", "three")], phone_number_id="2", display_phone_number="+1 555 0100"
                ),
            )
            meta.post(wh.encode(batch))
        calls = receiver.wait_for_calls(5)
        first, second, third, fourth, fifth = calls
        assert first.body == second.body == again.body and first.headers == second.headers
        assert "x-hub-signature-256" not in third.headers and unsigned.signature is None
        assert not verify_signature(fourth.body, fourth.headers["x-hub-signature-256"], SECRET)
        assert forged.signature == "sha256=" + "0" * 64
        statuses = parse_webhook(first.body).statuses
        assert [(s.wamid, s.status, s.timestamp) for s in statuses] == [
            ("wamid.R1", StatusKind.READ, 20),
            ("wamid.R1", StatusKind.DELIVERED, 10),
            ("wamid.R2", StatusKind.FAILED, statuses[2].timestamp),
        ]
        assert statuses[2].errors[0].code == 131047 and statuses[2].errors[0].details == "more than 24 hours"
        hook = parse_webhook(fifth.body)
        assert [(m.text, m.business_number) for m in hook.messages] == [
            ("one", "919876543210"),
            ("two", "919876543210"),
            ("three", "15550100"),
        ]
        assert len(meta.deliveries) == 5


def test_handshake_get(receiver: CallbackRecorder) -> None:
    with WebhookSender(receiver.url, SECRET) as meta:
        assert meta.handshake("verify-me", challenge="42").status_code == 200
        (call,) = receiver.wait_for_calls(1)
        query = parse_qs(urlsplit(call.path).query)
        assert call.method == "GET" and query == {
            "hub.mode": ["subscribe"],
            "hub.verify_token": ["verify-me"],
            "hub.challenge": ["42"],
        }


def test_media_kind_is_checked() -> None:
    with pytest.raises(ValueError, match="media kind"):
        wh.media(TO, "hologram")


# -- rich sends ----------------------------------------------------------------------------------------

BUTTONS: dict[str, Any] = {
    "type": "interactive",
    "interactive": {
        "type": "button",
        "body": {"text": "Pay now?"},
        "action": {"buttons": [{"type": "reply", "reply": {"id": "pay", "title": "Pay"}}]},
    },
}


def _buttons(n: int) -> list[dict[str, Any]]:
    return [{"type": "reply", "reply": {"id": f"b{i}", "title": f"B{i}"}} for i in range(n)]


def rich_send(fake: Fake, message: dict[str, Any], to: str = TO) -> httpx.Response:
    body = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to, **message}
    return fake.http.post(PATH, headers=AUTH, json=body)


def test_a_rich_send_is_recorded_with_its_message_object(fake: Fake) -> None:
    r = rich_send(fake, BUTTONS)
    assert r.status_code == 200, r.text
    (record,) = sent(fake)
    assert record["type"] == "interactive" and record["message"] == BUTTONS
    assert record["wamid"] == r.json()["messages"][0]["id"]


@pytest.mark.parametrize(
    ("change", "code", "member"),
    [
        (lambda m: m["interactive"]["action"]["buttons"][0]["reply"].update(title="x" * 21), 131009, "title"),
        (lambda m: m["interactive"]["action"].update(buttons=_buttons(4)), 131009, "buttons"),
        (lambda m: m["interactive"]["body"].update(text="x" * 1025), 131009, "body.text"),
        (lambda m: m["interactive"].pop("body"), 100, "interactive.body"),
        (lambda m: m["interactive"]["action"]["buttons"][0]["reply"].update(payload="x"), 100, "payload"),
    ],
)  # fmt: skip
def test_a_rich_send_breaking_meta_s_limits_is_refused_as_meta_does(
    fake: Fake, change: Any, code: int, member: str
) -> None:
    message = copy.deepcopy(BUTTONS)
    change(message)
    r = rich_send(fake, message)
    assert r.status_code == 400
    error = error_of(r)
    assert error["code"] == code and member in error["error_data"]["details"]


def test_after_lets_sends_through_before_the_scripted_error(fake: Fake) -> None:
    script(fake, code=131026, to=TO, after=2, times=1)
    codes = [rich_send(fake, BUTTONS).status_code for _ in range(4)]
    assert codes == [200, 200, 400, 200]
    assert [s["error"] for s in sent(fake)] == [None, None, 131026, None]
    assert fake.http.post("/__fake/messages/errors", json={"code": 1, "after": -1}).status_code == 400
