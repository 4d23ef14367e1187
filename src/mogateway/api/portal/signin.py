"""Signing in and out of the portal, and accepting an invite (setting the password)."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.console.sessions import same_secret
from mogateway.api.console.web import read_form, same_origin
from mogateway.api.portal.web import (
    clear_session_cookie,
    guard,
    html,
    redirect,
    set_session_cookie,
    state_of,
    visit_of,
)
from mogateway.service.portal_accounts import InviteRefused

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False)

SIGNIN_COOKIE = "mogateway_portal_signin"
_SIGNIN_COOKIE_S = 3600
_WRONG = "Wrong e-mail address, password or code."


def safe_next(value: str | None) -> str:
    """Only a portal path may be where sign-in leads (no open redirect)."""
    if value and value.startswith("/portal/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/portal/"


@router.get("")
async def portal_root() -> Response:
    return redirect("/portal/")


@router.get("/login")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await visit_of(request) is not None:
        return redirect(safe_next(next))
    return _form(request, next, None, 200)


def _form(request: Request, next_: str | None, error: str | None, status: int, email: str = "") -> Response:
    token = request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)
    context = {"next": safe_next(next_), "signin_csrf": token, "error": error, "email": email}
    response = html("login.html", context, status)
    response.set_cookie(
        SIGNIN_COOKIE,
        token,
        max_age=_SIGNIN_COOKIE_S,
        path="/portal/login",
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
    email = form.get("email", "")[:320]
    expected = request.cookies.get(SIGNIN_COOKIE, "")
    if not same_origin(request) or not expected or not same_secret(form.get("csrf", ""), expected):
        return _form(request, next_, "The sign-in form had expired. Please try again.", 403, email)
    address = request.client.host if request.client else "?"
    wait = await state.throttle.wait_s(address, email)
    if wait > 0:
        message = f"Too many failed sign-ins. Try again in {int(wait) + 1} seconds."
        return _form(request, next_, message, 429, email)
    user = await state.accounts.check_password(email, form.get("password", ""))
    if user is None or not await state.accounts.second_factor(user, form.get("code", "")):
        await state.throttle.failed(address, email)
        return _form(request, next_, _WRONG, 401, email)
    session = await state.sessions.create(user)
    response = redirect(safe_next(next_))
    set_session_cookie(response, request, session, state.sessions.lifetime_s)
    response.delete_cookie(SIGNIN_COOKIE, path="/portal/login", httponly=True, samesite="strict")
    return response


@router.post("/logout")
async def signout(request: Request) -> Response:
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    visit, _ = guarded
    await state_of(request).sessions.end(visit.session.id)
    response = redirect("/portal/login")
    clear_session_cookie(response)
    return response


@router.post("/logout/everywhere")
async def signout_everywhere(request: Request) -> Response:
    """Every session of this person ends: every browser, every worker and node."""
    guarded = await guard(request)
    if isinstance(guarded, Response):
        return guarded
    visit, _ = guarded
    await state_of(request).sessions.end_everywhere(visit.user.id)
    await visit.scope.note(visit.actor, "signed out everywhere", "")
    response = redirect("/portal/login")
    clear_session_cookie(response)
    return response


@router.get("/invite/{token}")
async def invite_page(request: Request, token: str) -> Response:
    user = await state_of(request).accounts.invite_user(token[:100])
    if user is None:
        return html(
            "invite.html", {"error": "This invite link is used, expired or unknown: ask for a new one."}, 404
        )
    return html("invite.html", {"email": user.email, "role": user.role, "token": token, "error": None})


@router.post("/invite/{token}")
async def accept_invite(request: Request, token: str) -> Response:
    state = state_of(request)
    form = await read_form(request)
    if not same_origin(request):
        return html("refused.html", {"reason": "The request came from another site."}, 403)
    user = await state.accounts.invite_user(token[:100])
    if user is None:
        return html(
            "invite.html", {"error": "This invite link is used, expired or unknown: ask for a new one."}, 404
        )
    password = form.get("password", "")
    context = {"email": user.email, "role": user.role, "token": token}
    if password != form.get("again", ""):
        return html("invite.html", {**context, "error": "The two passwords differ."}, 422)
    try:
        user = await state.accounts.accept(token[:100], password)
    except InviteRefused as exc:
        return html("invite.html", {**context, "error": str(exc)}, 422)
    session = await state.sessions.create(user)
    await state.sessions.flash(
        session, "info", "Your password is set. Turn on two-factor sign-in on the Account page."
    )
    response = redirect("/portal/account")
    set_session_cookie(response, request, session, state.sessions.lifetime_s)
    return response
