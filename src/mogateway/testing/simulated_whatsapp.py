"""The WhatsApp message ``mogateway simulate --whatsapp --type T`` makes up: Meta's message object of type
``T``, built by the fake's webhook builders (:mod:`mogateway.testing.fake_graph.webhooks`, which follow
Meta's shapes), so the callback it becomes — through the gateway's own webhook parse and
``core.whatsapp_member`` (:func:`mogateway.testing.payloads.make_mo`) — is the one the gateway would send
for such a message.

What ``MESSAGE`` (simulate's text argument) is, per type: the text of a ``text``; the caption of an
``image``, ``video`` or ``document`` (none when empty); the name of a ``location``; the name on a
``contacts`` card; the emoji of a ``reaction``; the title of a reply button or list row
(``interactive``, ``button_reply``, ``list_reply``); the Flow's JSON of an ``nfm_reply``; the text of a
template's quick-reply ``button``; the note of an ``order``; the body of a ``system`` notice; what an
``unsupported`` message was. ``audio`` and ``sticker`` have no text.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from mogateway.testing.fake_graph import webhooks as wh

__all__ = ["DEFAULT_TEXT", "OPTIONS", "TYPES", "DetailError", "Details", "build", "check"]

_MEDIA: Final = frozenset({"image", "audio", "video", "document", "sticker"})
_REPLIES: Final = frozenset({"interactive", "button_reply", "list_reply"})

#: The ``--type`` values, in the order the help lists them (``interactive`` is a reply button's tap).
TYPES: Final = (
    "text",
    "image",
    "audio",
    "video",
    "document",
    "sticker",
    "location",
    "contacts",
    "reaction",
    "interactive",
    "button_reply",
    "list_reply",
    "nfm_reply",
    "button",
    "order",
    "system",
    "unsupported",
)

#: The MESSAGE a type has when none is given (None: MESSAGE is required; "": the type has no text).
DEFAULT_TEXT: Final[dict[str, str | None]] = {
    "text": None,
    "image": "",
    "audio": "",
    "video": "",
    "document": "",
    "sticker": "",
    "location": "",
    "contacts": "Ravi Kumar",
    "reaction": "👍",
    "interactive": "Yes",
    "button_reply": "Yes",
    "list_reply": "Plan 299",
    "nfm_reply": '{"flow_token": "simulated", "rating": "5"}',
    "button": "Stop promotions",
    "order": "",
    "system": "The person changed their phone number",
    "unsupported": "",
}


@dataclass(frozen=True, slots=True)
class Details:
    """simulate's options for the type's details; None means the type's default."""

    media_id: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    file_size: int | None = None
    voice: bool | None = None
    animated: bool | None = None
    latitude: float | None = None
    longitude: float | None = None
    address: str | None = None
    phone: str | None = None
    reply_id: str | None = None
    description: str | None = None
    reacted_to: str | None = None
    #: Any type: the wamid of the business's message this one replies to.
    context: str | None = None
    #: Any type: forwarded (``forwarded``) or many times (``frequently``).
    forwarded: str | None = None
    #: Any type: the click-to-WhatsApp ad's URL the person came from (a ``referral``).
    referral: str | None = None


#: Each detail option -> the types it applies to (the options not listed apply to every type).
OPTIONS: Final[dict[str, frozenset[str]]] = {
    "media_id": _MEDIA,
    "mime_type": _MEDIA,
    "filename": frozenset({"document"}),
    "file_size": frozenset({"document"}),
    "voice": frozenset({"audio"}),
    "animated": frozenset({"sticker"}),
    "latitude": frozenset({"location"}),
    "longitude": frozenset({"location"}),
    "address": frozenset({"location"}),
    "phone": frozenset({"contacts"}),
    "reply_id": _REPLIES | {"button"},
    "description": frozenset({"list_reply"}),
    "reacted_to": frozenset({"reaction"}),
}


