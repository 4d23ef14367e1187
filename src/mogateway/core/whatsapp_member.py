"""The callback's ``whatsapp`` member: a WhatsApp message as Meta sent it, normalised and typed. Pure.

A WhatsApp MO's callback carries, after ``"channel": "whatsapp"``, one member more: ``whatsapp``, built
here by :func:`build_member` from the webhook's message object (``value.messages[]`` exactly as Meta
sent it) and the sender's profile name. It is the extension's version 1 (``"v": 1``), documented in
``docs/contract.md`` and described by the JSON Schema :func:`member_schema` writes, shipped as
``mogateway/data/whatsapp_member.v1.schema.json`` (the SDK and the OpenAPI document read that file; a
test keeps it equal to what this module writes).

Rules, before the code:

* **Members, in this order:** ``v`` (1), ``type`` (Meta's message type as sent), ``wamid``,
  ``profile_name``, ``context``, ``referral``, then one object named after the type (``text``, ``image``
  …, ``contacts`` is a list). The members of each object, and their order, are :data:`OBJECTS`'s.
* **Only documented fields, each of its documented type.** A field Meta sent with another type (a
  number as a string, an object as a list…) is left out, as is every key not in :data:`OBJECTS` (a field
  Meta adds later reaches the application once it is documented here). An integer may come as a digit
  string (Graph's ``file_size`` does) and is written as a number; a boolean is never a number. Nothing
  fails: a webhook is never refused for its shape here.
* **Absent means unknown.** A member is written only when Meta sent it (with its type), except
  ``text.body`` and ``reaction.emoji``, written ``""`` when missing (an empty emoji removes a reaction);
  ``context`` and ``referral`` only when they keep at least one field; the type's object is ``{}`` when
  Meta sent nothing of it that is known, and absent for a type this module does not know (``type`` then
  says what it was).
* ``unsupported`` (and Meta's older ``unknown``) carry Meta's ``errors`` of the message, each as
  ``{code, title, message, details}`` (``details`` from ``error_data.details``).
* A media object (``image``, ``audio``, ``video``, ``document``, ``sticker``) has the same fields for
  every media type; ``url`` is the gateway URL that fetches the media, signed per client, written
  into the callback at each dispatch by ``core.whatsapp_media.with_media_url`` (never by this module,
  never kept in the journal).
* **The bytes are deterministic:** :func:`member_json` is compact JSON of the member in the order above,
  so the same webhook message gives the same bytes on every node; the journal keeps those bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = [
    "MEDIA_OBJECT",
    "MEMBER_VERSION",
    "OBJECTS",
    "SCHEMA_FILE",
    "TYPE_OBJECTS",
    "build_member",
    "member_json",
    "member_schema",
]

#: The extension's version: it changes only when a member changes meaning, never when one is added.
MEMBER_VERSION: Final = 1
#: The schema's file name in the package's ``data`` directory.
SCHEMA_FILE: Final = "whatsapp_member.v1.schema.json"

# A field's kind: one of these scalars, the name of an object in OBJECTS, or a list of one kind
# (spelled "[name]").
_SCALARS: Final = ("string", "integer", "number", "boolean")
MEDIA_OBJECT: Final = "media"

#: Every object of the member: its fields, in the order they are written, and each field's kind.
OBJECTS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "context": (
        ("id", "string"),
        ("from", "string"),
        ("forwarded", "boolean"),
        ("frequently_forwarded", "boolean"),
    ),
    "referral": tuple(
        (name, "string")
        for name in (
            "source_url",
            "source_id",
            "source_type",
            "headline",
            "body",
            "media_type",
            "image_url",
            "video_url",
            "thumbnail_url",
            "ctwa_clid",
        )
    ),
    "text": (("body", "string"),),
    MEDIA_OBJECT: (
        ("id", "string"),
        ("mime_type", "string"),
        ("sha256", "string"),
        ("caption", "string"),
        ("filename", "string"),
        ("voice", "boolean"),
        ("animated", "boolean"),
        ("file_size", "integer"),
        ("url", "string"),
    ),
    "location": (
        ("latitude", "number"),
        ("longitude", "number"),
        ("name", "string"),
        ("address", "string"),
        ("url", "string"),
    ),
    "contact": (
        ("name", "contact_name"),
        ("phones", "[contact_phone]"),
        ("emails", "[contact_email]"),
        ("org", "contact_org"),
        ("urls", "[contact_url]"),
        ("addresses", "[contact_address]"),
        ("birthday", "string"),
    ),
    "contact_name": tuple(
        (name, "string")
        for name in ("formatted_name", "first_name", "last_name", "middle_name", "suffix", "prefix")
    ),
    "contact_phone": (("phone", "string"), ("wa_id", "string"), ("type", "string")),
    "contact_email": (("email", "string"), ("type", "string")),
    "contact_org": (("company", "string"), ("department", "string"), ("title", "string")),
    "contact_url": (("url", "string"), ("type", "string")),
    "contact_address": tuple(
        (name, "string") for name in ("street", "city", "state", "zip", "country", "country_code", "type")
    ),
    "reaction": (("message_id", "string"), ("emoji", "string")),
    "interactive": (
        ("type", "string"),
        ("button_reply", "reply"),
        ("list_reply", "reply"),
        ("nfm_reply", "nfm_reply"),
    ),
    "reply": (("id", "string"), ("title", "string"), ("description", "string")),
    "nfm_reply": (("name", "string"), ("body", "string"), ("response_json", "string")),
    "button": (("payload", "string"), ("text", "string")),
    "order": (("catalog_id", "string"), ("text", "string"), ("product_items", "[product_item]")),
    "product_item": (
        ("product_retailer_id", "string"),
        ("quantity", "integer"),
        ("item_price", "number"),
        ("currency", "string"),
    ),
    "system": tuple(
        (name, "string") for name in ("type", "body", "identity", "wa_id", "new_wa_id", "customer")
    ),
    "unsupported": (("type", "string"), ("errors", "[error]")),
    "error": (("code", "integer"), ("title", "string"), ("message", "string"), ("details", "string")),
}

#: Fields written even when Meta left them out, with the value they then have.
_DEFAULTS: Final[dict[str, dict[str, Any]]] = {"text": {"body": ""}, "reaction": {"emoji": ""}}

#: Each message type this module knows -> the kind of its object (named after the type).
TYPE_OBJECTS: Final[dict[str, str]] = {
    "text": "text",
    "image": MEDIA_OBJECT,
    "audio": MEDIA_OBJECT,
    "video": MEDIA_OBJECT,
    "document": MEDIA_OBJECT,
    "sticker": MEDIA_OBJECT,
    "location": "location",
    "contacts": "[contact]",
    "reaction": "reaction",
    "interactive": "interactive",
    "button": "button",
    "order": "order",
    "system": "system",
    "unsupported": "unsupported",
    "unknown": "unsupported",
}

_ABSENT: Final = object()


# ------------------------------------------------------------------------------------------- build


def build_member(raw: Mapping[str, Any], profile_name: str | None = None) -> dict[str, Any]:
    """The ``whatsapp`` member of the message object ``raw`` (module docstring), as an ordered dict."""
    kind = raw.get("type")
    wamid = raw.get("id")
    member: dict[str, Any] = {
        "v": MEMBER_VERSION,
        "type": kind if isinstance(kind, str) else "",
        "wamid": wamid if isinstance(wamid, str) else "",
    }
    if isinstance(profile_name, str):
        member["profile_name"] = profile_name
    for name in ("context", "referral"):
        value = _value(raw.get(name), name)
        if isinstance(value, dict) and value:
            member[name] = value
    if not isinstance(kind, str) or kind not in TYPE_OBJECTS:
        return member
    if TYPE_OBJECTS[kind] == "unsupported":
        member[kind] = _unsupported(raw, kind)
        return member
    value = _value(raw.get(kind), TYPE_OBJECTS[kind])
    if value is _ABSENT:
        value = [] if TYPE_OBJECTS[kind].startswith("[") else _object({}, TYPE_OBJECTS[kind])
    member[kind] = value
    return member


def member_json(raw: Mapping[str, Any], profile_name: str | None = None) -> str:
    """:func:`build_member` as compact JSON text: the exact bytes the callback carries (and the journal
    keeps)."""
    return orjson.dumps(build_member(raw, profile_name)).decode("utf-8")


def _unsupported(raw: Mapping[str, Any], kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    detail = raw.get(kind)
    if isinstance(detail, dict) and isinstance(detail.get("type"), str):
        out["type"] = detail["type"]
    errors = raw.get("errors")
    if isinstance(errors, list):
        flat = []
        for item in errors:
            if isinstance(item, dict):
                data = item.get("error_data")
                flat.append({**item, "details": data.get("details") if isinstance(data, dict) else None})
        out["errors"] = _value(flat, "[error]")
    return out


def _value(value: Any, kind: str) -> Any:
    """``value`` normalised to ``kind``, or ``_ABSENT`` when it is not of that kind."""
    if kind == "string":
        return value if isinstance(value, str) else _ABSENT
    if kind == "boolean":
        return value if isinstance(value, bool) else _ABSENT
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
            return int(value)
        return _ABSENT
    if kind == "number":
        if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        return _ABSENT
    if kind.startswith("["):
        if not isinstance(value, list):
            return _ABSENT
        item_kind = kind[1:-1]
        items = [_value(item, item_kind) for item in value]
        return [item for item in items if item is not _ABSENT]
    if not isinstance(value, dict):
        return _ABSENT
    return _object(value, kind)


def _object(value: Mapping[str, Any], kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    defaults = _DEFAULTS.get(kind, {})
    for name, field_kind in OBJECTS[kind]:
        normal = _value(value[name], field_kind) if name in value else _ABSENT
        if normal is _ABSENT:
            if name in defaults:
                out[name] = defaults[name]
            continue
        out[name] = normal
    return out


# ------------------------------------------------------------------------------------------ schema


def _schema_of(kind: str) -> dict[str, Any]:
    if kind in _SCALARS:
        return {"type": kind}
    if kind.startswith("["):
        return {"type": "array", "items": _schema_of(kind[1:-1])}
    return {"$ref": f"#/$defs/{kind}"}


def member_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the member, from :data:`OBJECTS` (what the shipped file holds).

    Unknown members are allowed everywhere (``additionalProperties`` is left open): a reader that checks
    against it keeps working when a later gateway adds a field."""
    defs: dict[str, Any] = {}
    for name, fields in OBJECTS.items():
        definition: dict[str, Any] = {
            "type": "object",
            "properties": {field: _schema_of(kind) for field, kind in fields},
        }
        if name in _DEFAULTS:
            definition["required"] = list(_DEFAULTS[name])
        defs[name] = definition
    properties: dict[str, Any] = {
        "v": {"type": "integer", "description": f"the extension's version ({MEMBER_VERSION})"},
        "type": {"type": "string", "description": "Meta's message type, as sent"},
        "wamid": {"type": "string", "description": "the inbound WhatsApp message id"},
        "profile_name": {"type": "string", "description": "the sender's WhatsApp profile name"},
        "context": _schema_of("context"),
        "referral": _schema_of("referral"),
    }
    for kind, object_kind in TYPE_OBJECTS.items():
        properties[kind] = _schema_of(object_kind)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:mogateway:callback:whatsapp:v{MEMBER_VERSION}",
        "title": "WhatsAppMember",
        "description": "The callback's `whatsapp` member (docs/contract.md): one WhatsApp message, typed. "
        "Members are written in the order of `properties`; one object named after `type` at most.",
        "type": "object",
        "required": ["v", "type", "wamid"],
        "properties": properties,
        "$defs": defs,
    }
