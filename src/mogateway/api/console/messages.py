"""The Messages page: search (keyset paging through the API's ``next``), one message, replay."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.console import whatsapp_view
from mogateway.api.console.render import html
from mogateway.api.console.web import (
    ConsoleRoute,
    guard,
    not_found,
    page_context,
    page_session,
    path,
    redirect,
    state_of,
)
from mogateway.core.media_url import sign
from mogateway.core.message import CHANNELS
from mogateway.core.timeline import REPLAYABLE_STATES, STATES

__all__ = ["router", "summarize"]

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)


def _local_iso(value: str, field: str) -> str | None:
    """A datetime-local value (gateway time) as ISO 8601 with the gateway's UTC offset."""
    if not value.strip():
        return None
    try:
        return datetime.fromisoformat(value.strip()).astimezone().isoformat()
    except ValueError:
        raise ValueError(f"{field}: not a date and time") from None


@router.get("/messages")
async def messages(request: Request) -> Response:
    session = await page_session(request)
    state = state_of(request)
    keys = ("msisdn", "shortcode", "client", "state", "channel", "from", "to")
    q = {k: request.query_params.get(k, "") for k in keys}
    before = request.query_params.get("before", "")
    error = None
    found: dict[str, Any] = {"messages": [], "next": None}
    try:
        params = {
            "msisdn": q["msisdn"].strip(),
            "shortcode": q["shortcode"].strip(),
            "client": q["client"],
            "state": q["state"],
            "channel": q["channel"],
            "since": _local_iso(q["from"], "From"),
            "until": _local_iso(q["to"], "To"),
            "before": before,
            "limit": 50,
        }
        status, data = await state.api("GET", "/v1/messages", params=params)
        if status == 200:
            found = data
        else:
            error = data["detail"]
    except ValueError as exc:
        error = str(exc)
    _, listing = await state.api("GET", "/v1/clients")
    names = {c["id"]: c["name"] for c in listing["clients"]}
    query = {k: v for k, v in q.items() if v}
    next_url = None
    if found.get("next"):
        next_url = "/console/messages?" + urlencode({**query, "before": found["next"]})
    context = await page_context(
        request,
        session,
        "messages",
        q=q,
        clients=listing["clients"],
        names=names,
        states=[s.value for s in STATES],
        channels=CHANNELS,
        found=found["messages"],
        next_url=next_url,
        paged=bool(before),
        first_url="/console/messages" + ("?" + urlencode(query) if query else ""),
    )
    context["error"] = error
    return html("messages.html", context, status=422 if error else 200)


def summarize(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a timeline an operator looks for: the last callback, the reply, the receipts."""
    timeline = message.get("timeline", [])
    outcomes = [e for e in timeline if e["event"] == "outcome"]
    attempts = [e for e in timeline if e["event"] == "attempt"]
    submitted = [e for e in timeline if e["event"] in ("reply_submitted", "reply_failed")]
    routed = [e for e in timeline if e["event"] == "routed"]
    received = [e for e in timeline if e["event"] in ("received", "rejected")]
    return {
        "notes": received[0].get("notes", []) if received else [],
        "client": routed[-1].get("client") if routed else None,
        "outcome": outcomes[-1] if outcomes else None,
        "attempts": attempts,
        "reply": submitted[-1] if submitted else None,
        "receipts": [e for e in timeline if e["event"] == "delivery"],
        "replays": sum(1 for e in timeline if e["event"] == "replay"),
    }


def event_details(event: dict[str, Any]) -> list[tuple[str, Any]]:
    """The fields of a timeline event other than its time and kind, for the timeline table."""
    return [(k, v) for k, v in event.items() if k not in ("at", "event")]


@router.get("/messages/{message_id}")
async def message_page(request: Request, message_id: str) -> Response:
    session = await page_session(request)
    status, message = await state_of(request).api("GET", path("/v1/messages/{}", message_id))
    if status != 200:
        return await not_found(request, session, "messages", f"message {message_id}")
    context = await page_context(
        request,
        session,
        "messages",
        message=message,
        summary=summarize(message),
        details=event_details,
        replayable=message["state"] in REPLAYABLE_STATES,
        wa_facts=whatsapp_view.whatsapp_facts(message.get("whatsapp")),
    )
    return html("message.html", context)


#: How long the URL the console signs for the operator's "open media" link lives.
MEDIA_LINK_S = 60
#: The ``client`` of a URL signed for the operator (api.whatsapp_media.OPERATOR: never a client id).
_OPERATOR = "operator"


@router.get("/messages/{message_id}/media")
async def media(request: Request, message_id: str) -> Response:
    """The "open media" link of a WhatsApp media message: a signed-in operator is sent to the media
    route with a URL signed for the operator, valid a minute (api.whatsapp_media streams it)."""
    session = await page_session(request)
    keys = state_of(request).gateway.media_url_keys
    if not keys:
        return await not_found(request, session, "messages", f"media of message {message_id}")
    exp = int(time.time()) + MEDIA_LINK_S
    target = path("/v1/whatsapp/media/{}", message_id)
    return redirect(f"{target}?client={_OPERATOR}&exp={exp}&sig={sign(keys[0], message_id, _OPERATOR, exp)}")


@router.post("/messages/{message_id}/replay")
async def replay(request: Request, message_id: str) -> Response:
    session, _ = await guard(request)
    status, data = await state_of(request).api("POST", path("/v1/messages/{}/replay", message_id))
    if status == 202:
        await state_of(request).sessions.flash(
            session, "info", "Replayed: the message is queued and its callback will be called again."
        )
    elif status == 404:
        return await not_found(request, session, "messages", f"message {message_id}")
    else:
        await state_of(request).sessions.flash(session, "error", data["detail"])
    return redirect(path("/console/messages/{}", message_id))
