"""Signing in and out of the console (see sessions.py for the rules of sessions and the throttle)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.browser.sessions import (
    CONSOLE,
    safe_next,
    same_secret,
    signed_in,
    signed_out,
    signin_form_ok,
    throttled,
)
from mogateway.api.browser.signin import EXPIRED, client_address, signin_form
from mogateway.api.console.render import console_pages
from mogateway.api.console.web import ConsoleRoute, guard, read_form, redirect, session_of, state_of

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)


@router.get("")
async def console_root() -> Response:
    return redirect("/console/")


@router.get("/login")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await session_of(request) is not None:
        return redirect(safe_next(CONSOLE, next))
    return _signin_form(request, next, None, 200)


def _signin_form(request: Request, next_: str | None, error: str | None, status: int) -> Response:
    return signin_form(request, CONSOLE, console_pages, next_, error, status)


@router.post("/login")
async def signin(request: Request) -> Response:
    state = state_of(request)
    form = await read_form(request)
    next_ = form.get("next")
    if not signin_form_ok(request, CONSOLE, form):
        return _signin_form(request, next_, EXPIRED, 403)
    address = client_address(request)
    wait = await state.throttle.wait_s(address)
    if wait > 0:
        return _signin_form(request, next_, throttled(wait), 429)
    if not same_secret(form.get("token", "").strip(), state.gateway.admin_token):
        await state.throttle.failed(address)
        return _signin_form(request, next_, "That is not the admin token.", 401)
    session = await state.sessions.create()
    return signed_in(request, CONSOLE, session.id, state.sessions.lifetime_s, next_)


@router.post("/logout")
async def signout(request: Request) -> Response:
    session, _ = await guard(request)
    await state_of(request).sessions.end(session.id)
    return signed_out(CONSOLE)


@router.post("/logout/everywhere")
async def signout_everywhere(request: Request) -> Response:
    """Every session ends, this one and every other browser's, on every worker and node."""
    await guard(request)
    await state_of(request).sessions.end_all()
    return signed_out(CONSOLE)
