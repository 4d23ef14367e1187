"""The Account page: the person's two-factor sign-in (TOTP, recovery codes) and, for a client's admins,
the people of their team."""

from __future__ import annotations

from fastapi import APIRouter, Request
from markupsafe import Markup
from starlette.responses import Response

from mogateway.api.portal.web import PortalRoute, context, guard, html, page, redirect, state_of
from mogateway.core import totp

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)


def qr_svg(uri: str) -> Markup:
    """The ``otpauth://`` URI as a QR code an authenticator app scans: inline SVG drawn here (segno), so
    the key never leaves the page for an image service, and the page needs no script or network.
    Dark on white whatever the page's colours, with a quiet zone, as scanners want.

    segno is imported here, on the first enrolment, not with the portal: about 50 ms of every worker's
    start for a page few people open (``python -X importtime -c "import segno"``)."""
    import segno

    code = segno.make(uri, error="m", micro=False)
    svg = code.svg_inline(
        scale=4,
        border=4,
        dark="#000",
        light="#fff",
        title="QR code for your authenticator app",
        svgclass="qr",
    )
    return Markup(svg.replace("<svg ", '<svg role="img" aria-label="QR code for your authenticator app" ', 1))


def _setup(secret: str, email: str) -> dict[str, object]:
    """What the enrolment shows: the key, its otpauth:// link and that link as a QR code."""
    uri = totp.otpauth_uri(totp.from_base32(secret), email, "mogateway")
    return {"secret": secret, "uri": uri, "qr": qr_svg(uri)}


@router.get("/account")
async def account_page(request: Request) -> Response:
    visit = await page(request)
    state = state_of(request)
    left = await state.accounts.store.recovery_codes_left(visit.user.id) if visit.user.totp_on else 0
    ctx = await context(request, visit, "account", setup=None, recovery_left=left)
    return html("account.html", ctx)


@router.post("/account/totp/start")
async def totp_start(request: Request) -> Response:
    visit, _ = await guard(request)
    setup = _setup(state_of(request).accounts.new_totp_secret(), visit.user.email)
    return html("account.html", await context(request, visit, "account", setup=setup, recovery_left=0))


@router.post("/account/totp")
async def totp_on(request: Request) -> Response:
    visit, form = await guard(request)
    state = state_of(request)
    secret = form.get("secret", "")[:64]
    codes = await state.accounts.turn_totp_on(visit.user, secret, form.get("code", ""))
    if codes is None:
        try:
            setup = _setup(secret, visit.user.email)
        except ValueError:
            return redirect("/portal/account")
        ctx = await context(request, visit, "account", setup=setup, recovery_left=0)
        ctx["error"] = "That code does not match: check the app's clock and type the code it shows now."
        return html("account.html", ctx, 422)
    await state.sessions.flash(visit.session, "recovery", "Two-factor sign-in is on.", codes=codes)
    return redirect("/portal/account")


@router.post("/account/totp/off")
async def totp_off(request: Request) -> Response:
    visit, form = await guard(request)
    state = state_of(request)
    if not await state.accounts.second_factor(visit.user, form.get("code", "")):
        ctx = await context(request, visit, "account", setup=None, recovery_left=0)
        ctx["error"] = "That code does not match."
        return html("account.html", ctx, 422)
    await state.accounts.turn_totp_off(visit.user)
    await state.sessions.flash(visit.session, "info", "Two-factor sign-in is off.")
    return redirect("/portal/account")
