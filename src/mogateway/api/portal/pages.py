"""The portal's reading pages: Overview, Messages, one message, Audit. Every read goes through the
visit's :class:`~mogateway.service.client_scope.ClientScope`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from mogateway.api.console.messages import MEDIA_LINK_S, event_details, summarize
from mogateway.api.console.web import path
from mogateway.api.portal.web import (
    PortalRoute,
    context,
    html,
    not_found,
    page,
    redirect,
    render,
    state_of,
    visit_of,
)
from mogateway.api.views.messages import message_json
from mogateway.core.media_url import sign
from mogateway.core.message import CHANNELS
from mogateway.core.numbering import NumberRejected, normalize_msisdn
from mogateway.core.ports import MessageFilter
from mogateway.core.timeline import STATES, State
from mogateway.core.whatsapp_media import is_media_member
from mogateway.service.client_scope import ClientScope

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)

_PAGE = 50
#: The Overview's figures are sent again this often (one scoped read of two small queries each time).
LIVE_S = 5
_STREAM_S = 55


def midnight(now: float) -> float:
    """Today's midnight in the gateway's time zone, as unix seconds."""
    local = datetime.fromtimestamp(now).astimezone()
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


async def _figures(scope: ClientScope) -> dict[str, Any]:
    """Today and the last hour, from one read: the two sections always agree. In the first hour after
    midnight the last hour is cut at midnight (it is then "since midnight"), so that it stays a part
    of today."""
    now = time.time()
    since = midnight(now)
    today, hour = await scope.traffic(since, now - 3600, now + 1)
    return {"today": today, "hour": hour, "hour_cut": now - 3600 < since}


@router.get("/")
async def overview(request: Request) -> Response:
    visit = await page(request)
    figures = await _figures(visit.scope)
    return html("overview.html", await context(request, visit, "overview", live_s=LIVE_S, **figures))


@router.get("/live/overview")
async def live_overview(request: Request) -> Response:
    """Server-Sent Events: the Overview's figures every :data:`LIVE_S` seconds (console.js puts them in
    place); the stream ends after a while (the browser reconnects) and at once when the session ends."""
    visit = await visit_of(request)
    if visit is None:
        return Response(status_code=401, headers={"cache-control": "no-store"})
    sessions = state_of(request).sessions
    session_id = visit.session.id

    async def events() -> AsyncIterator[bytes]:
        yield b"retry: 5000\n\n"
        ends = time.monotonic() + _STREAM_S
        while time.monotonic() < ends and await sessions.get(session_id) is not None:
            fragment = render("_overview.html", await _figures(visit.scope))
            yield b"data: " + orjson.dumps({"fragments": {"overview-live": fragment}}) + b"\n\n"
            await asyncio.sleep(LIVE_S)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def _local(value: str, field: str) -> float | None:
    if not value.strip():
        return None
    try:
        return datetime.fromisoformat(value.strip()).astimezone().timestamp()
    except ValueError:
        raise ValueError(f"{field}: not a date and time") from None


def _before(value: str) -> tuple[float, str] | None:
    """The keyset cursor of "Older messages": ``<received_at>~<id>``."""
    at, sep, message_id = value.partition("~")
    if not sep:
        return None
    try:
        return float(at), message_id[:128]
    except ValueError:
        return None


@router.get("/messages")
async def messages(request: Request) -> Response:
    visit = await page(request)
    keys = ("msisdn", "shortcode", "state", "channel", "from", "to")
    q = {k: request.query_params.get(k, "")[:100] for k in keys}
    before = _before(request.query_params.get("before", ""))
    error = None
    found: list[dict[str, Any]] = []
    next_url = None
    try:
        msisdn = q["msisdn"].strip() or None
        if msisdn:
            try:
                msisdn = normalize_msisdn(msisdn)
            except NumberRejected:
                pass  # rejected messages are stored with the msisdn as it was sent
        state = State(q["state"]) if q["state"] else None
        channel = q["channel"] if q["channel"] in CHANNELS else None
        where = MessageFilter(
            shortcode="".join(q["shortcode"].split()) or None,
            msisdn=msisdn,
            state=state,
            since=_local(q["from"], "From"),
            until=_local(q["to"], "To"),
            before=before,
            limit=_PAGE,
            channel=channel,
        )
        records = await visit.scope.messages(where)
        found = [message_json(r) for r in records]
        if len(records) == _PAGE:
            last = records[-1]
            query = {k: v for k, v in q.items() if v}
            cursor = f"{last.message.received_at!r}~{last.message.id}"
            next_url = "/portal/messages?" + urlencode({**query, "before": cursor})
    except ValueError as exc:
        error = str(exc)
    ctx = await context(
        request,
        visit,
        "messages",
        q=q,
        states=[s.value for s in STATES],
        channels=CHANNELS,
        found=found,
        next_url=next_url,
        paged=before is not None,
    )
    ctx["error"] = error
    return html("messages.html", ctx, status=422 if error else 200)


@router.get("/messages/{message_id}")
async def message_page(request: Request, message_id: str) -> Response:
    visit = await page(request)
    found = await visit.scope.history(message_id)
    if found is None:
        return await not_found(request, visit, "such message")
    message = message_json(*found)
    ctx = await context(
        request, visit, "messages", message=message, summary=summarize(message), details=event_details
    )
    return html("message.html", ctx)


@router.get("/messages/{message_id}/media")
async def media(request: Request, message_id: str) -> Response:
    """ "Open media" of the client's own WhatsApp media message: sent on to the media route with a URL
    signed for this client, valid a minute (api.whatsapp_media streams it). The message is found through
    the visit's scope, so another client's message is not found, as one that does not exist."""
    visit = await page(request)
    found = await visit.scope.history(message_id)
    keys = state_of(request).gateway.media_url_keys
    member = None if found is None else found[0].message.whatsapp
    if member is None or not is_media_member(member) or not keys:
        return await not_found(request, visit, "such media")
    client = visit.scope.client_id
    exp = int(time.time()) + MEDIA_LINK_S
    target = path("/v1/whatsapp/media/{}", message_id)
    return redirect(f"{target}?client={client}&exp={exp}&sig={sign(keys[0], message_id, client, exp)}")


@router.get("/audit")
async def audit(request: Request) -> Response:
    visit = await page(request)
    entries = await visit.scope.audit()
    return html("audit.html", await context(request, visit, "audit", entries=entries))
