"""The callback's ``whatsapp`` member (docs/contract.md, core/whatsapp_member.py): every message type
Meta sends, from a webhook as Meta shapes it to the callback's bytes (pinned by golden fixtures), the
seed's members unchanged before it, the shipped JSON Schema, and the SDK's typed objects."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
import pytest

from mogateway.api.whatsapp import arrival_for
from mogateway.client import InvalidPayload, parse_message
from mogateway.client import whatsapp as typed
from mogateway.core.contract import callback_body
from mogateway.core.message import Message, Sender
from mogateway.core.whatsapp import InboundMessage, parse_webhook
from mogateway.core.whatsapp_member import SCHEMA_FILE, build_member, member_json, member_schema

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "callback"
WEBHOOK = ROOT / "fixtures" / "whatsapp" / "every_type.json"
SHIPPED_SCHEMA = ROOT.parent / "src" / "mogateway" / "data" / SCHEMA_FILE
VI = Sender(91, 9812, 345678, "vi", "")

#: Golden file -> the index of its message in tests/fixtures/whatsapp/every_type.json.
CASES = [
    ("whatsapp_member_text.json", 0),
    ("whatsapp_member_text_referral.json", 1),
    ("whatsapp_member_image_forwarded.json", 2),
    ("whatsapp_member_audio_voice.json", 3),
    ("whatsapp_member_video.json", 4),
    ("whatsapp_member_document.json", 5),
    ("whatsapp_member_sticker.json", 6),
    ("whatsapp_member_location.json", 7),
    ("whatsapp_member_contacts.json", 8),
    ("whatsapp_member_reaction.json", 9),
    ("whatsapp_member_reaction_removed.json", 10),
    ("whatsapp_member_button_reply.json", 11),
    ("whatsapp_member_list_reply.json", 12),
    ("whatsapp_member_nfm_reply.json", 13),
    ("whatsapp_member_button.json", 14),
    ("whatsapp_member_order.json", 15),
    ("whatsapp_member_system.json", 16),
    ("whatsapp_member_unsupported.json", 17),
    ("whatsapp_member_unknown_type.json", 18),
]
IDS = [c[0].removeprefix("whatsapp_member_").removesuffix(".json") for c in CASES]


@cache
def inbound() -> tuple[InboundMessage, ...]:
    return parse_webhook(WEBHOOK.read_bytes()).messages


def accepted(index: int) -> Message:
    """The message the gateway stores for webhook message ``index``, as intake accepts it."""
    arrival = arrival_for(inbound()[index], "919876543210")
    return arrival.message.with_changes(id="m1", sender=VI)


def body_of(index: int) -> bytes:
    return callback_body(accepted(index))


def golden(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def member_of(body: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(body)
    return doc["whatsapp"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------ the bytes


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_every_type_is_byte_for_byte_its_golden_fixture(name: str, index: int) -> None:
    assert body_of(index) == golden(name)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_the_seed_members_come_first_unchanged_and_the_member_last(name: str, index: int) -> None:
    body = golden(name)
    mo = accepted(index)
    seed, marker, member = body.partition(b',"whatsapp":')
    assert marker and seed + b"}" == callback_body(mo.with_changes(whatsapp=None))
    assert list(json.loads(body)) == [
        *("shortcode", "msisdn", "message", "sender", "tsiso", "tsunix", "channel", "whatsapp")
    ]
    assert member[:-1].decode() == mo.whatsapp
    doc = member_of(body)
    assert list(doc)[:3] == ["v", "type", "wamid"] and doc["v"] == 1
    assert doc["wamid"] == inbound()[index].wamid and doc["type"] == inbound()[index].type
    assert doc["profile_name"] == "Asha"


def test_the_message_keeps_the_seed_rule_text_caption_or_title() -> None:
    texts = {name: json.loads(golden(name))["message"] for name, _ in CASES}
    assert texts["whatsapp_member_text.json"] == "HELLO"
    assert texts["whatsapp_member_image_forwarded.json"] == "my bill"
    assert texts["whatsapp_member_button_reply.json"] == "Yes, book it ✅"
    assert texts["whatsapp_member_list_reply.json"] == "Plan 299"
    assert texts["whatsapp_member_button.json"] == "Stop promotions"
    assert texts["whatsapp_member_location.json"] == ""
    assert texts["whatsapp_member_reaction.json"] == "\N{THUMBS UP SIGN}"  # a reaction's text: its emoji


def test_what_each_type_carries() -> None:
    m = {name: member_of(golden(name)) for name, _ in CASES}
    image = m["whatsapp_member_image_forwarded.json"]
    assert image["image"] == {
        "id": "1003383421387256",
        "mime_type": "image/jpeg",
        "sha256": "Y9LzDcrvEAUpbjJqS3+dxW5p0xKU9YIVFEbaaDJ+Cxw=",
        "caption": "my bill",
    }
    # "frequently_forwarded": "yes" is not a boolean: dropped, the rest kept.
    assert image["context"] == {"forwarded": True}
    assert m["whatsapp_member_audio_voice.json"]["audio"]["voice"] is True
    assert m["whatsapp_member_sticker.json"]["sticker"]["animated"] is False
    document = m["whatsapp_member_document.json"]["document"]
    assert document["filename"] == "statement-nov.pdf" and document["file_size"] == 303833
    # No media URL through the gateway yet: the reserved ``url`` is never written.
    media = [doc[doc["type"]] for doc in m.values() if doc["type"] in typed.MEDIA_TYPES]
    assert len(media) == 5 and all("url" not in d for d in media)
    assert m["whatsapp_member_location.json"]["location"] == {
        "latitude": 19.076,
        "longitude": 72,
        "name": "Gateway of India",
        "address": "Apollo Bandar, Colaba, Mumbai 400001",
        "url": "https://maps.example/goi",
    }
    (card,) = m["whatsapp_member_contacts.json"]["contacts"]
    assert card["name"]["formatted_name"] == "Ravi Kumar"
    assert card["phones"] == [{"phone": "+91 98123 45679", "wa_id": "919812345679", "type": "CELL"}, {}]
    assert m["whatsapp_member_reaction.json"]["reaction"]["emoji"] == "👍"
    assert m["whatsapp_member_reaction_removed.json"]["reaction"]["emoji"] == ""
    reply = m["whatsapp_member_button_reply.json"]
    assert reply["interactive"] == {
        "type": "button_reply",
        "button_reply": {"id": "yes-1", "title": "Yes, book it ✅"},
    }
    assert reply["context"]["id"].startswith("wamid.") and reply["context"]["from"] == "919876543210"
    assert (
        m["whatsapp_member_list_reply.json"]["interactive"]["list_reply"]["description"]
        == "2 GB/day, 28 days"
    )
    assert json.loads(m["whatsapp_member_nfm_reply.json"]["interactive"]["nfm_reply"]["response_json"]) == {
        "flow_token": "t-1",
        "rating": "5",
    }
    assert m["whatsapp_member_button.json"]["button"] == {"payload": "STOP_PROMOS", "text": "Stop promotions"}
    items = m["whatsapp_member_order.json"]["order"]["product_items"]
    assert [i["quantity"] for i in items] == [2, 1] and items[0]["item_price"] == 149.5
    assert m["whatsapp_member_system.json"]["system"]["new_wa_id"] == "919812345680"
    assert m["whatsapp_member_unsupported.json"]["unsupported"] == {
        "type": "edit",
        "errors": [
            {
                "code": 131051,
                "title": "Message type unknown",
                "message": "Message type unknown",
                "details": "Message type is currently not supported.",
            }
        ],
    }
    referral = m["whatsapp_member_text_referral.json"]["referral"]
    assert referral["source_type"] == "ad" and "welcome_message" not in referral
    # A type this gateway does not know: its type and wamid, no object.
    assert list(m["whatsapp_member_unknown_type.json"]) == ["v", "type", "wamid", "profile_name"]


def test_only_documented_fields_of_their_type_anything_else_dropped_never_an_error() -> None:
    raw = {
        "from": "919812345678",
        "id": "wamid.X",
        "type": "video",
        "video": {
            "id": "55",
            "caption": 42,
            "mime_type": ["video/mp4"],
            "voice": 1,
            "file_size": "12a",
            "x": 1,
        },
        "context": {"id": 7, "forwarded": "true"},
        "referral": "an ad",
        "identity": {"acknowledged": True},
    }
    assert build_member(raw, None) == {"v": 1, "type": "video", "wamid": "wamid.X", "video": {"id": "55"}}
    assert build_member({"type": "image", "image": "not an object", "id": 5}, None) == {
        "v": 1,
        "type": "image",
        "wamid": "",
        "image": {},
    }
    assert build_member({}, None) == {"v": 1, "type": "", "wamid": ""}
    assert build_member({"id": "w", "type": "contacts", "contacts": {"a": 1}}, None)["contacts"] == []
    assert build_member({"id": "w", "type": "text", "text": {}}, None)["text"] == {"body": ""}
    # The same message, the same bytes, whatever order Meta's keys came in.
    shuffled = dict(reversed(list(inbound()[2].raw.items())))
    assert member_json(shuffled, "Asha") == member_json(inbound()[2].raw, "Asha")


def test_an_sms_body_has_no_member_and_an_sms_array_is_unchanged() -> None:
    sms = Message("m1", "56767", "919812345678", "BAL", 1764216000.0, origin="smpp:airtel", sender=VI)
    assert b"whatsapp" not in callback_body(sms) and b"channel" not in callback_body(sms)
    assert len(sms.to_array()) == 10
    wa = accepted(2)
    assert Message.from_array(wa.to_array()) == wa and len(wa.to_array()) == 11
    assert Message.from_json(wa.to_json()) == wa
    assert Message.from_array(sms.to_array()) == sms


def test_an_item_published_by_mogateway_0_1_is_still_read() -> None:
    from mogateway.edges.queue.jetstream import _read_item

    old = orjson.dumps(["m1", "smpp:x", "56767", "919812345678", "HI", 91, 9812, 345678, "vi", "", 1.0])
    assert _read_item(old).sender == VI
    wa = accepted(2)
    assert _read_item(wa.to_json()) == wa


# ------------------------------------------------------------------------------------ the schema


def test_the_shipped_schema_is_the_one_the_module_writes() -> None:
    expected = json.dumps(member_schema(), indent=2, ensure_ascii=False) + "\n"
    assert SHIPPED_SCHEMA.read_text("utf-8") == expected, "regenerate " + str(SHIPPED_SCHEMA)
    assert typed.schema() == member_schema()


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_every_member_is_valid_under_the_shipped_schema(name: str, index: int) -> None:
    jsonschema_rs.Draft202012Validator(typed.schema()).validate(member_of(golden(name)))


def test_the_schema_refuses_a_known_member_of_another_type() -> None:
    doc = member_of(golden("whatsapp_member_image_forwarded.json"))
    doc["image"]["file_size"] = "big"
    with pytest.raises(jsonschema_rs.ValidationError):
        jsonschema_rs.Draft202012Validator(typed.schema()).validate(doc)


# ------------------------------------------------------------------------------------ the SDK


def parsed(name: str) -> typed.WhatsAppMessage:
    message = parse_message(golden(name), message_id="m1")
    assert message.channel == "whatsapp" and message.whatsapp is not None
    return message.whatsapp


def test_the_sdk_reads_every_type_into_typed_immutable_objects() -> None:
    image = parsed("whatsapp_member_image_forwarded.json")
    assert image.type == "image" and image.v == 1 and image.profile_name == "Asha"
    assert image.image == typed.Media(
        id="1003383421387256",
        mime_type="image/jpeg",
        sha256="Y9LzDcrvEAUpbjJqS3+dxW5p0xKU9YIVFEbaaDJ+Cxw=",
        caption="my bill",
    )
    assert image.media is image.image and image.image.url is None
    assert image.context == typed.Context(forwarded=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        image.image.id = "other"  # type: ignore[misc]
    assert parsed("whatsapp_member_text.json").text == typed.Text("HELLO")
    assert parsed("whatsapp_member_audio_voice.json").audio.voice is True  # type: ignore[union-attr]
    assert parsed("whatsapp_member_document.json").media.file_size == 303833  # type: ignore[union-attr]
    assert parsed("whatsapp_member_video.json").video.caption == "the meter"  # type: ignore[union-attr]
    assert parsed("whatsapp_member_sticker.json").sticker.animated is False  # type: ignore[union-attr]
    location = parsed("whatsapp_member_location.json").location
    assert location is not None and (location.latitude, location.longitude) == (19.076, 72.0)
    assert isinstance(location.longitude, float)
    (card,) = parsed("whatsapp_member_contacts.json").contacts or ()
    assert card.name == typed.ContactName(formatted_name="Ravi Kumar", first_name="Ravi", last_name="Kumar")
    assert card.phones == (
        typed.ContactPhone("+91 98123 45679", "919812345679", "CELL"),
        typed.ContactPhone(),
    )
    assert (
        card.org == typed.ContactOrg(company="Example Ltd", title="Accounts")
        and card.birthday == "1990-01-31"
    )
    reaction = parsed("whatsapp_member_reaction.json").reaction
    assert reaction is not None and reaction.emoji == "👍" and not reaction.removed
    assert parsed("whatsapp_member_reaction_removed.json").reaction.removed  # type: ignore[union-attr]
    button_reply = parsed("whatsapp_member_button_reply.json")
    assert button_reply.interactive is not None
    assert button_reply.interactive.reply == typed.InteractiveReply(id="yes-1", title="Yes, book it ✅")
    assert button_reply.context is not None and button_reply.context.from_ == "919876543210"
    list_reply = parsed("whatsapp_member_list_reply.json").interactive
    assert list_reply is not None and list_reply.reply is not None
    assert (list_reply.type, list_reply.reply.id, list_reply.reply.description) == (
        "list_reply",
        "plan-2",
        "2 GB/day, 28 days",
    )
    flow = parsed("whatsapp_member_nfm_reply.json").interactive
    assert flow is not None and flow.nfm_reply is not None and flow.nfm_reply.name == "flow"
    assert parsed("whatsapp_member_button.json").button == typed.Button("STOP_PROMOS", "Stop promotions")
    order = parsed("whatsapp_member_order.json").order
    assert order is not None and order.product_items is not None
    assert order.product_items[1] == typed.ProductItem("sku-102", 1, 99.0, "INR")
    system = parsed("whatsapp_member_system.json").system
    assert system is not None and system.type == "user_changed_number"
    unsupported = parsed("whatsapp_member_unsupported.json").unsupported
    assert unsupported is not None and unsupported.errors is not None
    assert unsupported.errors[0].code == 131051
    referral = parsed("whatsapp_member_text_referral.json").referral
    assert referral is not None and referral.source_type == "ad"
    unknown = parsed("whatsapp_member_unknown_type.json")
    assert unknown.type == "poll_vote" and unknown.media is None and unknown.text is None


def test_the_sdk_ignores_members_it_does_not_know() -> None:
    doc = json.loads(golden("whatsapp_member_image_forwarded.json"))
    doc["whatsapp"]["v"] = 2
    doc["whatsapp"]["stickers_pack"] = {"id": 1}
    doc["whatsapp"]["image"]["width"] = 800
    doc["whatsapp"]["context"]["referred_product"] = {"catalog_id": "1"}
    message = parse_message(json.dumps(doc))
    assert message.whatsapp is not None and message.whatsapp.v == 2
    assert message.whatsapp.image is not None and message.whatsapp.image.id == "1003383421387256"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda w: w["image"].update(id=1003383421387256), "whatsapp.image.id"),
        (lambda w: w["image"].update(file_size="303833"), "whatsapp.image.file_size"),
        (lambda w: w.update(context=[]), "whatsapp.context"),
        (lambda w: w["context"].update(forwarded="yes"), "whatsapp.context.forwarded"),
        (lambda w: w.update(v="1"), "whatsapp.v"),
        (lambda w: w.pop("wamid"), "whatsapp.wamid"),
        (lambda w: w.update(contacts=[{"phones": [{"phone": 5}]}]), "whatsapp.contacts[0].phones[0].phone"),
        (lambda w: w.update(reaction={"message_id": "wamid.Y"}), "whatsapp.reaction.emoji"),
    ],
)
def test_the_sdk_is_strict_on_the_members_it_knows(change: Any, field: str) -> None:
    doc = json.loads(golden("whatsapp_member_image_forwarded.json"))
    change(doc["whatsapp"])
    with pytest.raises(InvalidPayload) as info:
        parse_message(json.dumps(doc))
    assert info.value.field == field


def test_a_member_on_an_sms_body_or_not_an_object_is_refused() -> None:
    doc = json.loads(golden("whatsapp_member_text.json"))
    doc["whatsapp"] = "text"
    with pytest.raises(InvalidPayload) as info:
        parse_message(json.dumps(doc))
    assert info.value.field == "whatsapp"
    doc = json.loads(golden("whatsapp_member_text.json"))
    del doc["channel"]
    with pytest.raises(InvalidPayload) as info:
        parse_message(json.dumps(doc))
    assert info.value.field == "whatsapp"


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_the_gateway_side_parse_gives_back_the_same_bytes(name: str, index: int) -> None:
    message = parse_message(golden(name), message_id="m1")
    assert callback_body(message.mo) == golden(name)
    assert typed.WhatsAppMessage is type(message.whatsapp)
    assert type(message).from_mo(message.mo).whatsapp == message.whatsapp
