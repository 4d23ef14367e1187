"""The Credentials page: rotate the bearer token the callbacks carry and the signing secret they are
signed with, each with an overlap window (both valid meanwhile), the new value shown once."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.portal.web import PortalRoute, context, guard, html, page, redirect, state_of
from mogateway.service.client_scope import CredentialError

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)

MAX_OVERLAP_MINUTES = 7 * 24 * 60


def _overlap_s(form: dict[str, str]) -> float:
    try:
        minutes = int(form.get("overlap_minutes", "60").strip() or "0")
    except ValueError:
        raise CredentialError("overlap: a whole number of minutes") from None
    if not 0 <= minutes <= MAX_OVERLAP_MINUTES:
        raise CredentialError(f"overlap: 0 to {MAX_OVERLAP_MINUTES} minutes")
    return minutes * 60.0


@router.get("/credentials")
async def credentials_page(request: Request) -> Response:
    visit = await page(request)
    return html("credentials.html", await context(request, visit, "credentials"))


@router.post("/credentials/{what}")
async def rotate(request: Request, what: str) -> Response:
    visit, form = await guard(request, "rotate_credentials")
    if what not in ("token", "signing-secret"):
        return redirect("/portal/credentials")
    try:
        overlap = _overlap_s(form)
        if what == "token":
            value, until = await visit.scope.rotate_token(overlap, visit.actor)
            label = "bearer token"
        else:
            value, until = await visit.scope.rotate_signing_secret(overlap, visit.actor)
            label = "signing secret"
    except CredentialError as exc:
        ctx = await context(request, visit, "credentials")
        ctx["error"] = str(exc)
        return html("credentials.html", ctx, 422)
    await state_of(request).sessions.flash(
        visit.session, "secret", f"New {label}", label=label, value=value, until=until, what=what
    )
    return redirect("/portal/credentials")
