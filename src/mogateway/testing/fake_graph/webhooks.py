"""Meta's side of WhatsApp webhooks, for tests and demos: bodies shaped like Meta's, signed like Meta's.

Build the messages and statuses, then send them in one body::

    from mogateway.testing.fake_graph import webhooks as wh

    with wh.WebhookSender("http://127.0.0.1:8080/v1/whatsapp/webhook", app_secret="s3cret") as meta:
        assert meta.handshake("my-verify-token").text == "1158201444"
        first = meta.send(wh.text("919812345678", "BAL नमस्ते"), wh.button_reply("9198123", "b", "Balance"))
        assert first.status == 200
        meta.redeliver(first)                      # the same bytes, the same signature, as Meta retries
        meta.send(statuses=[wh.status(reply_wamid, "read", "919812345678")])

Every inbound message type Meta documents has a builder here: :func:`text`, the media (:func:`image`,
:func:`audio`, :func:`video`, :func:`document`, :func:`sticker`, or :func:`media`), :func:`location`,
:func:`contacts` (cards from :func:`contact_card`), :func:`reaction` and :func:`reaction_removed`,
:func:`button_reply`, :func:`list_reply`, :func:`nfm_reply`, :func:`quick_reply` (type ``button``),
:func:`order` (items from :func:`product_item`), :func:`system`, :func:`unsupported`; and the events
:func:`edit`, :func:`revoke`. Any of them can be made a reply (:func:`replying_to`, or the builder's
``context=``), forwarded (:func:`forwarded`) or the first message after a click-to-WhatsApp ad
(:func:`with_referral`)::

    wh.forwarded(wh.document("919812345678", "bill.pdf", caption="my bill"), frequently=True)

The bodies and their delivery (:func:`webhook_body`, :func:`merge`, :func:`encode`, :func:`status`,
:class:`WebhookSender`) are in :mod:`.webhook_sender`, re-exported here. A body is serialised once,
with non-ASCII text as UTF-8 (not ``\\u`` escapes), and signed over exactly those bytes
(``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 keyed with the app secret>``), so a receiver that
re-serialises before checking fails as it would with Meta.
"""

from __future__ import annotations

import itertools
import secrets
import time
from typing import Any

from mogateway.testing.fake_graph.fixtures import CLOUD_DISPLAY_NUMBER
from mogateway.testing.fake_graph.webhook_sender import (
    Delivery,
    WebhookSender,
    encode,
    merge,
    status,
    webhook_body,
)

__all__ = [
    "AD_REFERRAL",
    "Delivery",
    "WebhookSender",
    "audio",
    "button_reply",
    "contact_card",
    "contacts",
    "document",
    "edit",
    "encode",
    "forwarded",
    "image",
    "list_reply",
    "location",
    "media",
    "merge",
    "new_wamid",
    "nfm_reply",
    "order",
    "product_item",
    "quick_reply",
    "reaction",
    "reaction_removed",
    "replying_to",
    "revoke",
    "status",
    "sticker",
    "system",
    "system_user_changed_user_id",
    "text",
    "unrendered",
    "unsupported",
    "username_text",
    "video",
    "webhook_body",
    "with_referral",
]

_counter = itertools.count(1)


def new_wamid() -> str:
    """A fresh inbound-looking wamid."""
    return f"wamid.HBgM{secrets.token_hex(12).upper()}{next(_counter):06d}"


def _message(
    sender: str,
    kind: str,
    content: dict[str, Any],
    wamid: str | None,
    timestamp: int | None,
    context: str | None,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "from": sender,
        "id": wamid or new_wamid(),
        "timestamp": str(int(time.time()) if timestamp is None else timestamp),
        "type": kind,
        kind: content,
    }
    if context:
        message["context"] = {"from": CLOUD_DISPLAY_NUMBER, "id": context}
    return message


