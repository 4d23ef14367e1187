"""Rich WhatsApp answers for a handler: buttons, lists, media, a location, contacts, a reaction.

A handler of a WhatsApp callback may return a :class:`WhatsAppAnswer` instead of text; the endpoint
answers it as ``application/json`` ``{"whatsapp": [...]}`` and the gateway sends the messages in order,
the first as a reply to the person's message (docs/contract.md, "Rich WhatsApp answers").

Rules stated before the code:

* Every builder checks its message with the gateway's own rules (``core.whatsapp_answer``: Meta's
  published limits), so a title one character too long fails in the application, at the line that built
  it, with :class:`~mogateway.core.whatsapp_answer.RichAnswerError` naming the member — not later as a
  ``bad_response`` in the gateway's timeline.
* Answers combine with ``+`` or :meth:`WhatsAppAnswer.of` into one of up to five messages.
* A rich answer is for the WhatsApp channel only. To an SMS callback the endpoint answers no reply and
  logs why (the gateway would record a JSON answer to an SMS as ``bad_response``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from mogateway.client.responses import CallbackResponse
from mogateway.core.whatsapp_answer import MAX_MESSAGES, RichAnswerError, check_answer, check_message

__all__ = ["JSON", "RichAnswerError", "WhatsAppAnswer"]

JSON = "application/json"

#: A list row: (id, title) or (id, title, description).
Row = tuple[str, str] | tuple[str, str, str]


class WhatsAppAnswer:
    """One to five Cloud API message objects, each checked when built. Immutable."""

    __slots__ = ("_messages",)

    def __init__(self, *messages: Mapping[str, Any]) -> None:
        checked = check_answer({"whatsapp": [dict(m) for m in messages]})
        self._messages = checked

    @property
    def messages(self) -> tuple[dict[str, Any], ...]:
        """The message objects, in the order they are sent."""
        return self._messages

    def __add__(self, other: WhatsAppAnswer) -> WhatsAppAnswer:
        return WhatsAppAnswer.of(self, other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WhatsAppAnswer) and other._messages == self._messages

    def __hash__(self) -> int:
        return hash(orjson.dumps(list(self._messages)))

    def __repr__(self) -> str:
        kinds = ", ".join(str(m.get("type")) for m in self._messages)
        return f"WhatsAppAnswer({kinds})"

    @classmethod
    def of(cls, *answers: WhatsAppAnswer) -> WhatsAppAnswer:
        """The messages of ``answers``, in order (at most five in all)."""
        messages = [m for a in answers for m in a.messages]
        if len(messages) > MAX_MESSAGES:
            raise RichAnswerError("whatsapp", f"must hold 1 to {MAX_MESSAGES} messages, not {len(messages)}")
        return cls(*messages)

    def body(self) -> bytes:
        """The answer's JSON body."""
        return orjson.dumps({"whatsapp": list(self._messages)})

    def response(self) -> CallbackResponse:
        """200 ``application/json`` with :meth:`body`."""
        return CallbackResponse(200, self.body(), {"content-type": JSON})

    # ------------------------------------------------------------------------------------ builders

    @classmethod
    def message(cls, message: Mapping[str, Any]) -> WhatsAppAnswer:
        """Any one Cloud API message object (without ``to``, ``messaging_product``, ``context``)."""
        return cls(check_message(dict(message)))

    @classmethod
    def text(cls, body: str, *, preview_url: bool = False) -> WhatsAppAnswer:
        """A text (at most 4,096 characters) — the same as a plain-text answer, but combinable."""
        return cls({"type": "text", "text": {"body": body, "preview_url": preview_url}})

    @classmethod
    def buttons(
        cls,
        body: str,
        buttons: Sequence[tuple[str, str]],
        *,
        header: str | None = None,
        footer: str | None = None,
    ) -> WhatsAppAnswer:
        """Up to three reply buttons, each ``(id, title)``; a tap comes back with the button's id."""
        action = {"buttons": [{"type": "reply", "reply": {"id": i, "title": t}} for i, t in buttons]}
        return cls(_interactive("button", body, action, header, footer))

    @classmethod
    def list(
        cls,
        body: str,
        button: str,
        rows: Sequence[Row] | Mapping[str, Sequence[Row]],
        *,
        header: str | None = None,
        footer: str | None = None,
    ) -> WhatsAppAnswer:
        """A list behind a ``button``: ``rows`` as ``(id, title[, description])``, or a mapping of
        section titles to rows (at most 10 rows in all)."""
        if isinstance(rows, Mapping):
            sections = [{"title": title, "rows": _rows(section)} for title, section in rows.items()]
        else:
            sections = [{"rows": _rows(rows)}]
        action = {"button": button, "sections": sections}
        return cls(_interactive("list", body, action, header, footer))

    @classmethod
    def cta_url(
        cls,
        body: str,
        display_text: str,
        url: str,
        *,
        header: str | None = None,
        footer: str | None = None,
    ) -> WhatsAppAnswer:
        """A button that opens ``url`` (``display_text`` at most 20 characters)."""
        action = {"name": "cta_url", "parameters": {"display_text": display_text, "url": url}}
        return cls(_interactive("cta_url", body, action, header, footer))

    @classmethod
    def image(
        cls, *, link: str | None = None, media_id: str | None = None, caption: str | None = None
    ) -> WhatsAppAnswer:
        """An image by ``link`` (a public https URL) or ``media_id`` (uploaded to Meta)."""
        return cls(_media("image", link, media_id, caption=caption))

    @classmethod
    def document(
        cls,
        *,
        link: str | None = None,
        media_id: str | None = None,
        caption: str | None = None,
        filename: str | None = None,
    ) -> WhatsAppAnswer:
        """A document (a PDF bill…) by ``link`` or ``media_id``; ``filename`` is what the person sees."""
        return cls(_media("document", link, media_id, caption=caption, filename=filename))

    @classmethod
    def video(
        cls, *, link: str | None = None, media_id: str | None = None, caption: str | None = None
    ) -> WhatsAppAnswer:
        return cls(_media("video", link, media_id, caption=caption))

    @classmethod
    def audio(cls, *, link: str | None = None, media_id: str | None = None) -> WhatsAppAnswer:
        return cls(_media("audio", link, media_id))

    @classmethod
    def sticker(cls, *, link: str | None = None, media_id: str | None = None) -> WhatsAppAnswer:
        return cls(_media("sticker", link, media_id))

    @classmethod
    def location(
        cls, latitude: float, longitude: float, *, name: str | None = None, address: str | None = None
    ) -> WhatsAppAnswer:
        content: dict[str, Any] = {"latitude": latitude, "longitude": longitude}
        if name is not None:
            content["name"] = name
        if address is not None:
            content["address"] = address
        return cls({"type": "location", "location": content})

    @classmethod
    def contact(
        cls, formatted_name: str, *, phones: Sequence[str] = (), emails: Sequence[str] = ()
    ) -> WhatsAppAnswer:
        """One contact card; use :meth:`message` for Meta's full contact object."""
        card: dict[str, Any] = {"name": {"formatted_name": formatted_name}}
        if phones:
            card["phones"] = [{"phone": p, "type": "WORK"} for p in phones]
        if emails:
            card["emails"] = [{"email": e, "type": "WORK"} for e in emails]
        return cls({"type": "contacts", "contacts": [card]})

    @classmethod
    def reaction(cls, message_id: str, emoji: str) -> WhatsAppAnswer:
        """React to a message (its wamid) with ``emoji``; ``""`` removes the reaction."""
        return cls({"type": "reaction", "reaction": {"message_id": message_id, "emoji": emoji}})


def _interactive(
    kind: str, body: str, action: dict[str, Any], header: str | None, footer: str | None
) -> dict[str, Any]:
    content: dict[str, Any] = {"type": kind}
    if header is not None:
        content["header"] = {"type": "text", "text": header}
    content["body"] = {"text": body}
    if footer is not None:
        content["footer"] = {"text": footer}
    content["action"] = action
    return {"type": "interactive", "interactive": content}


def _rows(rows: Sequence[Row]) -> Any:
    out = []
    for row in rows:
        item = {"id": row[0], "title": row[1]}
        if len(row) > 2:
            item["description"] = row[2]
        out.append(item)
    return out


def _media(
    kind: str,
    link: str | None,
    media_id: str | None,
    *,
    caption: str | None = None,
    filename: str | None = None,
) -> dict[str, Any]:
    content: dict[str, Any] = {}
    if media_id is not None:
        content["id"] = media_id
    if link is not None:
        content["link"] = link
    if caption is not None:
        content["caption"] = caption
    if filename is not None:
        content["filename"] = filename
    return {"type": kind, kind: content}
