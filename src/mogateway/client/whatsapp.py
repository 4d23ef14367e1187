"""The callback's ``whatsapp`` member as typed, immutable objects: ``message.whatsapp.image.id``.

The member's shape is the JSON Schema shipped with the package (``mogateway/data/`` +
``core.whatsapp_member.SCHEMA_FILE``, written from ``core.whatsapp_member.OBJECTS``; docs/contract.md
describes it). This module reads that schema once and parses by it:

* **Strict on what it knows.** A member the schema describes with another type (a string where an
  object is, a boolean where a number is) is an :class:`~mogateway.client.message.InvalidPayload` naming
  it (``whatsapp.image.id: must be a string``), as is a required member left out.
* **Tolerant of what it does not know.** Members the schema does not describe (a later gateway's) are
  ignored, as is a ``type`` this SDK has no object for (``type`` still says what it is); ``v`` above 1
  is read the same way (the version changes only when a member changes meaning).
* Every object is a frozen dataclass; lists are tuples; a member that was absent is None. JSON numbers
  in ``number`` members are floats. ``from`` is ``from_`` in Python.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, Final

import orjson

from mogateway.core.contract import PayloadError
from mogateway.core.whatsapp_member import MEDIA_OBJECT, SCHEMA_FILE

__all__ = [
    "MEDIA_TYPES",
    "Button",
    "Contact",
    "ContactAddress",
    "ContactEmail",
    "ContactName",
    "ContactOrg",
    "ContactPhone",
    "ContactUrl",
    "Context",
    "FlowReply",
    "GraphError",
    "Interactive",
    "InteractiveReply",
    "Location",
    "Media",
    "Order",
    "ProductItem",
    "Reaction",
    "Referral",
    "System",
    "Text",
    "Unsupported",
    "WhatsAppMessage",
    "parse_whatsapp",
    "schema",
]

MEDIA_TYPES: Final = ("image", "audio", "video", "document", "sticker")

_frozen = dataclass(frozen=True, slots=True)


@_frozen
class Context:
    """What the message replies to (``id``, ``from_``) or that it was forwarded."""

    id: str | None = None
    from_: str | None = None
    forwarded: bool | None = None
    frequently_forwarded: bool | None = None


@_frozen
class Referral:
    """The click-to-WhatsApp ad the person came from."""

    source_url: str | None = None
    source_id: str | None = None
    source_type: str | None = None
    headline: str | None = None
    body: str | None = None
    media_type: str | None = None
    image_url: str | None = None
    video_url: str | None = None
    thumbnail_url: str | None = None
    ctwa_clid: str | None = None


@_frozen
class Text:
    body: str = ""


@_frozen
class Media:
    """An image, audio, video, document or sticker. ``url`` is a gateway URL to fetch it, when the
    gateway gives one; ``id`` is Meta's media id."""

    id: str | None = None
    mime_type: str | None = None
    sha256: str | None = None
    caption: str | None = None
    filename: str | None = None
    voice: bool | None = None
    animated: bool | None = None
    file_size: int | None = None
    url: str | None = None


@_frozen
class Location:
    latitude: float | None = None
    longitude: float | None = None
    name: str | None = None
    address: str | None = None
    url: str | None = None


@_frozen
class ContactName:
    formatted_name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    middle_name: str | None = None
    suffix: str | None = None
    prefix: str | None = None


@_frozen
class ContactPhone:
    phone: str | None = None
    wa_id: str | None = None
    type: str | None = None


@_frozen
class ContactEmail:
    email: str | None = None
    type: str | None = None


@_frozen
class ContactOrg:
    company: str | None = None
    department: str | None = None
    title: str | None = None


@_frozen
class ContactUrl:
    url: str | None = None
    type: str | None = None


@_frozen
class ContactAddress:
    street: str | None = None
    city: str | None = None
    state: str | None = None
    zip: str | None = None
    country: str | None = None
    country_code: str | None = None
    type: str | None = None


@_frozen
class Contact:
    """One shared contact card."""

    name: ContactName | None = None
    phones: tuple[ContactPhone, ...] | None = None
    emails: tuple[ContactEmail, ...] | None = None
    org: ContactOrg | None = None
    urls: tuple[ContactUrl, ...] | None = None
    addresses: tuple[ContactAddress, ...] | None = None
    birthday: str | None = None


@_frozen
class Reaction:
    """An emoji on ``message_id``; ``emoji`` is "" when the person removed their reaction."""

    message_id: str | None = None
    emoji: str = ""

    @property
    def removed(self) -> bool:
        return not self.emoji


@_frozen
class InteractiveReply:
    """A reply button's or a list row's ``id`` and ``title`` (``description`` for a list row)."""

    id: str | None = None
    title: str | None = None
    description: str | None = None


@_frozen
class FlowReply:
    """A WhatsApp Flow's answer (``nfm_reply``); ``response_json`` is the Flow's JSON, as text."""

    name: str | None = None
    body: str | None = None
    response_json: str | None = None