class DetailError(ValueError):
    """An option or MESSAGE that does not fit the type: ``option`` names it (``--filename``)."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option = option
        self.reason = reason


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def check(kind: str, text: str, details: Details) -> None:
    """Raise :class:`DetailError` for an option that does not apply to ``kind``, or a MESSAGE it
    cannot have."""
    if kind not in TYPES:
        raise DetailError("--type", f"must be one of {', '.join(TYPES)}")
    for f in fields(details):
        applies = OPTIONS.get(f.name)
        if applies is not None and getattr(details, f.name) is not None and kind not in applies:
            raise DetailError(_option(f.name), f"applies to --type {' or '.join(sorted(applies))} only")
    if kind in ("audio", "sticker") and text:
        what = "an audio message" if kind == "audio" else "a sticker"
        raise DetailError("MESSAGE", f"{what} has no text: give '' (or nothing)")
    if kind in _REPLIES | {"button"} and not text:
        raise DetailError("MESSAGE", "a reply button or list row has a title: give it as MESSAGE")
    if details.latitude is not None and not -90 <= details.latitude <= 90:
        raise DetailError("--latitude", "must be within -90 and 90")
    if details.longitude is not None and not -180 <= details.longitude <= 180:
        raise DetailError("--longitude", "must be within -180 and 180")
    if details.forwarded not in (None, "once", "frequently"):
        raise DetailError("--forwarded", "must be once or frequently")


def build(kind: str, sender: str, text: str, details: Details) -> dict[str, Any]:
    """Meta's message object of type ``kind`` from ``sender`` (digits), as the webhook carries it.

    Raises :class:`DetailError` as :func:`check` does."""
    check(kind, text, details)
    d = details
    media: dict[str, Any] = {}
    if d.media_id is not None:
        media["media_id"] = d.media_id
    if d.mime_type is not None:
        media["mime_type"] = d.mime_type
    message: dict[str, Any]
    if kind == "text":
        message = wh.text(sender, text)
    elif kind in ("image", "video"):
        message = wh.media(sender, kind, caption=text or None, **media)
    elif kind == "audio":
        message = wh.audio(sender, voice=True if d.voice is None else d.voice, **media)
    elif kind == "document":
        message = wh.document(
            sender, d.filename or "document.pdf", caption=text or None, file_size=d.file_size, **media
        )
    elif kind == "sticker":
        message = wh.sticker(sender, animated=bool(d.animated), **media)
    elif kind == "location":
        lat = 28.6139 if d.latitude is None else d.latitude
        lon = 77.2090 if d.longitude is None else d.longitude
        message = wh.location(sender, lat, lon, name=text or None, address=d.address)
    elif kind == "contacts":
        card = wh.contact_card(text or "Ravi Kumar", d.phone or "+91 98123 45679")
        message = wh.contacts(sender, card)
    elif kind == "reaction":
        message = wh.reaction(sender, d.reacted_to or wh.new_wamid(), text)
    elif kind in ("interactive", "button_reply"):
        message = wh.button_reply(sender, d.reply_id or "button-1", text)
    elif kind == "list_reply":
        message = wh.list_reply(sender, d.reply_id or "row-1", text, d.description or "")
    elif kind == "nfm_reply":
        message = wh.nfm_reply(sender, text)
    elif kind == "button":
        message = wh.quick_reply(sender, text, d.reply_id)
    elif kind == "order":
        message = wh.order(sender, "1537264876583739", wh.product_item("sku-101", 1, 99.0), text=text or None)
    elif kind == "system":
        message = wh.system(sender, text, new_wa_id=None)
    else:
        message = wh.unsupported(sender, text or None)
    if d.context is not None:
        wh.replying_to(message, d.context)
    if d.forwarded is not None:
        wh.forwarded(message, frequently=d.forwarded == "frequently")
    if d.referral is not None:
        wh.with_referral(message, source_url=d.referral)
    return message
