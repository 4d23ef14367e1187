"""Rich WhatsApp answers, pure: what an application may answer instead of text on the WhatsApp channel,
checked against Meta's published limits, and how such an answer is kept as the reply.

Rules stated before the code:

* A WhatsApp answer with ``Content-Type: application/json`` whose body is ``{"whatsapp": M}`` or
  ``{"whatsapp": [M, ...]}`` (1 to :data:`MAX_MESSAGES`) is a rich answer. Each ``M`` is one Cloud API
  message object without the members the gateway sets (``to``, ``messaging_product``,
  ``recipient_type``, ``context``): ``type`` and the one member it names — ``text``, ``interactive``
  (``button``, ``list`` or ``cta_url``), ``image|document|audio|video|sticker`` (by ``link`` or media
  ``id``), ``location``, ``contacts`` or ``reaction`` — and optionally ``biz_opaque_callback_data``.
  Nothing else is accepted: a member Meta would refuse is refused here first, with its path.
* Every limit is written once, in :data:`LIMITS`, with Meta's page it comes from. Lengths are counted
  in characters (code points) except a text body, counted as ``core.whatsapp_send`` counts its parts
  (UTF-16 units, the strictest reading). Ids of buttons and of list rows are unique within their message,
  and so are button titles (Meta's reply-buttons page).
* A checked answer is kept as the reply text ``RICH_MARK + JSON array`` (:func:`encode_reply`), in the
  journal's ``reply_text`` like any reply, so it survives a restart between the answer and the send. A
  text reply can never begin with :data:`RICH_MARK` (U+001E, which ``str.strip`` removes from every text
  answer), so the two never mix: :func:`decode_reply` returns the messages, or None for a text reply.
* The messages are sent in order, the first as a reply to the inbound message (``context``), as a
  split text is.
"""

from __future__ import annotations

import math
from typing import Any, Final

import orjson

from mogateway.core.whatsapp_send import MAX_TEXT_UNITS, utf16_units

__all__ = [
    "LIMITS",
    "MAX_MESSAGES",
    "MEDIA_TYPES",
    "MESSAGE_TYPES",
    "RICH_MARK",
    "RichAnswerError",
    "check_answer",
    "check_message",
    "decode_reply",
    "describe",
    "encode_reply",
]

#: The first character of a stored rich reply (never the first of a stripped text reply).
RICH_MARK: Final = "\x1e"
#: At most this many messages in one answer (the gateway's own bound: a reply, not a campaign).
MAX_MESSAGES: Final = 5

_BUTTONS = (
    "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-reply-buttons-messages"
)
_LIST = "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-list-messages"
_CTA = "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-cta-url-messages"
_MEDIA = "https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages#media-object"
_TEXT = "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages"
_OPAQUE = "https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages"
_LOCATION = "https://developers.facebook.com/docs/whatsapp/cloud-api/messages/location-messages"

#: Meta's published limits, in characters (each with the page that states it; the one bound of the
#: gateway's own is marked so).
LIMITS: Final[dict[str, int]] = {
    "text.body": MAX_TEXT_UNITS,  # _TEXT: "Maximum 4096 characters"
    "interactive.body.text": 1024,  # _BUTTONS, _LIST, _CTA: body text "Maximum 1024 characters"
    "interactive.header.text": 60,  # _BUTTONS, _LIST, _CTA: header text "Maximum 60 characters"
    "interactive.footer.text": 60,  # _BUTTONS, _LIST, _CTA: footer text "Maximum 60 characters"
    "button.count": 3,  # _BUTTONS: "up to three predefined replies"
    "button.title": 20,  # _BUTTONS: button label text "Maximum 20 characters"
    "button.id": 256,  # _BUTTONS: button ID "Maximum 256 characters"
    "list.button": 20,  # _LIST: button label text "Maximum 20 characters"
    "list.sections": 10,  # _LIST: "Maximum 10 sections"
    "list.rows": 10,  # _LIST: "Maximum 10 rows" across all sections
    "list.section.title": 24,  # _LIST: section title "Maximum 24 characters"
    "list.row.id": 200,  # _LIST: row ID "Maximum 200 characters"
    "list.row.title": 24,  # _LIST: row title "Maximum 24 characters"
    "list.row.description": 72,  # _LIST: row description "Maximum 72 characters"
    "cta_url.display_text": 20,  # _CTA: button label text "Maximum 20 characters"
    "media.caption": 1024,  # _MEDIA: caption "Maximum 1024 characters" (image, video, document)
    "media.filename": 240,  # the gateway's own bound (_MEDIA states none): a file name, not a text
    "biz_opaque_callback_data": 512,  # _OPAQUE: "Maximum 512 characters"
    "location.text": 1000,  # the gateway's own bound on a location's name and address (_LOCATION: none)
    "url": 2000,  # the gateway's own bound on a link or a cta_url (Meta states none)
}

