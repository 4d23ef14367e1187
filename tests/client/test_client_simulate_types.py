"""``mogateway simulate --whatsapp --type T`` against a real application on 127.0.0.1 (the SDK's
``CallbackApp``): every inbound WhatsApp type reaches the application typed, as the gateway would send
it; the details' options; what the gateway never calls back or never answers; usage errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_client_simulate import TOKEN, run, run_json

from mogateway.api.whatsapp import arrival_for
from mogateway.client import CallbackApp, InboundMessage
from mogateway.client import whatsapp as typed
from mogateway.core.whatsapp import parse_webhook
from mogateway.simulation import WITHHELD_DETAIL
from mogateway.testing import simulated_whatsapp as sw
from mogateway.testing.callback_apps import RecordingApp, serve_asgi
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.payloads import make_mo

SENDER = "919812345678"
BUSINESS = "919876543210"
#: type -> (MESSAGE and options, what the application must see in ``message.whatsapp``).
CASES: dict[str, tuple[list[str], Any]] = {
    "text": (["HELLO"], lambda w, m: w.text == typed.Text("HELLO") and m == "HELLO"),
    "image": (
        ["my bill", "--media-id", "1003383421387123", "--mime-type", "image/png"],
        lambda w, m: (
            w.image.id == "1003383421387123"
            and w.image.mime_type == "image/png"
            and w.image.caption == "my bill"
            and w.media is w.image
            and m == "my bill"
        ),
    ),
    "audio": (["--no-voice"], lambda w, m: w.audio.voice is False and w.audio.mime_type.startswith("audio/")),
    "video": (["the meter"], lambda w, m: w.video.caption == "the meter" and w.video.sha256),
    "document": (
        ["statement", "--filename", "bill-nov.pdf", "--file-size", "303833"],
        lambda w, m: (
            (w.document.filename, w.document.file_size, w.document.caption)
            == ("bill-nov.pdf", 303833, "statement")
        ),
    ),
    "sticker": (["--animated"], lambda w, m: w.sticker.animated is True and m == ""),
    "location": (
        ["Gateway of India", "--latitude", "18.922", "--longitude", "72.8347", "--address", "Colaba, Mumbai"],
        lambda w, m: (
            w.location == typed.Location(18.922, 72.8347, "Gateway of India", "Colaba, Mumbai") and m == ""
        ),
    ),
    "contacts": (
        ["Ravi Kumar", "--phone", "+91 98123 45679"],
        lambda w, m: (
            w.contacts[0].name.formatted_name == "Ravi Kumar"
            and w.contacts[0].phones[0].phone == "+91 98123 45679"
        ),
    ),
    "interactive": (
        ["Pay now", "--reply-id", "pay-1"],
        lambda w, m: (
            w.interactive.type == "button_reply"
            and w.interactive.reply == typed.InteractiveReply("pay-1", "Pay now")
            and m == "Pay now"
        ),
    ),
    "list_reply": (
        ["Plan 299", "--reply-id", "p299", "--description", "2 GB/day"],
        lambda w, m: w.interactive.list_reply == typed.InteractiveReply("p299", "Plan 299", "2 GB/day"),
    ),
    "nfm_reply": (
        ['{"rating": "5"}'],
        lambda w, m: w.interactive.nfm_reply.response_json == '{"rating": "5"}' and m == "",
    ),
    "button": (
        ["Stop promotions", "--reply-id", "STOP"],
        lambda w, m: w.button == typed.Button("STOP", "Stop promotions") and m == "Stop promotions",
    ),
    "order": (
        ["by 6 pm"],
        lambda w, m: w.order.text == "by 6 pm" and w.order.product_items[0].quantity == 1,
    ),
    "unsupported": (
        ["poll"],
        lambda w, m: w.unsupported.type == "poll" and w.unsupported.errors[0].code == 131051 and m == "",
    ),
}


def _handler(seen: list[InboundMessage]) -> CallbackApp:
    def handle(message: InboundMessage) -> str:
        seen.append(message)
        return "Thanks"

    return CallbackApp(handle, TOKEN)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_type_reaches_the_application_typed(kind: str) -> None:
    args, check = CASES[kind]
    seen: list[InboundMessage] = []
    with serve_asgi(_handler(seen)) as url:
        code, doc = run_json(url, "--token", TOKEN, "--whatsapp", "--type", kind, *args)
    assert code == 0, doc
    (message,) = seen
    w = message.whatsapp
    assert w is not None and message.channel == "whatsapp"
    assert w.type == ("interactive" if kind in ("list_reply", "nfm_reply") else kind)
    assert w.profile_name == "Test User" and w.wamid.startswith("wamid.")
    assert check(w, message.message), w
    assert doc["member"]["type"] == w.type and doc["member"]["wamid"] == w.wamid
    assert doc["reply"] == "Thanks" and "withheld_reply" not in doc


def test_the_text_output_names_the_type_and_shows_the_member() -> None:
    with serve_asgi(RecordingApp(answer=b"Got it")) as url:
        code, output = run(url, "--token", TOKEN, "--whatsapp", "--type", "location", "--latitude", "19.07")
    assert code == 0, output
    assert f"WhatsApp location MO {SENDER} -> {BUSINESS}: ''" in output
    assert 'whatsapp member: {"v":1,"type":"location"' in output and '"latitude":19.07' in output


def test_reply_forward_and_ad_referral_apply_to_any_type() -> None:
    seen: list[InboundMessage] = []
    asked = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSMDAwMDAwMDAwMDAwMDAwMDAxAA=="
    with serve_asgi(_handler(seen)) as url:
        code, doc = run_json(
            url,
            "--token",
            TOKEN,
            "--whatsapp",
            "--type",
            "image",
            "--reply-to",
            asked,
            "--forwarded",
            "frequently",
            "--referral",
            "https://fb.me/ad1",
        )
    assert code == 0, doc
    w = seen[0].whatsapp
    assert w is not None and w.context == typed.Context(asked, BUSINESS, True, True)
    assert w.referral is not None and w.referral.source_url == "https://fb.me/ad1"
    assert w.referral.source_type == "ad" and w.referral.ctwa_clid


def test_the_options_without_type_make_a_text_with_them() -> None:
    seen: list[InboundMessage] = []
    with serve_asgi(_handler(seen)) as url:
        code, _ = run_json(url, "--token", TOKEN, "--whatsapp", "HI", "--forwarded", "once")
    assert code == 0
    w = seen[0].whatsapp
    assert w is not None and w.text == typed.Text("HI") and w.context == typed.Context(forwarded=True)


def test_a_reaction_reaches_the_application_but_its_answer_is_withheld_as_the_gateway_does() -> None:
    seen: list[InboundMessage] = []
    reacted = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSQjI0RTk1OEY0RTJGRTk1RjU1AA=="
    with serve_asgi(_handler(seen)) as url:
        code, doc = run_json(
            url, "--token", TOKEN, "--whatsapp", "--type", "reaction", "--reacted-to", reacted
        )
        text_code, output = run(url, "--token", TOKEN, "--whatsapp", "--type", "reaction", "❤️")
    assert (code, text_code) == (3, 3), (doc, output)  # blank: nothing is sent
    w = seen[0].whatsapp
    assert w is not None and w.reaction == typed.Reaction(reacted, "👍") and not w.reaction.removed
    assert seen[0].message == "👍"
    assert doc["outcome"] == "blank" and doc["detail"] == WITHHELD_DETAIL
    assert doc["withheld_reply"] == "Thanks" and doc["reply"] is None
    assert "no reply (blank)" in output and "the answer, withheld: 'Thanks'" in output


def test_the_withheld_detail_is_the_dispatcher_s() -> None:
    from mogateway.service.dispatcher import WITHHELD_DETAIL as DISPATCHER

    assert WITHHELD_DETAIL == DISPATCHER


@pytest.mark.parametrize("kind", [k for k in sw.TYPES if k != "system"])
def test_the_simulated_message_is_the_one_the_gateway_stores_for_the_same_webhook(kind: str) -> None:
    """No drift: the callback simulate sends is built from the same message object by the gateway's own
    intake (api.whatsapp.arrival_for) to the same text, notes and member."""
    text = "HELLO" if sw.DEFAULT_TEXT[kind] is None else sw.DEFAULT_TEXT[kind] or ""
    raw = sw.build(kind, SENDER, text, sw.Details())
    simulated = make_mo(text, shortcode=BUSINESS, channel="whatsapp", whatsapp_message=raw)
    (inbound,) = parse_webhook(wh.encode(wh.webhook_body([raw]))).messages
    stored = arrival_for(inbound, BUSINESS).message
    assert (simulated.text, simulated.notes[:1], simulated.whatsapp, simulated.source_id) == (
        stored.text,
        stored.notes[:1],
        stored.whatsapp,
        stored.source_id,
    )


@pytest.mark.parametrize(
    ("args", "hint", "says"),
    [
        (["--type", "image", "x"], "--type", "add --whatsapp"),
        (["--filename", "a.pdf", "x"], "--filename", "add --whatsapp"),
        (["--whatsapp", "--type", "poll", "x"], "--type", "must be one of"),
        (["--whatsapp", "--type", "image", "--filename", "a.pdf"], "--filename", "document only"),
        (["--whatsapp", "--type", "audio", "hello"], "MESSAGE", "has no text"),
        (["--whatsapp", "--type", "location", "--latitude", "91"], "--latitude", "within -90 and 90"),
        (["--whatsapp", "--type", "text"], "MESSAGE", "needs its text"),
        (["--whatsapp", "--forwarded", "twice", "x"], "--forwarded", "once or frequently"),
        (["--whatsapp", "--type", "system"], "--type", "a system notice is not a person's message"),
        (["--whatsapp", "--type", "reaction", ""], "--type", "a removed reaction"),
        ([], "MESSAGE", "the text of the MO is required"),  # an SMS has no default text
    ],
)
def test_usage_errors_exit_2_naming_the_option(args: list[str], hint: str, says: str) -> None:
    code, output = run("http://127.0.0.1:9/", "--token", TOKEN, *args)
    assert code == 2, output
    flat = " ".join(output.replace("│", " ").split())
    assert hint in flat and says in flat and "Traceback" not in output


def test_each_repeated_callback_is_a_new_message_of_the_type() -> None:
    app = RecordingApp(answer=b"ok")
    with serve_asgi(app) as url:
        code, doc = run_json(url, "--token", TOKEN, "--whatsapp", "--type", "sticker", "--repeat", "3")
    assert code == 0 and doc["outcomes"] == {"reply": 3}, doc
    members = [orjson.loads(r.body)["whatsapp"] for r in app.requests]
    assert [m["type"] for m in members] == ["sticker"] * 3
    assert len({m["wamid"] for m in members}) == 3 and len({m["sticker"]["id"] for m in members}) == 3
