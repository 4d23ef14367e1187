"""Signing in and out of the console (see sessions.py for the rules of sessions and the throttle)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.browser.sessions import (
    CONSOLE,
    safe_next,
    set_signin_cookie,
    signed_in,
    signed_out,
    signin_form_ok,
    signin_token,
    throttled,
)
from mogateway.api.console.render import html
from mogateway.api.console.sessions import same_secret
from mogateway.api.console.web import guard, read_form, redirect, session_of, state_of

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("")
async def console_root() -> Response:
    return redirect("/console/")


@router.get("/login")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await session_of(request) is not None:
        return redirect(safe_next(CONSOLE, next))
    return _signin_form(request, next, None, 200)


def _signin_form(request: Request, next_: str | None, error: str | None, status: int) -> Response:
    token = signin_token(request, CONSOLE)
    context = {"next": safe_next(CONSOLE, next_), "signin_csrf": token, "error": error}
    response = html("login.html", context, status)
    set_signin_cookie(response, request, CONSOLE, token)
    return response


@router.post("/login")
async def signin(request: Request) -> Response:
    state = state_of(request)
    form = await read_form(request)
    next_ = form.get("next")
    if not signin_form_ok(request, CONSOLE, form):
        return _signin_form(request, next_, "The sign-in form had expired. Please try again.", 403)
    address = request.client.host if request.client else "?"
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
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    session, _ = guarded
    await state_of(request).sessions.end(session.id)
    return signed_out(CONSOLE)


@router.post("/logout/everywhere")
async def signout_everywhere(request: Request) -> Response:
    """Every session ends, this one and every other browser's, on every worker and node."""
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    await state_of(request).sessions.end_all()
    return signed_out(CONSOLE)
