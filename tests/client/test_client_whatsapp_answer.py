"""The SDK's rich WhatsApp answers: each builder makes the Cloud API object the gateway accepts, a broken
one fails where it is built, and every adapter (ASGI, FastAPI, Flask; real servers) answers it as JSON to
a WhatsApp callback and as no reply to an SMS one."""

from __future__ import annotations

import httpx
import orjson
import pytest
from client_servers import TOKEN, Serve

from mogateway.client import InboundMessage, RichAnswerError, WhatsAppAnswer
from mogateway.core.contract import OutcomeKind, judge_response
from mogateway.core.whatsapp_answer import decode_reply
from mogateway.testing.payloads import make_callback, make_message

A = WhatsAppAnswer


def test_builders_make_meta_shaped_messages() -> None:
    assert A.buttons("Pay now?", [("pay", "Pay"), ("later", "Later")], footer="Any time").messages == (
        {
            "type": "interactive",
            "interactive": {
                "type": "button",
                "body": {"text": "Pay now?"},
                "footer": {"text": "Any time"},
                "action": {
                    "buttons": [
                        {"type": "reply", "reply": {"id": "pay", "title": "Pay"}},
                        {"type": "reply", "reply": {"id": "later", "title": "Later"}},
                    ]
                },
            },
        },
    )
    listed = A.list("Choose", "Plans", {"Prepaid": [("p1", "₹199", "28 days")], "Postpaid": [("q1", "₹399")]})
    assert listed.messages[0]["interactive"]["action"] == {
        "button": "Plans",
        "sections": [
            {"title": "Prepaid", "rows": [{"id": "p1", "title": "₹199", "description": "28 days"}]},
            {"title": "Postpaid", "rows": [{"id": "q1", "title": "₹399"}]},
        ],
    }
    flat = A.list("Choose", "Plans", [("a", "A"), ("b", "B")], header="Plans")
    assert flat.messages[0]["interactive"]["action"]["sections"] == [
        {"rows": [{"id": "a", "title": "A"}, {"id": "b", "title": "B"}]}
    ]
    assert flat.messages[0]["interactive"]["header"] == {"type": "text", "text": "Plans"}
    assert A.cta_url("Track it", "Track", "https://x.in/t").messages[0]["interactive"]["action"] == {
        "name": "cta_url",
        "parameters": {"display_text": "Track", "url": "https://x.in/t"},
    }
    assert A.image(link="https://x.in/a.png", caption="Bill").messages == (
        {"type": "image", "image": {"link": "https://x.in/a.png", "caption": "Bill"}},
    )
    assert A.document(media_id="123", filename="bill.pdf").messages == (
        {"type": "document", "document": {"id": "123", "filename": "bill.pdf"}},
    )
    assert A.location(28.6, 77.2, name="Office").messages == (
        {"type": "location", "location": {"latitude": 28.6, "longitude": 77.2, "name": "Office"}},
    )
    assert A.reaction("wamid.X", "👍").messages == (
        {"type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": "👍"}},
    )
    assert A.text("hi").messages == ({"type": "text", "text": {"body": "hi", "preview_url": False}},)
    assert A.contact("Help desk", phones=["+911140000000"]).messages[0]["contacts"][0]["name"] == {
        "formatted_name": "Help desk"
    }
    for kind, answer in (("video", A.video(link="https://x.in/v.mp4")), ("audio", A.audio(media_id="9"))):
        assert answer.messages[0]["type"] == kind
    assert A.sticker(media_id="7").messages[0] == {"type": "sticker", "sticker": {"id": "7"}}


def test_a_broken_answer_fails_where_it_is_built_naming_the_member() -> None:
    with pytest.raises(RichAnswerError, match="1 to 3 buttons"):
        A.buttons("Pick", [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")])
    with pytest.raises(RichAnswerError, match="at most 20") as err:
        A.buttons("Pick", [("a", "A title that is too long")])
    assert err.value.path == "whatsapp[0].interactive.action.buttons[0].reply.title"
    with pytest.raises(RichAnswerError, match="at most 24"):
        A.list("Choose", "Plans", [("a", "x" * 25)])
    with pytest.raises(RichAnswerError, match="exactly one of id"):
        A.image(caption="nothing to show")
    with pytest.raises(RichAnswerError, match="within"):
        A.location(91, 0)
    with pytest.raises(RichAnswerError, match="set by the gateway"):
        A.message({"type": "text", "text": {"body": "x"}, "to": "919812345678"})


def test_answers_combine_up_to_five_in_order() -> None:
    three = A.text("one") + A.image(link="https://x.in/a.png") + A.reaction("wamid.X", "👍")
    assert [m["type"] for m in three.messages] == ["text", "image", "reaction"]
    assert A.of(three, A.text("four"), A.text("five")).messages[3:] == (
        A.text("four").messages[0],
        A.text("five").messages[0],
    )
    with pytest.raises(RichAnswerError, match="1 to 5 messages"):
        A.of(three, three)


def test_the_gateway_judges_the_sdk_body_a_rich_reply() -> None:
    answer = A.buttons("Pay?", [("pay", "Pay")]) + A.document(link="https://x.in/b.pdf", filename="b.pdf")
    response = answer.response()
    outcome = judge_response(response.status, response.content_type, response.body, channel="whatsapp")
    assert outcome.kind is OutcomeKind.REPLY
    assert outcome.reply is not None and decode_reply(outcome.reply) == answer.messages


def rich(message: InboundMessage) -> WhatsAppAnswer:
    return A.buttons(f"You said {message.message}", [("yes", "Yes"), ("no", "No")])


def test_each_adapter_answers_json_to_whatsapp_and_no_reply_to_sms(serve: Serve) -> None:
    with serve(rich) as url:
        body, headers = make_callback("HELLO", token=TOKEN, channel="whatsapp", shortcode="919876543210")
        wa = httpx.post(url, content=body, headers=headers, timeout=10)
        sms_body, sms_headers = make_callback("HELLO", token=TOKEN)
        sms = httpx.post(url, content=sms_body, headers=sms_headers, timeout=10)
    assert wa.status_code == 200 and wa.headers["content-type"] == "application/json"
    assert orjson.loads(wa.content) == {"whatsapp": list(rich(make_message("HELLO")).messages)}
    assert (sms.status_code, sms.content) == (200, b"")