@_frozen
class Interactive:
    type: str | None = None
    button_reply: InteractiveReply | None = None
    list_reply: InteractiveReply | None = None
    nfm_reply: FlowReply | None = None

    @property
    def reply(self) -> InteractiveReply | None:
        """The button or list row chosen, whichever it was."""
        return self.button_reply or self.list_reply


@_frozen
class Button:
    """A template's quick-reply button: its ``payload`` and ``text``."""

    payload: str | None = None
    text: str | None = None


@_frozen
class ProductItem:
    product_retailer_id: str | None = None
    quantity: int | None = None
    item_price: float | None = None
    currency: str | None = None


@_frozen
class Order:
    catalog_id: str | None = None
    text: str | None = None
    product_items: tuple[ProductItem, ...] | None = None


@_frozen
class System:
    type: str | None = None
    body: str | None = None
    identity: str | None = None
    wa_id: str | None = None
    new_wa_id: str | None = None
    customer: str | None = None


@_frozen
class GraphError:
    code: int | None = None
    title: str | None = None
    message: str | None = None
    details: str | None = None


@_frozen
class Unsupported:
    """A message WhatsApp could not pass on (``unsupported``, or the older ``unknown``), with Meta's
    errors."""

    type: str | None = None
    errors: tuple[GraphError, ...] | None = None


@_frozen
class WhatsAppMessage:
    """The ``whatsapp`` member: the message's ``type`` (as Meta names it), ``wamid``, the sender's
    ``profile_name``, ``context``, ``referral``, and the object of its type (the others are None)."""

    v: int
    type: str
    wamid: str
    profile_name: str | None = None
    context: Context | None = None
    referral: Referral | None = None
    text: Text | None = None
    image: Media | None = None
    audio: Media | None = None
    video: Media | None = None
    document: Media | None = None
    sticker: Media | None = None
    location: Location | None = None
    contacts: tuple[Contact, ...] | None = None
    reaction: Reaction | None = None
    interactive: Interactive | None = None
    button: Button | None = None
    order: Order | None = None
    system: System | None = None
    unsupported: Unsupported | None = None
    unknown: Unsupported | None = None

    @property
    def media(self) -> Media | None:
        """The image, audio, video, document or sticker this message carries, if any."""
        return next((m for m in (self.image, self.audio, self.video, self.document, self.sticker) if m), None)


#: The schema's objects ($defs) -> the class each is read into.
_CLASSES: Final[dict[str, type[Any]]] = {
    "context": Context,
    "referral": Referral,
    "text": Text,
    MEDIA_OBJECT: Media,
    "location": Location,
    "contact": Contact,
    "contact_name": ContactName,
    "contact_phone": ContactPhone,
    "contact_email": ContactEmail,
    "contact_org": ContactOrg,
    "contact_url": ContactUrl,
    "contact_address": ContactAddress,
    "reaction": Reaction,
    "interactive": Interactive,
    "reply": InteractiveReply,
    "nfm_reply": FlowReply,
    "button": Button,
    "order": Order,
    "product_item": ProductItem,
    "system": System,
    "unsupported": Unsupported,
    "error": GraphError,
}
_ROOT: Final = "#"
_TYPE_NAMES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
}


@cache
def schema() -> dict[str, Any]:
    """The shipped JSON Schema of the member (read once)."""
    text = (importlib.resources.files("mogateway") / "data" / SCHEMA_FILE).read_bytes()
    loaded: dict[str, Any] = orjson.loads(text)
    return loaded


def parse_whatsapp(value: Any, path: str = "whatsapp") -> WhatsAppMessage:
    """The member ``value`` (decoded JSON) as a :class:`WhatsAppMessage`; :class:`PayloadError` naming
    the first member of the wrong type (the SDK raises it as ``InvalidPayload``)."""
    doc = schema()
    parsed = _read(value, doc, path, _ROOT)
    message: WhatsAppMessage = _build(WhatsAppMessage, parsed)
    return message


def _read(value: Any, node: dict[str, Any], path: str, name: str) -> Any:
    """``value`` checked against the schema ``node`` (unknown object members dropped)."""
    ref = node.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        node = schema()["$defs"][name]
    kind = node["type"]
    if not _is(value, kind):
        raise PayloadError(path, f"must be {_TYPE_NAMES[kind]}")
    if kind == "array":
        return [_read(item, node["items"], f"{path}[{i}]", name) for i, item in enumerate(value)]
    if kind != "object":
        return float(value) if kind == "number" else value
    for required in node.get("required", ()):
        if required not in value:
            raise PayloadError(f"{path}.{required}", "is required")
    out: dict[str, Any] = {"": name}
    for key, member in node["properties"].items():
        if key in value and value[key] is not None:
            out[key] = _read(value[key], member, f"{path}.{key}", name)
    return out


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _build(cls: type[Any], doc: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        key = f.name.rstrip("_")
        if key in doc:
            kwargs[f.name] = _value(doc[key])
    return cls(**kwargs)


def _value(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_value(item) for item in value)
    if isinstance(value, dict):
        return _build(_CLASSES[value[""]], value)
    return value
