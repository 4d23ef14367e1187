"""Every inbound WhatsApp type end to end: built by the fake's webhook builders as Meta shapes it, posted
signed to a real ``mogateway serve`` (default workers), called back to the application with the typed
``whatsapp`` member (the exact bytes ``core.whatsapp_member`` makes of the message Meta sent), parsed by
the SDK into its typed object, and answered — or not — by the rules of docs/whatsapp.md: a reaction's and
an edit's answer is withheld; a removed reaction, a deletion and a system notice are stored refused and
never called back. Then what tests/whatsapp/test_whatsapp_rich_answers.py leaves out: each media answer
by the other of ``link``/``id``, five messages in order, and six refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mogateway.client import parse_message
from mogateway.client import whatsapp as typed
from mogateway.core.whatsapp_member import member_json
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, RecordedCall

from .test_whatsapp_end_to_end import Stack, running_stack
from .whatsapp_harness import PNID

ASKED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSMDAwMDAwMDAwMDAwMDAwMDAxAA=="
REACTED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSQjI0RTk1OEY0RTJGRTk1RjU1AA=="
FLOW = '{"flow_token": "t-1", "rating": "5"}'
Check = Callable[[typed.WhatsAppMessage], bool]


def _cases() -> dict[str, tuple[Callable[[str], dict[str, Any]], str, Check]]:
    """name -> (builder of the message from a sender, the callback's ``message``, the SDK's view)."""
    return {
        "text_reply_forwarded": (
            lambda s: wh.forwarded(wh.text(s, "is this paid?", context=ASKED)),
            "is this paid?",
            lambda w: (
                w.text == typed.Text("is this paid?")
                and w.context == typed.Context(ASKED, "919876543210", True)
            ),
        ),
        "text_from_an_ad": (
            lambda s: wh.with_referral(wh.text(s, "I saw your ad")),
            "I saw your ad",
            lambda w: (
                w.referral is not None
                and w.referral.source_type == "ad"
                and w.referral.source_url == wh.AD_REFERRAL["source_url"]
                and w.referral.ctwa_clid == wh.AD_REFERRAL["ctwa_clid"]
            ),
        ),
        "image": (
            lambda s: wh.image(s, caption="my bill", media_id="1003383421387256"),
            "my bill",
            lambda w: w.image is not None and w.image.id == "1003383421387256" and w.media is w.image,
        ),
        "audio_voice": (
            lambda s: wh.audio(s, media_id="1003383421387257"),
            "",
            lambda w: (
                w.audio is not None
                and w.audio.voice is True
                and w.audio.mime_type == "audio/ogg; codecs=opus"
            ),
        ),
        "video": (
            lambda s: wh.video(s, caption="the meter"),
            "the meter",
            lambda w: w.video is not None and w.video.mime_type == "video/mp4",
        ),
        "document": (
            lambda s: wh.document(s, "statement-nov.pdf", caption="statement", file_size=303833),
            "statement",
            lambda w: (
                w.document is not None
                and (w.document.filename, w.document.file_size) == ("statement-nov.pdf", 303833)
            ),
        ),
        "sticker": (
            lambda s: wh.sticker(s, animated=True),
            "",
            lambda w: w.sticker is not None and w.sticker.animated is True,
        ),
        "location": (
            lambda s: wh.location(s, 19.076, 72.8777, name="Gateway of India", address="Colaba, Mumbai"),
            "",
            lambda w: w.location == typed.Location(19.076, 72.8777, "Gateway of India", "Colaba, Mumbai"),
        ),
        "contacts": (
            lambda s: wh.contacts(
                s,
                wh.contact_card("Ravi Kumar", "+91 98123 45679", wa_id="919812345679", email="r@example.in"),
                wh.contact_card("Asha", "+91 98123 45680"),
            ),
            "",
            lambda w: (
                w.contacts is not None
                and [c.name.formatted_name for c in w.contacts if c.name] == ["Ravi Kumar", "Asha"]
                and w.contacts[0].phones == (typed.ContactPhone("+91 98123 45679", "919812345679", "CELL"),)
            ),
        ),
        "button_reply": (
            lambda s: wh.button_reply(s, "pay-1", "Pay now", context=ASKED),
            "Pay now",
            lambda w: (
                w.interactive is not None
                and w.interactive.reply == typed.InteractiveReply("pay-1", "Pay now")
                and w.context is not None
                and w.context.id == ASKED
            ),
        ),
        "list_reply": (
            lambda s: wh.list_reply(s, "p299", "Plan 299", "2 GB/day"),
            "Plan 299",
            lambda w: (
                w.interactive is not None
                and w.interactive.list_reply == typed.InteractiveReply("p299", "Plan 299", "2 GB/day")
            ),
        ),
        "nfm_reply": (
            lambda s: wh.nfm_reply(s, FLOW),
            "",
            lambda w: (
                w.interactive is not None and w.interactive.nfm_reply == typed.FlowReply("flow", "Sent", FLOW)
            ),
        ),
        "button": (
            lambda s: wh.quick_reply(s, "Stop promotions", "STOP_PROMOS"),
            "Stop promotions",
            lambda w: w.button == typed.Button("STOP_PROMOS", "Stop promotions"),
        ),
        "order": (
            lambda s: wh.order(
                s, "1537264876583739", wh.product_item("sku-101", 2, 149.5), wh.product_item("sku-102", 1, 99)
            ),
            "",
            lambda w: (
                w.order is not None
                and [(i.product_retailer_id, i.quantity, i.item_price) for i in w.order.product_items or ()]
                == [("sku-101", 2, 149.5), ("sku-102", 1, 99.0)]
            ),
        ),
        "unsupported": (
            lambda s: wh.unsupported(s, "poll"),
            "",
            lambda w: (
                w.unsupported is not None
                and w.unsupported.type == "poll"
                and [e.code for e in w.unsupported.errors or ()] == [131051]
            ),
        ),
        "unknown": (
            lambda s: wh.unsupported(s, kind="unknown"),
            "",
            lambda w: w.unknown is not None and w.type == "unknown",
        ),
    }


CASES = _cases()
#: Called back, but never answered (core.whatsapp.withholds_reply).
WITHHELD: dict[str, tuple[Callable[[str], dict[str, Any]], str, Check]] = {
    "reaction": (
        lambda s: wh.reaction(s, REACTED, "👍"),
        "👍",
        lambda w: w.reaction == typed.Reaction(REACTED, "👍"),
    ),
    "edit": (lambda s: wh.edit(s, REACTED, "sorry, 300"), "sorry, 300", lambda w: w.type == "edit"),
}
#: Stored refused (field ``type``), never called back.
REFUSED: dict[str, Callable[[str], dict[str, Any]]] = {
    "reaction_removed": lambda s: wh.reaction_removed(s, REACTED),
    "revoke": lambda s: wh.revoke(s, REACTED),
    "system": lambda s: wh.system(s, "Ravi changed their number", new_wa_id="919812399999"),
}


def _sender(name: str) -> str:
    names = [*CASES, *WITHHELD, *REFUSED, *RICH_ONLY]
    return f"9198124{names.index(name):05d}"


# ------------------------------------------------------------------------------------ rich answers

BY_ID = {
    "image": {"type": "image", "image": {"id": "1013859600285441", "caption": "Your bill"}},
    "document": {"type": "document", "document": {"link": "https://x.in/bill.pdf", "filename": "bill.pdf"}},
    "audio": {"type": "audio", "audio": {"id": "1013859600285442"}},
    "video": {"type": "video", "video": {"id": "1013859600285443", "caption": "How to pay"}},
    "sticker": {"type": "sticker", "sticker": {"link": "https://x.in/thanks.webp"}},
}
FIVE = [
    {"type": "text", "text": {"body": "Here is your statement"}},
    BY_ID["document"],
    {"type": "location", "location": {"latitude": 28.6139, "longitude": 77.209, "name": "Office"}},
    {
        "type": "contacts",
        "contacts": [{"name": {"formatted_name": "Help desk"}, "phones": [{"phone": "+9111"}]}],
    },
    {"type": "reaction", "reaction": {"message_id": REACTED, "emoji": "✅"}},
]
RICH_ONLY = [f"rich_{k}" for k in BY_ID] + ["rich_five", "rich_six"]


def _answer(call: RecordedCall) -> Answer:
    body = call.json()
    kind = body["whatsapp"]["type"]
    text = body["message"]
    if text.startswith("RICH "):
        what = text.removeprefix("RICH ")
        data: Any = {"five": FIVE, "six": [*FIVE, FIVE[0]]}.get(what) or BY_ID[what]
        return Answer(body=json.dumps({"whatsapp": data}).encode(), content_type="application/json")
    return Answer.text(f"Got your {kind}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("wa-types"), _answer) as s:
        yield s


def _called(stack: Stack, message_id: str) -> RecordedCall:
    (call,) = stack.wait(lambda: stack.calls_for(message_id), "callback")
    return call


def _check_callback(
    call: RecordedCall, sent: dict[str, Any], text: str, check: Check
) -> typed.WhatsAppMessage:
    # The member is exactly what core.whatsapp_member makes of the message object Meta sent...
    _, marker, member = call.body.partition(b',"whatsapp":')
    assert marker and member[:-1].decode() == member_json(sent, "Test User")
    # ...and the SDK reads it into the type's object, the seed's `message` keeping its rule.
    message = parse_message(call.body)
    assert message.channel == "whatsapp" and message.message == text
    w = message.whatsapp
    assert w is not None and w.type == sent["type"] and w.wamid == sent["id"]
    assert w.profile_name == "Test User"
    assert check(w), w
    return w


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_type_reaches_the_application_typed_and_is_answered(stack: Stack, name: str) -> None:
    build, text, check = CASES[name]
    sender = _sender(name)
    sent = build(sender)
    (mid,) = stack.deliver(sent)
    w = _check_callback(_called(stack, mid), sent, text, check)
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed", "no_reply", "bad_response"}))
    assert msg["state"] == "replied", msg["timeline"]
    assert msg["timeline"][0]["notes"][0] == f"whatsapp {w.type}"
    (send,) = stack.wait(lambda: stack.sends(to=sender), "the reply")
    assert send["text"] == f"Got your {w.type}" and send["context_message_id"] == sent["id"]
    assert send["phone_number_id"] == PNID


@pytest.mark.parametrize("name", sorted(WITHHELD))
def test_a_reaction_and_an_edit_reach_the_application_and_their_answer_is_withheld(
    stack: Stack, name: str
) -> None:
    build, text, check = WITHHELD[name]
    sender = _sender(name)
    sent = build(sender)
    (mid,) = stack.deliver(sent)
    _check_callback(_called(stack, mid), sent, text, check)
    msg = stack.gw.wait_state(mid, frozenset({"no_reply", "replied"}))
    assert msg["state"] == "no_reply", msg["timeline"]
    outcome = next(e for e in msg["timeline"] if e["event"] == "outcome")
    assert outcome["outcome"] == "blank" and outcome["withheld_reply"].startswith("Got your ")
    assert stack.sends(to=sender) == []


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_removed_reaction_a_deletion_and_a_system_notice_are_stored_refused_never_called(
    stack: Stack, name: str
) -> None:
    sender = _sender(name)
    (mid,) = stack.deliver(REFUSED[name](sender))
    msg = stack.gw.wait_state(mid, frozenset({"rejected"}))
    assert msg["rejection"]["field"] == "type" and "not a person's message" in msg["rejection"]["reason"]
    assert msg["whatsapp"]["type"] in ("reaction", "revoke", "system")  # kept whole all the same
    assert stack.calls_for(mid) == [] and stack.sends(to=sender) == []


def test_every_type_in_one_batch_is_one_callback_each(stack: Stack) -> None:
    """Meta may batch: all the types above in one signed body, each its own message."""
    builders = {**{k: v[0] for k, v in CASES.items()}, **{k: v[0] for k, v in WITHHELD.items()}}
    sender = "919812499999"
    sent = [build(sender) for build in builders.values()]
    ids = stack.deliver(*sent)
    assert len(set(ids)) == len(sent)
    for mid, message in zip(ids, sent, strict=True):
        call = _called(stack, mid)
        assert json.loads(call.body)["whatsapp"]["wamid"] == message["id"]
    for mid in ids:
        stack.gw.wait_state(mid, frozenset({"replied", "no_reply"}))
    assert len(stack.sends(to=sender)) == len(CASES)  # the reaction and the edit are not answered


# ------------------------------------------------------------------------------------ rich answers


@pytest.mark.parametrize("kind", sorted(BY_ID))
def test_a_media_answer_by_the_other_of_link_and_id_is_sent_as_meta_expects(stack: Stack, kind: str) -> None:
    sender = _sender(f"rich_{kind}")
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text(sender, f"RICH {kind}", wamid=wamid))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed", "bad_response"}))
    assert msg["state"] == "replied", msg["timeline"]
    (send,) = stack.sends(to=sender)
    assert send["error"] is None and send["message"] == BY_ID[kind]
    assert send["body"]["context"] == {"message_id": wamid}


def test_five_messages_are_sent_in_order_the_first_as_the_reply(stack: Stack) -> None:
    sender = _sender("rich_five")
    wamid = wh.new_wamid()
    (mid,) = stack.deliver(wh.text(sender, "RICH five", wamid=wamid))
    msg = stack.gw.wait_state(mid, frozenset({"replied", "reply_failed", "bad_response"}))
    assert msg["state"] == "replied", msg["timeline"]
    sends = stack.sends(to=sender)
    assert [s["message"] for s in sends] == FIVE
    assert [s["context_message_id"] for s in sends] == [wamid, None, None, None, None]
    submitted = next(e for e in msg["timeline"] if e["event"] == "reply_submitted")
    assert submitted["parts"] == 5 and submitted["refs"] == [s["wamid"] for s in sends]


def test_six_messages_are_a_bad_response_with_the_reason_and_nothing_is_sent(stack: Stack) -> None:
    sender = _sender("rich_six")
    (mid,) = stack.deliver(wh.text(sender, "RICH six"))
    msg = stack.gw.wait_state(mid, frozenset({"bad_response", "replied"}))
    assert msg["state"] == "bad_response", msg["timeline"]
    outcome = next(e for e in msg["timeline"] if e["event"] == "outcome")
    assert outcome["outcome"] == "bad_response"
    assert outcome["detail"] == "rich answer: whatsapp: must hold 1 to 5 messages, not 6"
    assert stack.sends(to=sender) == []
