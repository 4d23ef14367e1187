"""The fake's webhook builders (``mogateway.testing.fake_graph.webhooks``) build every inbound type as Meta
shapes it: each builder, given the values of a message of ``tests/fixtures/whatsapp/every_type.json``
(Meta's documented shapes), writes the same keys in the same places, and the gateway reads it into the
same callback member (``core.whatsapp_member``) and the same text (``core.whatsapp``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mogateway.core.whatsapp import parse_webhook
from mogateway.core.whatsapp_member import build_member
from mogateway.testing.fake_graph import webhooks as wh

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "whatsapp" / "every_type.json"
FROM = "919812345678"
REACTED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSQjI0RTk1OEY0RTJGRTk1RjU1AA=="
ASKED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSMDAwMDAwMDAwMDAwMDAwMDAxAA=="

# Keys of the fixture's messages a builder leaves out on purpose: values the fixture carries to test the
# gateway's tolerance, not fields every message has.
EXTRAS = {"text.preview_url", "referral.welcome_message", "contacts.urls", "contacts.addresses"}


def _fixture() -> list[dict[str, Any]]:
    body = json.loads(FIXTURE.read_text())
    messages: list[dict[str, Any]] = body["entry"][0]["changes"][0]["value"]["messages"]
    return messages


def _media_kw(m: dict[str, Any]) -> dict[str, Any]:
    obj = m[m["type"]]
    return {"media_id": obj["id"], "mime_type": obj["mime_type"]}


CASES: list[tuple[str, int, Callable[[dict[str, Any]], dict[str, Any]]]] = [
    ("text", 0, lambda m: wh.text(FROM, "HELLO")),
    ("text_referral", 1, lambda m: wh.with_referral(wh.text(FROM, "I saw your ad"))),
    (
        "image_forwarded",
        2,
        lambda m: wh.forwarded(wh.image(FROM, caption="my bill", **_media_kw(m)), frequently=True),
    ),
    ("audio_voice", 3, lambda m: wh.audio(FROM, **_media_kw(m))),
    ("video", 4, lambda m: wh.video(FROM, caption="the meter", **_media_kw(m))),
    (
        "document",
        5,
        lambda m: wh.document(
            FROM, "statement-nov.pdf", caption="statement", file_size=303833, **_media_kw(m)
        ),
    ),
    ("sticker", 6, lambda m: wh.sticker(FROM, **_media_kw(m))),
    (
        "location",
        7,
        lambda m: wh.location(
            FROM,
            19.076,
            72,
            name="Gateway of India",
            address="Apollo Bandar, Colaba, Mumbai 400001",
            url="https://maps.example/goi",
        ),
    ),
    (
        "contacts",
        8,
        lambda m: wh.contacts(
            FROM,
            wh.contact_card(
                "Ravi Kumar",
                "+91 98123 45679",
                wa_id="919812345679",
                first_name="Ravi",
                last_name="Kumar",
                email="ravi@example.in",
                company="Example Ltd",
                title="Accounts",
                birthday="1990-01-31",
            ),
        ),
    ),
    ("reaction", 9, lambda m: wh.reaction(FROM, REACTED, "👍")),
    ("reaction_removed", 10, lambda m: wh.reaction_removed(FROM, REACTED)),
    (
        "button_reply",
        11,
        lambda m: wh.button_reply(FROM, "yes-1", "Yes, book it ✅", context=ASKED),
    ),
    ("list_reply", 12, lambda m: wh.list_reply(FROM, "plan-2", "Plan 299", "2 GB/day, 28 days")),
    ("nfm_reply", 13, lambda m: wh.nfm_reply(FROM, '{"flow_token": "t-1", "rating": "5"}')),
    ("button", 14, lambda m: wh.quick_reply(FROM, "Stop promotions", "STOP_PROMOS")),
    (
        "order",
        15,
        lambda m: wh.order(
            FROM,
            "1537264876583739",
            wh.product_item("sku-101", 2, 149.5),
            wh.product_item("sku-102", 1, 99),
            text="please deliver by 6",
        ),
    ),
    (
        "system",
        16,
        lambda m: wh.system(
            FROM,
            "Ravi changed their phone number to a new number 919812345680",
            new_wa_id="919812345680",
        ),
    ),
    ("unsupported", 17, lambda m: wh.unsupported(FROM, "edit")),
]


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of ``value`` (list items share their list's path)."""
    if isinstance(value, list):
        return set().union(*(_keys(item, prefix) for item in value)) if value else set()
    if not isinstance(value, dict):
        return set()
    out: set[str] = set()
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        out |= _keys(item, path)
    return out


