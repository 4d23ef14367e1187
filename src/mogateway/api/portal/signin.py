"""Signing in and out of the portal, and accepting an invite (setting the password)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.browser.sessions import (
    PORTAL,
    safe_next,
    same_origin,
    set_session_cookie,
    signed_in,
    signed_out,
    signin_form_ok,
    throttled,
)
from mogateway.api.browser.signin import EXPIRED, client_address, signin_form
from mogateway.api.portal import devices
from mogateway.api.portal.web import (
    PortalRoute,
    guard,
    html,
    portal_pages,
    read_form,
    redirect,
    state_of,
    visit_of,
)
from mogateway.service.portal_accounts import InviteRefused

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)

_WRONG = "Wrong e-mail address, password or code."


@router.get("")
async def portal_root() -> Response:
    return redirect("/portal/")


@router.get("/login")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await visit_of(request) is not None:
        return redirect(safe_next(PORTAL, next))
    return _form(request, next, None, 200)


def _form(request: Request, next_: str | None, error: str | None, status: int, email: str = "") -> Response:
    return signin_form(request, PORTAL, portal_pages, next_, error, status, email=email)


@router.post("/login")
async def signin(request: Request) -> Response:
    state = state_of(request)
    form = await read_form(request)
    next_ = form.get("next")
    email = form.get("email", "")[:320]
    if not signin_form_ok(request, PORTAL, form):
        return _form(request, next_, EXPIRED, 403, email)
    address = client_address(request)
    device = await state.devices.recognised(request.cookies.get(devices.COOKIE), email)
    wait = await state.throttle.wait_s(address, email, device)
    if wait > 0:
        return _form(request, next_, throttled(wait), 429, email)
    user = await state.accounts.check_password(email, form.get("password", ""))
    if user is None or not await state.accounts.second_factor(user, form.get("code", "")):
        await state.throttle.failed(address, email, device)
        return _form(request, next_, _WRONG, 401, email)
    session = await state.sessions.create(user)
    response = signed_in(request, PORTAL, session.id, state.sessions.lifetime_s, next_)
    state.devices.set_cookie(response, request, user)
    return response


@router.post("/logout")
async def signout(request: Request) -> Response:
    visit, _ = await guard(request)
    await state_of(request).sessions.end(visit.session.id)
    return signed_out(PORTAL)


@router.post("/logout/everywhere")
async def signout_everywhere(request: Request) -> Response:
    """Every session of this person ends: every browser, every worker and node."""
    visit, _ = await guard(request)
    await state_of(request).sessions.end_everywhere(visit.user.id)
    await visit.scope.note(visit.actor, "signed out everywhere", "")
    return signed_out(PORTAL)


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
    set_session_cookie(response, request, PORTAL, session.id, state.sessions.lifetime_s)
    state.devices.set_cookie(response, request, user)  # this browser set the password: the person's own
    return response