def text(
    sender: str,
    body: str,
    *,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A text message from ``sender`` (digits)."""
    return _message(sender, "text", {"body": body}, wamid, timestamp, context)


def username_text(
    user_id: str,
    body: str,
    *,
    sender: str | None = None,
    group_id: str | None = None,
    wamid: str | None = None,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """A text from a person Meta names by a business-scoped user id (``from_user_id``, a WhatsApp
    username user), without ``from`` unless ``sender`` is given; in a group with ``group_id``."""
    message = _message(sender or "", "text", {"body": body}, wamid, timestamp, None)
    if sender is None:
        del message["from"]
    message["from_user_id"] = user_id
    if group_id is not None:
        message["group_id"] = group_id
    return message


def reaction(
    sender: str, message_id: str, emoji: str, *, wamid: str | None = None, timestamp: int | None = None
) -> dict[str, Any]:
    """A reaction to ``message_id``; an empty ``emoji`` removes it."""
    return _message(sender, "reaction", {"message_id": message_id, "emoji": emoji}, wamid, timestamp, None)


def revoke(sender: str, original: str, *, wamid: str | None = None) -> dict[str, Any]:
    """The person deleted their message ``original``."""
    return _message(sender, "revoke", {"original_message_id": original}, wamid, None, None)


def edit(sender: str, original: str, body: str, *, wamid: str | None = None) -> dict[str, Any]:
    """The person edited their message ``original`` to ``body``."""
    content = {"original_message_id": original, "message": {"type": "text", "text": {"body": body}}}
    return _message(sender, "edit", content, wamid, None, None)


def system_user_changed_user_id(
    old_user_id: str, new_user_id: str, *, wamid: str | None = None
) -> dict[str, Any]:
    """A system notice that a person's business-scoped user id changed: no ``from``."""
    content = {
        "body": f"User {old_user_id} changed to {new_user_id}",
        "type": "user_changed_user_id",
        "user_id": new_user_id,
    }
    message = _message("", "system", content, wamid, None, None)
    del message["from"]
    message["from_user_id"] = old_user_id
    return message


def unrendered(sender: str, kind: str = "interactive", *, wamid: str | None = None) -> dict[str, Any]:
    """A message Meta could not render: its ``type`` without its object, and Meta's ``errors``."""
    message = _message(sender, kind, {}, wamid, None, None)
    del message[kind]
    message["errors"] = [
        {
            "code": 131000,
            "title": "Something went wrong",
            "message": "Something went wrong",
            "error_data": {"details": "Unsupported webhook payload"},
        }
    ]
    return message


def button_reply(
    sender: str,
    reply_id: str,
    title: str,
    *,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A tap on an interactive reply button."""
    content = {"type": "button_reply", "button_reply": {"id": reply_id, "title": title}}
    return _message(sender, "interactive", content, wamid, timestamp, context)


def list_reply(
    sender: str,
    reply_id: str,
    title: str,
    description: str = "",
    *,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A choice from an interactive list."""
    content = {
        "type": "list_reply",
        "list_reply": {"id": reply_id, "title": title, "description": description},
    }
    return _message(sender, "interactive", content, wamid, timestamp, context)


def quick_reply(
    sender: str,
    text: str,
    payload: str | None = None,
    *,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A template's quick-reply button (type ``button``)."""
    content = {"payload": payload if payload is not None else text, "text": text}
    return _message(sender, "button", content, wamid, timestamp, context)


_MIME = {
    "image": "image/jpeg",
    "audio": "audio/ogg; codecs=opus",
    "video": "video/mp4",
    "document": "application/pdf",
    "sticker": "image/webp",
}


def media(
    sender: str,
    kind: str,
    *,
    caption: str | None = None,
    media_id: str | None = None,
    mime_type: str | None = None,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
    sha256: str | None = None,
    filename: str | None = None,
) -> dict[str, Any]:
    """An image, audio, video, document or sticker. The media itself is served by the fake Graph API
    when registered there (``POST /__fake/media``, ``fake_graph.media``): pass its ``id`` and
    ``sha256`` (base64, as Meta's webhook writes it); without ``sha256`` a random one."""
    if kind not in _MIME:
        raise ValueError(f"media kind must be one of {sorted(_MIME)}")
    content: dict[str, Any] = {
        "mime_type": mime_type or _MIME[kind],
        "sha256": sha256 if sha256 is not None else secrets.token_urlsafe(32),
        "id": media_id or str(1003383421387000 + next(_counter)),
    }
    if caption is not None:
        content["caption"] = caption
    if filename is not None:
        content["filename"] = filename
    return _message(sender, kind, content, wamid, timestamp, context)


# -- the other media, each with the fields Meta documents for it -------------------------------------


def image(sender: str, *, caption: str | None = None, **kw: Any) -> dict[str, Any]:
    """An image (``kw``: :func:`media`'s options)."""
    return media(sender, "image", caption=caption, **kw)


def audio(sender: str, *, voice: bool | None = True, **kw: Any) -> dict[str, Any]:
    """An audio message; ``voice`` true (the default) for a voice note recorded in WhatsApp, as Meta
    marks one; None leaves the field out."""
    message = media(sender, "audio", **kw)
    if voice is not None:
        message["audio"]["voice"] = voice
    return message


def video(sender: str, *, caption: str | None = None, **kw: Any) -> dict[str, Any]:
    """A video."""
    return media(sender, "video", caption=caption, **kw)


def document(
    sender: str, filename: str, *, caption: str | None = None, file_size: int | None = None, **kw: Any
) -> dict[str, Any]:
    """A document with its file name (and ``file_size`` in bytes, sent as Graph sends sizes: a digit
    string, when given)."""
    message = media(sender, "document", caption=caption, **kw)
    message["document"]["filename"] = filename
    if file_size is not None:
        message["document"]["file_size"] = str(file_size)
    return message


def sticker(sender: str, *, animated: bool = False, **kw: Any) -> dict[str, Any]:
    """A sticker (webp); ``animated`` as Meta marks it."""
    message = media(sender, "sticker", **kw)
    message["sticker"]["animated"] = animated
    return message


# -- location, contacts ------------------------------------------------------------------------------


def location(
    sender: str,
    latitude: float,
    longitude: float,
    *,
    name: str | None = None,
    address: str | None = None,
    url: str | None = None,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A shared location (a pinned place has a ``name`` and an ``address``; a live location has
    neither)."""
    content: dict[str, Any] = {"latitude": latitude, "longitude": longitude}
    for key, value in (("name", name), ("address", address), ("url", url)):
        if value is not None:
            content[key] = value
    return _message(sender, "location", content, wamid, timestamp, context)


def contact_card(
    formatted_name: str,
    *phones: str,
    wa_id: str | None = None,
    first_name: str | None = None,
    last_name: str | None = None,
    email: str | None = None,
    company: str | None = None,
    title: str | None = None,
    birthday: str | None = None,
) -> dict[str, Any]:
    """One card of a ``contacts`` message: its name, phones (the first with ``wa_id`` when given, type
    ``CELL``), and optionally an email, a company (and the person's ``title`` there) and a birthday
    (``YYYY-MM-DD``)."""
    name: dict[str, Any] = {"formatted_name": formatted_name}
    if first_name is not None:
        name["first_name"] = first_name
    if last_name is not None:
        name["last_name"] = last_name
    card: dict[str, Any] = {"name": name}
    if phones:
        card["phones"] = [{"phone": p, "type": "CELL"} for p in phones]
        if wa_id is not None:
            card["phones"][0] = {"phone": phones[0], "wa_id": wa_id, "type": "CELL"}
    if email is not None:
        card["emails"] = [{"email": email, "type": "WORK"}]
    if company is not None:
        card["org"] = {"company": company} if title is None else {"company": company, "title": title}
    if birthday is not None:
        card["birthday"] = birthday
    return card


def contacts(
    sender: str,
    *cards: dict[str, Any],
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """Contact cards the person shared (:func:`contact_card`); ``contacts`` is a list, as Meta sends."""
    message = _message(sender, "contacts", {}, wamid, timestamp, context)
    message["contacts"] = list(cards)
    return message


# -- reactions, interactive answers, orders ------------------------------------------------------------


def reaction_removed(
    sender: str, message_id: str, *, wamid: str | None = None, timestamp: int | None = None
) -> dict[str, Any]:
    """The person took their reaction to ``message_id`` back: Meta sends the reaction without an emoji."""
    return _message(sender, "reaction", {"message_id": message_id}, wamid, timestamp, None)


def nfm_reply(
    sender: str,
    response_json: str,
    *,
    name: str = "flow",
    body: str = "Sent",
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """A WhatsApp Flow's answer (interactive ``nfm_reply``); ``response_json`` is the Flow's JSON as
    text, as Meta sends it."""
    content = {
        "type": "nfm_reply",
        "nfm_reply": {"name": name, "body": body, "response_json": response_json},
    }
    return _message(sender, "interactive", content, wamid, timestamp, context)


def product_item(retailer_id: str, quantity: int, price: float, currency: str = "INR") -> dict[str, Any]:
    """One line of an :func:`order`."""
    return {
        "product_retailer_id": retailer_id,
        "quantity": quantity,
        "item_price": price,
        "currency": currency,
    }


def order(
    sender: str,
    catalog_id: str,
    *items: dict[str, Any],
    text: str | None = None,
    wamid: str | None = None,
    timestamp: int | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """An order from the business's catalog (its lines from :func:`product_item`)."""
    content: dict[str, Any] = {"catalog_id": catalog_id}
    if text is not None:
        content["text"] = text
    content["product_items"] = list(items)
    return _message(sender, "order", content, wamid, timestamp, context)


# -- what WhatsApp itself says ----------------------------------------------------------------------------


def system(
    sender: str,
    body: str,
    *,
    kind: str = "user_changed_number",
    new_wa_id: str | None = None,
    wamid: str | None = None,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """A system notice about ``sender`` (by default: they changed their number to ``new_wa_id``)."""
    content: dict[str, Any] = {"body": body}
    if new_wa_id is not None:
        content["new_wa_id"] = new_wa_id
    content["type"] = kind
    return _message(sender, "system", content, wamid, timestamp, None)


def unsupported(
    sender: str,
    what: str | None = None,
    *,
    kind: str = "unsupported",
    code: int = 131051,
    title: str = "Message type unknown",
    details: str = "Message type is currently not supported.",
    wamid: str | None = None,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """A message WhatsApp does not pass on (``unsupported``, or Meta's older ``unknown`` with
    ``kind``), with Meta's error; ``what`` is what it was (``unsupported.type``), when Meta says."""
    message = _message(sender, kind, {"type": what} if what is not None else {}, wamid, timestamp, None)
    if what is None:
        del message[kind]
    message["errors"] = [{"code": code, "title": title, "message": title, "error_data": {"details": details}}]
    return message


# -- what any message may carry: a reply's context, forwarded flags, an ad's referral ----------------


def replying_to(message: dict[str, Any], wamid: str, *, sender: str = CLOUD_DISPLAY_NUMBER) -> dict[str, Any]:
    """``message`` as a reply to the business's message ``wamid`` (``context: {from, id}``)."""
    message["context"] = {"from": sender, "id": wamid}
    return message


def forwarded(message: dict[str, Any], *, frequently: bool = False) -> dict[str, Any]:
    """``message`` as forwarded (``context.forwarded``); forwarded many times, also
    ``context.frequently_forwarded``."""
    flags = {"forwarded": True, "frequently_forwarded": True} if frequently else {"forwarded": True}
    message["context"] = {**message.get("context", {}), **flags}
    return message


#: A click-to-WhatsApp ad's referral as Meta documents it (``with_referral``'s default).
AD_REFERRAL: dict[str, str] = {
    "source_url": "https://fb.me/3cr4Wqqkv",
    "source_id": "120212345678901234",
    "source_type": "ad",
    "headline": "Pay your bill on WhatsApp",
    "body": "Tap to chat",
    "media_type": "image",
    "image_url": "https://scontent.example/ad.jpg",
    "ctwa_clid": "ARAkLkA8rmlFeiCktEJQ-QTwRiyYHAFDLMNDBH0CD3qpjd0HR4irJ6LEkR7JwFF4XvnO2E4Nx0-eM-ZABe",
}


def with_referral(message: dict[str, Any], **fields: str) -> dict[str, Any]:
    """``message`` as the first message after a click on a click-to-WhatsApp ad: ``referral`` is
    :data:`AD_REFERRAL` with ``fields`` changed (``source_url``, ``headline``…)."""
    message["referral"] = {**AD_REFERRAL, **fields}
    return message