MEDIA_TYPES: Final = ("image", "document", "audio", "video", "sticker")
#: Which media types take a caption and a file name (_MEDIA).
_CAPTIONED: Final = frozenset({"image", "document", "video"})
MESSAGE_TYPES: Final = ("text", "interactive", *MEDIA_TYPES, "location", "contacts", "reaction")
#: Members the gateway sets itself: an answer naming one is refused, never silently changed.
_GATEWAY_SETS: Final = ("to", "messaging_product", "recipient_type", "context")
_INTERACTIVE_TYPES: Final = ("button", "list", "cta_url")
#: Header types per interactive type (_BUTTONS, _CTA: text or media; _LIST: text only).
_HEADERS: Final[dict[str, tuple[str, ...]]] = {
    "button": ("text", "image", "video", "document"),
    "list": ("text",),
    "cta_url": ("text", "image", "video", "document"),
}


class RichAnswerError(ValueError):
    """A rich answer that breaks a rule: ``path`` names the member (``whatsapp[1].interactive...``)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# ------------------------------------------------------------------------------------------ the answer


def check_answer(data: Any) -> tuple[dict[str, Any], ...]:
    """The messages of a decoded JSON answer ``{"whatsapp": M | [M, ...]}``, each checked; raises
    :class:`RichAnswerError` naming the first bad member."""
    if not isinstance(data, dict) or "whatsapp" not in data:
        raise RichAnswerError("body", 'must be a JSON object with a "whatsapp" member')
    extra = sorted(set(data) - {"whatsapp"})
    if extra:
        raise RichAnswerError("body", f"has members besides whatsapp: {', '.join(extra)}")
    value = data["whatsapp"]
    if isinstance(value, dict):
        return (check_message(value, "whatsapp"),)
    if not isinstance(value, list):
        raise RichAnswerError("whatsapp", "must be a message object or a list of them")
    if not 1 <= len(value) <= MAX_MESSAGES:
        raise RichAnswerError("whatsapp", f"must hold 1 to {MAX_MESSAGES} messages, not {len(value)}")
    return tuple(check_message(m, f"whatsapp[{i}]") for i, m in enumerate(value))


def check_message(message: Any, path: str = "whatsapp") -> dict[str, Any]:
    """One Cloud API message object (module docstring), returned as given when it keeps every rule."""
    if not isinstance(message, dict):
        raise RichAnswerError(path, "must be a JSON object")
    for member in _GATEWAY_SETS:
        if member in message:
            raise RichAnswerError(f"{path}.{member}", "is set by the gateway; leave it out")
    kind = message.get("type")
    if kind not in MESSAGE_TYPES:
        raise RichAnswerError(f"{path}.type", f"must be one of {', '.join(MESSAGE_TYPES)}")
    extra = sorted(set(message) - {"type", kind, "biz_opaque_callback_data"})
    if extra:
        raise RichAnswerError(path, f"a {kind} message has no member {', '.join(extra)}")
    if "biz_opaque_callback_data" in message:
        _text(message, "biz_opaque_callback_data", path, LIMITS["biz_opaque_callback_data"])
    content = message.get(kind)
    where = f"{path}.{kind}"
    if kind == "contacts":
        _contacts(content, where)
        return message
    if not isinstance(content, dict):
        raise RichAnswerError(where, "is required and must be an object")
    if kind == "text":
        _only(content, where, "body", "preview_url")
        body = _text(content, "body", where, None)
        if utf16_units(body) > LIMITS["text.body"]:
            raise RichAnswerError(f"{where}.body", f"is longer than {LIMITS['text.body']} characters")
        _flag(content, "preview_url", where)
    elif kind in MEDIA_TYPES:
        _media(content, where, kind)
    elif kind == "location":
        _location(content, where)
    elif kind == "reaction":
        _only(content, where, "message_id", "emoji")
        _text(content, "message_id", where, None)
        emoji = content.get("emoji")
        if not isinstance(emoji, str):  # "" removes a reaction
            raise RichAnswerError(f"{where}.emoji", "is required and must be a string")
    else:
        _interactive(content, where)
    return message


# ------------------------------------------------------------------------------------------ types


def _interactive(content: dict[str, Any], where: str) -> None:
    _only(content, where, "type", "header", "body", "footer", "action")
    kind = content.get("type")
    if kind not in _INTERACTIVE_TYPES:
        raise RichAnswerError(f"{where}.type", f"must be one of {', '.join(_INTERACTIVE_TYPES)}")
    body = _object(content, "body", where, required=True)
    _only(body, f"{where}.body", "text")
    _text(body, "text", f"{where}.body", LIMITS["interactive.body.text"])
    footer = _object(content, "footer", where)
    if footer is not None:
        _only(footer, f"{where}.footer", "text")
        _text(footer, "text", f"{where}.footer", LIMITS["interactive.footer.text"])
    header = _object(content, "header", where)
    if header is not None:
        _header(header, f"{where}.header", _HEADERS[kind])
    action = _object(content, "action", where, required=True)
    if kind == "button":
        _buttons(action, f"{where}.action")
    elif kind == "list":
        _list(action, f"{where}.action")
    else:
        _cta_url(action, f"{where}.action")


def _header(header: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    kind = header.get("type")
    if kind not in allowed:
        raise RichAnswerError(f"{where}.type", f"must be one of {', '.join(allowed)}")
    _only(header, where, "type", kind)
    if kind == "text":
        _text(header, "text", where, LIMITS["interactive.header.text"])
        return
    media = _object(header, kind, where, required=True)
    _media(media, f"{where}.{kind}", kind, caption=False)


def _buttons(action: dict[str, Any], where: str) -> None:
    _only(action, where, "buttons")
    buttons = action.get("buttons")
    limit = LIMITS["button.count"]
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= limit:
        raise RichAnswerError(f"{where}.buttons", f"must be a list of 1 to {limit} buttons")
    ids: set[str] = set()
    titles: set[str] = set()
    for i, button in enumerate(buttons):
        at = f"{where}.buttons[{i}]"
        if not isinstance(button, dict) or button.get("type") != "reply":
            raise RichAnswerError(f"{at}.type", "must be reply")
        _only(button, at, "type", "reply")
        reply = _object(button, "reply", at, required=True)
        _only(reply, f"{at}.reply", "id", "title")
        bid = _text(reply, "id", f"{at}.reply", LIMITS["button.id"])
        title = _text(reply, "title", f"{at}.reply", LIMITS["button.title"])
        if bid in ids:
            raise RichAnswerError(f"{at}.reply.id", f"{bid!r} is used by another button")
        if title in titles:
            raise RichAnswerError(f"{at}.reply.title", f"{title!r} is used by another button")
        ids.add(bid)
        titles.add(title)


def _list(action: dict[str, Any], where: str) -> None:
    _only(action, where, "button", "sections")
    _text(action, "button", where, LIMITS["list.button"])
    sections = action.get("sections")
    limit = LIMITS["list.sections"]
    if not isinstance(sections, list) or not 1 <= len(sections) <= limit:
        raise RichAnswerError(f"{where}.sections", f"must be a list of 1 to {limit} sections")
    ids: set[str] = set()
    rows_total = 0
    for s, section in enumerate(sections):
        at = f"{where}.sections[{s}]"
        if not isinstance(section, dict):
            raise RichAnswerError(at, "must be an object")
        _only(section, at, "title", "rows")
        if len(sections) > 1 or "title" in section:  # required when there are several (_LIST)
            _text(section, "title", at, LIMITS["list.section.title"])
        rows = section.get("rows")
        if not isinstance(rows, list) or not rows:
            raise RichAnswerError(f"{at}.rows", "must be a non-empty list")
        for r, row in enumerate(rows):
            rat = f"{at}.rows[{r}]"
            if not isinstance(row, dict):
                raise RichAnswerError(rat, "must be an object")
            _only(row, rat, "id", "title", "description")
            rid = _text(row, "id", rat, LIMITS["list.row.id"])
            _text(row, "title", rat, LIMITS["list.row.title"])
            if "description" in row:
                _text(row, "description", rat, LIMITS["list.row.description"], empty=True)
            if rid in ids:
                raise RichAnswerError(f"{rat}.id", f"{rid!r} is used by another row")
            ids.add(rid)
        rows_total += len(rows)
    if rows_total > LIMITS["list.rows"]:
        raise RichAnswerError(
            f"{where}.sections", f"hold {rows_total} rows; at most {LIMITS['list.rows']} in all"
        )


def _cta_url(action: dict[str, Any], where: str) -> None:
    _only(action, where, "name", "parameters")
    if action.get("name") != "cta_url":
        raise RichAnswerError(f"{where}.name", "must be cta_url")
    params = _object(action, "parameters", where, required=True)
    _only(params, f"{where}.parameters", "display_text", "url")
    _text(params, "display_text", f"{where}.parameters", LIMITS["cta_url.display_text"])
    _url(params, "url", f"{where}.parameters")


def _media(content: dict[str, Any], where: str, kind: str, *, caption: bool = True) -> None:
    allowed = ["id", "link"]
    if caption and kind in _CAPTIONED:
        allowed.append("caption")
    if caption and kind == "document":
        allowed.append("filename")
    _only(content, where, *allowed)
    if ("id" in content) == ("link" in content):
        raise RichAnswerError(where, "needs exactly one of id (an uploaded media id) and link")
    if "id" in content:
        _text(content, "id", where, None)
    else:
        _url(content, "link", where)
    if "caption" in content:
        _text(content, "caption", where, LIMITS["media.caption"])
    if "filename" in content:
        _text(content, "filename", where, LIMITS["media.filename"])


def _location(content: dict[str, Any], where: str) -> None:
    _only(content, where, "latitude", "longitude", "name", "address")
    for member, bound in (("latitude", 90.0), ("longitude", 180.0)):
        value = content.get(member)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RichAnswerError(f"{where}.{member}", "is required and must be a number")
        if not -bound <= value <= bound:
            raise RichAnswerError(f"{where}.{member}", f"must be within ±{bound:g}")
    for member in ("name", "address"):
        if member in content:
            _text(content, member, where, LIMITS["location.text"])


def _contacts(content: Any, where: str) -> None:
    if not isinstance(content, list) or not content:
        raise RichAnswerError(where, "must be a non-empty list of contact cards")
    for i, card in enumerate(content):
        at = f"{where}[{i}]"
        if not isinstance(card, dict):
            raise RichAnswerError(at, "must be an object")
        _only(card, at, "name", "phones", "emails", "org", "urls", "addresses", "birthday")
        name = _object(card, "name", at, required=True)
        _text(name, "formatted_name", f"{at}.name", None)  # the one required member (Meta)
        for member in ("phones", "emails", "urls", "addresses"):
            value = card.get(member)
            if value is not None and (
                not isinstance(value, list) or not all(isinstance(v, dict) for v in value)
            ):
                raise RichAnswerError(f"{at}.{member}", "must be a list of objects")


# ------------------------------------------------------------------------------------------ members


def _only(obj: dict[str, Any], where: str, *allowed: str) -> None:
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise RichAnswerError(
            f"{where}.{extra[0]}", f"is not a member Meta accepts here ({', '.join(allowed)})"
        )


def _object(obj: dict[str, Any], member: str, where: str, *, required: bool = False) -> Any:
    value = obj.get(member)
    if value is None:
        if required:
            raise RichAnswerError(f"{where}.{member}", "is required")
        return None
    if not isinstance(value, dict):
        raise RichAnswerError(f"{where}.{member}", "must be an object")
    return value


def _text(obj: dict[str, Any], member: str, where: str, limit: int | None, *, empty: bool = False) -> str:
    value = obj.get(member)
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise RichAnswerError(f"{where}.{member}", "is required and must be a non-blank string")
    if limit is not None and len(value) > limit:
        raise RichAnswerError(f"{where}.{member}", f"is {len(value)} characters; at most {limit}")
    return value


def _flag(obj: dict[str, Any], member: str, where: str) -> None:
    if member in obj and not isinstance(obj[member], bool):
        raise RichAnswerError(f"{where}.{member}", "must be true or false")


def _url(obj: dict[str, Any], member: str, where: str) -> None:
    value = _text(obj, member, where, LIMITS["url"])
    if not value.startswith(("https://", "http://")) or any(c.isspace() for c in value):
        raise RichAnswerError(f"{where}.{member}", "must be an http(s) URL")


# ------------------------------------------------------------------------------------------ storage


def encode_reply(messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    """The reply text that stands for ``messages`` (module docstring)."""
    return RICH_MARK + orjson.dumps(list(messages)).decode()


def decode_reply(text: str) -> tuple[dict[str, Any], ...] | None:
    """The messages of a rich reply text, or None for a text reply."""
    if not text.startswith(RICH_MARK):
        return None
    data = orjson.loads(text[len(RICH_MARK) :])
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ValueError("a rich reply must be a JSON array of message objects")
    return tuple(data)


def describe(messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[str]:
    """Each message's kind, for the timeline and the CLI: ``interactive button``, ``image``…"""
    kinds = []
    for m in messages:
        kind = str(m.get("type"))
        content = m.get(kind)
        if kind == "interactive" and isinstance(content, dict):
            kind = f"interactive {content.get('type')}"
        kinds.append(kind)
    return kinds