def _without_extras(keys: set[str]) -> set[str]:
    return {k for k in keys if not any(k == e or k.startswith(e + ".") for e in EXTRAS)}


def _stripped(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` without the :data:`EXTRAS` (and the fixture's phone that is a number, not text)."""
    out = json.loads(json.dumps(meta))
    for card in out.get("contacts", []):
        card["phones"] = [p for p in card.get("phones", []) if isinstance(p.get("phone"), str)]
    for extra in EXTRAS:
        head, key = extra.split(".")
        for holder in out.get(head, []) if isinstance(out.get(head), list) else [out.get(head)]:
            if isinstance(holder, dict):
                holder.pop(key, None)
    return out  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "index", "build"), CASES, ids=[c[0] for c in CASES])
def test_each_builder_writes_meta_s_shape_and_the_gateway_reads_it_alike(
    name: str, index: int, build: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    meta = _fixture()[index]
    built = build(meta)
    assert built["type"] == meta["type"] and built["from"] == FROM
    assert built["id"].startswith("wamid.") and built["timestamp"].isdigit()
    # The same keys in the same places (ids and timestamps aside: those are fresh per message).
    assert _keys(built) == _without_extras(_keys(meta)), name
    # The gateway makes the same callback member of it...
    same = {**built, "id": meta["id"]}
    if name == "image_forwarded":  # the fixture's "frequently_forwarded": "yes" is a wrong type, dropped
        same["context"] = {"forwarded": True}
    if meta["type"] in ("image", "audio", "video", "document", "sticker"):  # a made-up hash each time
        same[meta["type"]] = {**built[meta["type"]], "sha256": meta[meta["type"]]["sha256"]}
    assert build_member(same, "Asha") == build_member(_stripped(meta), "Asha")
    # ...and reads the same text and media facts of the whole signed body.
    (ours,) = parse_webhook(wh.encode(wh.webhook_body([same], names={FROM: "Asha"}))).messages
    (theirs,) = parse_webhook(wh.encode(wh.webhook_body([meta], names={FROM: "Asha"}))).messages
    assert (ours.type, ours.text, ours.media_id, ours.mime_type, ours.reply_id, ours.context_wamid) == (
        theirs.type,
        theirs.text,
        theirs.media_id,
        theirs.mime_type,
        theirs.reply_id,
        theirs.context_wamid,
    )
    assert ours.profile_name == "Asha" and ours.errors == theirs.errors


def test_every_type_meta_documents_has_a_builder() -> None:
    built = {build(_fixture()[index])["type"] for _, index, build in CASES}
    documented = {m["type"] for m in _fixture()} - {"poll_vote"}  # a type the gateway does not know
    assert built == documented


def test_a_reply_a_forward_and_a_referral_compose_on_any_message() -> None:
    message = wh.with_referral(
        wh.forwarded(wh.replying_to(wh.location(FROM, 28.6, 77.2), ASKED), frequently=True),
        headline="50% off",
    )
    assert message["context"] == {
        "from": "919876543210",
        "id": ASKED,
        "forwarded": True,
        "frequently_forwarded": True,
    }
    assert message["referral"]["headline"] == "50% off" and message["referral"]["source_type"] == "ad"
    member = build_member(message)
    assert member["context"] == {
        "id": ASKED,
        "from": "919876543210",
        "forwarded": True,
        "frequently_forwarded": True,
    }
    assert member["referral"]["headline"] == "50% off"
    assert list(member)[-1] == "location"


def test_unknown_is_meta_s_older_unsupported_and_a_message_without_its_object_keeps_its_errors() -> None:
    old = wh.unsupported(FROM, kind="unknown", code=131051)
    assert "unknown" not in old and old["errors"][0]["code"] == 131051
    assert build_member(old)["unknown"] == {
        "errors": [
            {
                "code": 131051,
                "title": "Message type unknown",
                "message": "Message type unknown",
                "details": "Message type is currently not supported.",
            }
        ]
    }
