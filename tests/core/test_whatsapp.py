"""core.whatsapp: webhook bodies as Meta sends them (byte fixtures), the signature, the handshake."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mogateway.core.message import Message
from mogateway.core.whatsapp import (
    BodySignature,
    GraphErrorDetail,
    InboundMessage,
    StatusKind,
    WebhookMalformed,
    handshake,
    parse_webhook,
    sign_body,
    signature_given,
    stored_only,
    verify_signature,
    withholds_reply,
)
from mogateway.testing.fake_graph import webhooks as wh

FIXTURES = Path(__file__).parents[1] / "fixtures" / "whatsapp"
SECRET = "app-secret-0123"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


# -- signature ---------------------------------------------------------------------------------------


def test_signature_is_meta_s_hmac_over_the_raw_bytes() -> None:
    body = fixture("text_hindi.json")
    header = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert sign_body(body, SECRET) == header
    assert verify_signature(body, header, SECRET)
    assert verify_signature(body, header.upper().replace("SHA256=", "sha256="), SECRET)  # hex case
    assert verify_signature(body, header, SECRET.encode())


def test_a_re_serialised_body_fails_the_signature() -> None:
    body = fixture("text_hindi.json")
    header = sign_body(body, SECRET)
    reserialised = json.dumps(json.loads(body)).encode()  # ensure_ascii: the Hindi becomes \u escapes
    assert json.loads(reserialised) == json.loads(body)
    assert not verify_signature(reserialised, header, SECRET)
    compact = json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")).encode()
    assert compact != body and not verify_signature(compact, header, SECRET)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "sha1=" + "0" * 40,
        "sha256=" + "0" * 64,  # well formed, wrong
        "sha256=" + "g" * 64,  # not hex
        "sha256=" + "0" * 63,
        "sha256=" + "0" * 65,
        "0" * 64,  # no scheme
        "sha256=é" + "0" * 63,
    ],
)
def test_missing_malformed_or_wrong_signatures_are_refused(header: str | None) -> None:
    assert not verify_signature(fixture("text_hindi.json"), header, SECRET)


def test_another_secret_or_an_empty_one_is_refused() -> None:
    body = fixture("batch.json")
    assert not verify_signature(body, sign_body(body, "other"), SECRET)
    assert not verify_signature(body, sign_body(body, ""), "")


# -- handshake ---------------------------------------------------------------------------------------


def test_handshake_answers_the_challenge_only_to_a_subscribe_with_our_token() -> None:
    ok = handshake("subscribe", "verify-me", "1158201444", "verify-me")
    assert (ok.status, ok.body) == (200, "1158201444")
    refusals = [
        handshake("unsubscribe", "verify-me", "1", "verify-me"),
        handshake(None, "verify-me", "1", "verify-me"),
        handshake("subscribe", "wrong", "1", "verify-me"),
        handshake("subscribe", None, "1", "verify-me"),
        handshake("subscribe", "verify-me", None, "verify-me"),
        handshake("subscribe", "verify-me", "", "verify-me"),
        handshake("subscribe", "verify-me", "<script>x</script> y", "verify-me"),
        handshake("subscribe", "verify-me", "1" * 257, "verify-me"),
        handshake("subscribe", "", "1", ""),  # nothing configured: never subscribe
    ]
    for answer in refusals:
        assert (answer.status, answer.body) == (403, "") and answer.reason


# -- parsing -----------------------------------------------------------------------------------------


def test_a_text_message_with_non_ascii_text() -> None:
    hook = parse_webhook(fixture("text_hindi.json"))
    assert hook.statuses == () and hook.problems == () and hook.skipped == 0
    (msg,) = hook.messages
    assert msg.business_number == "919876543210"  # "+91 98765 43210" normalised
    assert msg.phone_number_id == "106540352242922"
    assert msg.waba_id == "102290129340398"
    assert msg.sender == "919812345678"
    assert msg.wamid.startswith("wamid.HBgM")
    assert msg.timestamp == 1764216000
    assert (msg.type, msg.text) == ("text", "BAL नमस्ते ₹240 😀")
    assert msg.profile_name == "आशा"
    assert msg.media_id is None and msg.context_wamid is None


def test_interactive_replies_and_template_quick_replies_carry_their_titles() -> None:
    button, listed, quick = parse_webhook(fixture("interactive.json")).messages
    assert (button.type, button.text, button.reply_id, button.context_wamid) == (
        "interactive",
        "Balance",
        "bal",
        "wamid.OUTBOUND1",
    )
    assert (listed.type, listed.text, listed.reply_id) == ("interactive", "Plan ₹299", "plan-2")
    assert (quick.type, quick.text, quick.reply_id, quick.context_wamid) == (
        "button",
        "Stop promotions",
        "STOP_PROMOS",
        "wamid.TEMPLATE1",
    )


def test_media_keep_id_and_type_and_carry_the_caption_or_nothing() -> None:
    got = [(m.type, m.text, m.media_id, m.mime_type) for m in parse_webhook(fixture("media.json")).messages]
    assert got == [
        ("image", "मेरा बिल", "1003383421387256", "image/jpeg"),
        ("document", "", "1003383421387257", "application/pdf"),
        ("audio", "", "1003383421387258", "audio/ogg; codecs=opus"),
        ("sticker", "", "1003383421387259", "image/webp"),
        ("video", "see", "1003383421387260", "video/mp4"),
        ("location", "", None, None),
        ("unsupported", "", None, None),
    ]
    unsupported = parse_webhook(fixture("media.json")).messages[-1]
    assert unsupported.errors == (
        GraphErrorDetail(
            131051, "Message type unknown", "Message type unknown", "Message type is currently not supported."
        ),
    )


def test_statuses_in_body_order_with_errors_and_unknown_values_skipped() -> None:
    hook = parse_webhook(fixture("statuses.json"))
    assert hook.messages == () and hook.skipped == 1  # "deleted"
    got = [(s.wamid, s.status, s.timestamp, s.recipient) for s in hook.statuses]
    assert got == [
        ("wamid.REPLY1", StatusKind.READ, 1764216030, "919812345678"),
        ("wamid.REPLY1", StatusKind.DELIVERED, 1764216020, "919812345678"),
        ("wamid.REPLY2", StatusKind.FAILED, 1764216040, "919812345679"),
    ]
    (error,) = hook.statuses[2].errors
    assert error.code == 131047 and error.title == "Re-engagement message"
    assert error.details.startswith("Message failed to send because more than 24 hours")


def test_a_body_with_several_entries_changes_messages_statuses_and_errors() -> None:
    hook = parse_webhook(fixture("batch.json"))
    assert [(m.wamid, m.sender, m.text, m.profile_name, m.phone_number_id) for m in hook.messages] == [
        ("wamid.B1", "919812345678", "one", "A", "106540352242922"),
        ("wamid.B2", "919812345679", "two", "B", "106540352242922"),
        ("wamid.B3", "15551234567", "three", None, "106540352242999"),
    ]
    assert [(s.wamid, s.status, s.business_number) for s in hook.statuses] == [
        ("wamid.R9", StatusKind.SENT, "919876543299")
    ]
    (problem,) = hook.problems
    assert (problem.waba_id, problem.business_number, problem.phone_number_id) == (
        "102290129340400",
        "919876500000",
        "106540352200000",
    )
    assert problem.errors[0].code == 131000 and problem.errors[0].details == "Unknown error"
    assert hook.skipped == 1  # the phone_number_quality_update change


def _text_body(**message: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "from": "919812345678",
        "id": "wamid.X",
        "timestamp": "1764216000",
        "type": "text",
        "text": {"body": "hi"},
    }
    base.update(message)
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "1",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "metadata": {"display_phone_number": "919876543210", "phone_number_id": "106"},
                            "messages": [{k: v for k, v in base.items() if v is not None}],
                        },
                    }
                ],
            }
        ],
    }


def test_small_variations_meta_is_known_for() -> None:
    assert (
        parse_webhook(json.dumps(_text_body(timestamp=1764216000)).encode()).messages[0].timestamp
        == 1764216000
    )
    assert parse_webhook(json.dumps(_text_body(**{"from": "+919812345678"})).encode()).messages[0].sender == (
        "919812345678"
    )
    empty = parse_webhook(json.dumps(_text_body(text={"body": ""})).encode()).messages[0]
    assert empty.text == ""
    flow = _text_body(type="interactive", interactive={"type": "nfm_reply", "nfm_reply": {}}, text=None)
    assert parse_webhook(json.dumps(flow).encode()).messages[0].text == ""
    nothing = {
        "object": "whatsapp_business_account",
        "entry": [
            {"id": "1", "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp"}}]}
        ],
    }
    assert parse_webhook(json.dumps(nothing).encode()).messages == ()


@pytest.mark.parametrize("body", [b"", b"\xff\xfe{}", b"{", b"not json"])
def test_only_bytes_that_are_not_json_raise(body: bytes) -> None:
    with pytest.raises(WebhookMalformed) as caught:
        parse_webhook(body)
    assert "not JSON" in caught.value.reason and str(caught.value) == caught.value.reason


@pytest.mark.parametrize(
    ("body", "kind", "reason"),
    [
        (b"[]", "body", "the body is not an object"),
        (b'{"object": "page", "entry": []}', "body", "object="),
        (b'{"object": "whatsapp_business_account"}', "body", "entry is not a list"),
        (json.dumps(_text_body(id=None)).encode(), "message", "messages[0].id is missing"),
        (json.dumps(_text_body(**{"from": "asha"})).encode(), "message", "neither from (digits) nor"),
        (json.dumps(_text_body(**{"from": None})).encode(), "message", "neither from (digits) nor"),
    ],
)
def test_what_cannot_be_read_is_left_out_with_its_kind_and_where(body: bytes, kind: str, reason: str) -> None:
    hook = parse_webhook(body)
    assert hook.messages == ()
    assert [u.kind for u in hook.unread] == [kind] and reason in hook.unread[0].reason


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        ({"timestamp": "yesterday"}, "hi"),
        ({"timestamp": True}, "hi"),
        ({"timestamp": "1" * 13}, "hi"),
        ({"timestamp": None}, "hi"),
        ({"text": {"body": 5}}, ""),
        ({"text": None}, ""),
        ({"type": "image", "image": {"caption": "x"}}, "x"),
        ({"type": None}, ""),
    ],
)
def test_a_message_with_a_sender_and_an_id_is_taken_whatever_else_is_wrong(
    changes: dict[str, Any], text: str
) -> None:
    hook = parse_webhook(json.dumps(_text_body(**changes)).encode())
    (message,) = hook.messages
    assert message.text == text and message.wamid and message.sender == "919812345678"
    assert message.timestamp in (0, 1764216000) and hook.unread == ()
    if "timestamp" in changes:
        assert message.timestamp == 0  # the edge dates it
    if changes.get("type", "text") is None:
        assert message.type == "unknown"


def test_one_unreadable_item_never_sinks_the_rest_of_the_body() -> None:
    body = _text_body()
    value = body["entry"][0]["changes"][0]["value"]
    good = dict(value["messages"][0])
    value["messages"] = [{"id": "wamid.NOFROM", "type": "text"}, 7, good]
    value["statuses"] = [{"status": "read"}, {"id": "wamid.OUT", "status": "delivered", "timestamp": "1"}]
    body["entry"].insert(0, {"changes": "nope"})
    hook = parse_webhook(json.dumps(body).encode())
    assert [m.wamid for m in hook.messages] == [good["id"]]
    assert [(s.wamid, s.recipient) for s in hook.statuses] == [("wamid.OUT", "")]
    assert sorted(u.kind for u in hook.unread) == ["change", "message", "message", "status"]


def test_the_message_object_is_kept_as_meta_sent_it() -> None:
    body = _text_body(referral={"source_type": "ad", "ctwa_clid": "abc"})
    (message,) = parse_webhook(json.dumps(body).encode()).messages
    assert message.raw == body["entry"][0]["changes"][0]["value"]["messages"][0]
    assert message.raw["referral"]["ctwa_clid"] == "abc"


def test_metadata_without_a_phone_number_id_leaves_its_items_out() -> None:
    body = _text_body()
    del body["entry"][0]["changes"][0]["value"]["metadata"]
    hook = parse_webhook(json.dumps(body).encode())
    assert hook.messages == () and [u.kind for u in hook.unread] == ["number"]
    body = _text_body()
    body["entry"][0]["changes"][0]["value"]["metadata"]["display_phone_number"] = "call us"
    (message,) = parse_webhook(json.dumps(body).encode()).messages
    assert message.business_number == "" and message.phone_number_id == "106"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)
# Bodies near the real shape reach deeper into the parser than arbitrary JSON does.
near_messages = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "from": st.sampled_from(["919812345678", "", "+1", "x"]) | json_values,
            "id": st.sampled_from(["wamid.A", ""]) | json_values,
            "timestamp": st.sampled_from(["1764216000", 1764216000, "-1", "1e3"]) | json_values,
            "type": st.sampled_from(["text", "interactive", "button", "image", "sticker", "system"])
            | json_values,
            "text": st.fixed_dictionaries({}, optional={"body": json_values}) | json_values,
            "interactive": st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["button_reply", "list_reply"]) | json_values,
                    "button_reply": json_values,
                    "list_reply": json_values,
                },
            ),
            "image": st.fixed_dictionaries({}, optional={"id": json_values, "caption": json_values}),
            "errors": json_values,
            "context": json_values,
        },
    ),
    max_size=3,
)
near_bodies = st.builds(
    lambda messages, statuses, metadata, contacts, field: {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "1",
                "changes": [
                    {
                        "field": field,
                        "value": {
                            "metadata": metadata,
                            "messages": messages,
                            "statuses": statuses,
                            "contacts": contacts,
                        },
                    }
                ],
            }
        ],
    },
    near_messages,
    json_values,
    st.fixed_dictionaries(
        {
            "display_phone_number": st.sampled_from(["919876543210", "+1 555"]) | json_values,
            "phone_number_id": json_values,
        }
    ),
    json_values,
    st.sampled_from(["messages", "other"]),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, near_bodies))
def test_arbitrary_json_never_raises(data: Any) -> None:
    hook = parse_webhook(json.dumps(data).encode())
    for msg in hook.messages:
        assert msg.sender.isdigit() or msg.user_id
        assert isinstance(msg.text, str) and msg.timestamp >= 0 and msg.wamid


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_webhook_malformed(body: bytes) -> None:
    try:
        parse_webhook(body)
    except WebhookMalformed:
        pass


# -- shapes Meta sends now (written from Meta's webhook reference and its business-scoped user id notes) --


def _one(message: dict[str, Any]) -> InboundMessage:
    (parsed,) = parse_webhook(wh.encode(wh.webhook_body([message]))).messages
    return parsed


def test_a_type_without_its_object_keeps_the_type_and_meta_s_errors() -> None:
    m = _one(wh.unrendered("919812345678"))
    assert (m.type, m.text, m.sender) == ("interactive", "", "919812345678")
    assert [(e.code, e.details) for e in m.errors] == [(131000, "Unsupported webhook payload")]
    assert stored_only(m) is None  # a person sent something: it is passed on


def test_a_username_user_comes_with_the_business_scoped_user_id_only() -> None:
    m = _one(wh.username_text("IN.1502576394655843", "hi"))
    assert (m.sender, m.user_id, m.group_id, m.text) == ("", "IN.1502576394655843", None, "hi")
    assert m.profile_name == "Test User"  # contacts[].user_id names it
    group = _one(wh.username_text("IN.15025763", "hello all", group_id="G.1203630"))
    assert (group.user_id, group.group_id) == ("IN.15025763", "G.1203630")
    both = _one(wh.username_text("IN.15025763", "hi", sender="919812345678"))
    assert (both.sender, both.user_id) == ("919812345678", "IN.15025763")


def test_a_changed_user_id_notice_without_from_is_a_system_event() -> None:
    m = _one(wh.system_user_changed_user_id("IN.111", "IN.222"))
    assert (m.type, m.sender, m.user_id) == ("system", "", "IN.111")
    assert "IN.222" in m.text and stored_only(m) is not None
    no_from_user_id = wh.system_user_changed_user_id("IN.111", "IN.222")
    del no_from_user_id["from_user_id"]
    assert _one(no_from_user_id).user_id == "IN.222"  # the notice's own user id then


def test_a_delivered_status_without_recipient_id_is_kept_by_its_wamid() -> None:
    hook = parse_webhook(wh.encode(wh.webhook_body(statuses=[wh.status("wamid.OUT", "delivered", None)])))
    assert [(s.wamid, s.status.value, s.recipient) for s in hook.statuses] == [("wamid.OUT", "delivered", "")]


def test_events_that_are_not_a_person_s_message() -> None:
    thumbs = _one(wh.reaction("919812345678", "wamid.X", "\U0001f44d"))
    removed = _one(wh.reaction("919812345678", "wamid.X", ""))
    deleted = _one(wh.revoke("919812345678", "wamid.X"))
    edited = _one(wh.edit("919812345678", "wamid.X", "BAL 2"))
    assert (thumbs.text, edited.text) == ("\U0001f44d", "BAL 2")
    # Called back (never answered): a reaction with an emoji, an edit. Stored only: the others.
    assert stored_only(thumbs) is None and stored_only(edited) is None
    assert "removed reaction" in (stored_only(removed) or "")
    assert "deleted message" in (stored_only(deleted) or "")
    assert stored_only(_one(wh.text("919812345678", "BAL"))) is None


def test_withholds_reply_reads_the_event_s_type_from_the_message_notes() -> None:
    def mo(origin: str, notes: tuple[str, ...]) -> Message:
        return Message("id", "919876543210", "919812345678", "x", 1.0, origin=origin, notes=notes)

    assert withholds_reply(mo("whatsapp:106", ("whatsapp reaction",)))
    assert withholds_reply(mo("whatsapp:106", ("whatsapp edit", "in reply to wamid.X")))
    assert not withholds_reply(mo("whatsapp:106", ("whatsapp text",)))
    assert not withholds_reply(mo("whatsapp:106", ()))
    assert not withholds_reply(mo("smpp:1", ("whatsapp reaction",)))


def test_the_header_s_form_is_known_before_the_body_and_the_hmac_is_computed_as_it_is_read() -> None:
    body = "नमस्ते BAL".encode() * 100
    header = sign_body(body, SECRET)
    assert signature_given(header) == header[len("sha256=") :]
    assert signature_given(header.upper().replace("SHA256=", "sha256=")) == header[len("sha256=") :]
    for bad in (None, "", "sha256=", "sha1=" + "0" * 40, "sha256=" + "g" * 64, "sha256=" + "0" * 63):
        assert signature_given(bad) is None
    signature = BodySignature(SECRET)
    for i in range(0, len(body), 7):  # any chunking gives the same HMAC
        signature.update(body[i : i + 7])
    assert signature.matches(header[len("sha256=") :])
    assert not signature.matches("0" * 64)
