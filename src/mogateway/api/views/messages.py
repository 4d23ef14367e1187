"""How the API shows messages: the JSON of a message and of its timeline, and times as ISO 8601.

The journal keeps a timeline compact (one row for a whole callback exchange, the stored time in the
message row); here it is spread out again the way people read it: received, stored, routed, each
attempt, outcome, reply... The entries ``stored``, ``routed`` and ``attempt`` are views of that data,
not events of ``core.timeline``.
"""

from __future__ import annotations

from typing import Any

import orjson

from mogateway.core.isotime import iso
from mogateway.core.ports import MessageRecord
from mogateway.core.timeline import Event, EventKind
from mogateway.core.whatsapp_answer import decode_reply

__all__ = ["iso", "message_json", "timeline_json"]


def timeline_json(events: list[Event]) -> list[dict[str, Any]]:
    """The timeline as people read it. The journal keeps it compact (one row for a whole callback
    exchange, the stored time inside the received row); here it is spread out again: received, stored,
    routed, each attempt, outcome, reply..."""
    out: list[dict[str, Any]] = []
    for ev in events:
        data = dict(ev.data)
        if ev.kind in (EventKind.RECEIVED, EventKind.REJECTED):
            stored_at = data.pop("stored_at", None)
            out.append({"at": iso(ev.at), "event": ev.kind.value, **data})
            if ev.kind is EventKind.RECEIVED and stored_at is not None:
                out.append({"at": iso(stored_at), "event": "stored"})
            continue
        if ev.kind is EventKind.OUTCOME and "routed_at" in data:
            routed_at = data.pop("routed_at")
            client = {"client_id": data.pop("client_id", None), "client": data.pop("client", None)}
            out.append({"at": iso(routed_at), "event": "routed", **client})
            for attempt in data.pop("attempts", []):
                attempt = dict(attempt)
                out.append({"at": iso(attempt.pop("at", routed_at)), "event": "attempt", **attempt})
        out.append({"at": iso(ev.at), "event": ev.kind.value, **data})
    return out


def shown_reply(reply_text: str | None) -> str | None:
    """A reply as people read it: a rich WhatsApp reply as the JSON array of its messages, without the
    mark it is kept with (``core.whatsapp_answer``); a text reply as it is."""
    if reply_text is None:
        return None
    rich = decode_reply(reply_text)
    return reply_text if rich is None else orjson.dumps(list(rich)).decode()


def message_json(record: MessageRecord, events: list[Event] | None = None) -> dict[str, Any]:
    """A message as the admin API shows it; with ``events``, its whole timeline too, and a WhatsApp MO's
    callback member (``whatsapp``, core.whatsapp_member) as the callback sends it."""
    m = record.message
    s = m.sender
    out: dict[str, Any] = {
        "id": m.id,
        "state": record.state.value,
        "origin": m.origin,
        "channel": m.channel,
        "source_id": m.source_id,
        "shortcode": m.shortcode,
        "msisdn": m.msisdn,
        "message": m.text,
        "sender": None
        if s is None
        else {"cc": s.cc, "ndc": s.ndc, "sn": s.sn, "operator": s.operator, "circle": s.circle},
        "received_at": iso(m.received_at),
        "stored_at": iso(record.stored_at),
        "updated_at": iso(record.updated_at),
        "client_id": record.client_id,
        "reply": shown_reply(record.reply_text),
    }
    if events is not None:
        out["timeline"] = timeline_json(events)
        if m.rejection is not None:
            out["rejection"] = {"field": m.rejection.field, "reason": m.rejection.reason}
        if m.whatsapp is not None:
            out["whatsapp"] = orjson.loads(m.whatsapp)
    return out
