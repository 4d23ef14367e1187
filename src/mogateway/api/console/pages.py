"""The Overview and Binds pages, and the Server-Sent Events stream that keeps their figures live."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from mogateway.api.console.render import html, render
from mogateway.api.console.web import (
    ConsoleRoute,
    ConsoleState,
    page_context,
    page_session,
    session_of,
    state_of,
)

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)

_STREAM_S = 55  # a live stream ends after this and the browser reconnects: none outlives a restart long


@router.get("/")
async def overview(request: Request) -> Response:
    session = await page_session(request)
    stats = await state_of(request).stats.snapshot("today")
    return html("overview.html", await page_context(request, session, "overview", stats=stats))


@router.get("/binds")
async def binds(request: Request) -> Response:
    session = await page_session(request)
    live = await state_of(request).live()
    return html("binds.html", await page_context(request, session, "binds", live=live))


async def fragments(state: ConsoleState, page: str) -> dict[str, str]:
    """The parts of ``page`` that change by themselves, rendered: element id -> inner HTML."""
    stats = state.stats
    if page == "overview":
        doc = await stats.snapshot("today")
        return {
            "traffic": render("_traffic.html", {"stats": doc}),
            "figures": render("_figures.html", {"stats": doc}),
        }
    return {"binds-live": render("_binds.html", {"live": await state.live()})}


@router.get("/live/{page}")
async def live(request: Request, page: str) -> Response:
    """Server-Sent Events: the page's live fragments every second (each an event of JSON)."""
    session = await session_of(request)
    if session is None or page not in ("overview", "binds"):
        return Response(status_code=401 if session is None else 404, headers={"cache-control": "no-store"})
    state = state_of(request)
    session_id = session.id

    async def events() -> AsyncIterator[bytes]:
        yield b"retry: 2000\n\n"
        ends = time.monotonic() + _STREAM_S
        # Signed out (through any worker or node): the stream ends within a second.
        while time.monotonic() < ends and await state.sessions.get(session_id) is not None:
            data = orjson.dumps({"fragments": await fragments(state, page)})
            yield b"data: " + data + b"\n\n"
            await asyncio.sleep(1.0)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
