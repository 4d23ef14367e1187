"""Signing in and out of the console (see sessions.py for the rules of sessions and the throttle)."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.console.render import html
from mogateway.api.console.sessions import same_secret
from mogateway.api.console.web import (
    COOKIE,
    guard,
    read_form,
    redirect,
    safe_next,
    same_origin,
    session_of,
    state_of,
)

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False)

SIGNIN_COOKIE = "mogateway_console_signin"
_SIGNIN_COOKIE_S = 3600


@router.get("")
async def console_root() -> Response:
    return redirect("/console/")


@router.get("/login")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await session_of(request) is not None:
        return redirect(safe_next(next))
    return _signin_form(request, next, None, 200)


def _signin_form(request: Request, next_: str | None, error: str | None, status: int) -> Response:
    token = request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)
    response = html("login.html", {"next": safe_next(next_), "signin_csrf": token, "error": error}, status)
    response.set_cookie(
        SIGNIN_COOKIE,
        token,
        max_age=_SIGNIN_COOKIE_S,
        path="/console/login",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/login")
async def signin(request: Request) -> Response:
    state = state_of(request)
    form = await read_form(request)
    next_ = form.get("next")
    expected = request.cookies.get(SIGNIN_COOKIE, "")
    if not same_origin(request) or not expected or not same_secret(form.get("csrf", ""), expected):
        return _signin_form(request, next_, "The sign-in form had expired. Please try again.", 403)
    address = request.client.host if request.client else "?"
    wait = await state.throttle.wait_s(address)
    if wait > 0:
        message = f"Too many failed sign-ins. Try again in {int(wait) + 1} seconds."
        return _signin_form(request, next_, message, 429)
    if not same_secret(form.get("token", "").strip(), state.gateway.admin_token):
        await state.throttle.failed(address)
        return _signin_form(request, next_, "That is not the admin token.", 401)
    session = await state.sessions.create()
    response = redirect(safe_next(next_))
    response.set_cookie(
        COOKIE,
        session.id,
        max_age=int(state.sessions.lifetime_s),
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/console/login", httponly=True, samesite="strict")
    return response


@router.post("/logout")
async def signout(request: Request) -> Response:
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    session, _ = guarded
    await state_of(request).sessions.end(session.id)
    response = redirect("/console/login")
    response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
    return response


@router.post("/logout/everywhere")
async def signout_everywhere(request: Request) -> Response:
    """Every session ends, this one and every other browser's, on every worker and node."""
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    await state_of(request).sessions.end_all()
    response = redirect("/console/login")
    response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
    return response
