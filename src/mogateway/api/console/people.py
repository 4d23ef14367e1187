"""A client's portal people and audit, for operators: invite (the link shown once), disable one person
or all, read who changed what. Changes go through the admin API (``api.portal_admin``), in process."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

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

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)


async def _page(request: Request, client_id: str, error: str | None = None) -> Response:
    session = await page_session(request)
    state = state_of(request)
    status, client = await state.api("GET", path("/v1/clients/{}", client_id))
    if status != 200:
        return await not_found(request, session, "clients", f"client {client_id}")
    _, users = await state.api("GET", path("/v1/clients/{}/portal/users", client_id))
    _, audit = await state.api("GET", path("/v1/clients/{}/audit", client_id))
    context = await page_context(
        request, session, "clients", client=client, users=users["users"], audit=audit["audit"]
    )
    context["error"] = error
    return html("client_portal.html", context, 422 if error else 200)


@router.get("/clients/{client_id}/portal")
async def portal_people(request: Request, client_id: str) -> Response:
    return await _page(request, client_id)


@router.post("/clients/{client_id}/portal/invite")
async def invite(request: Request, client_id: str) -> Response:
    session, form = await guard(request)
    state = state_of(request)
    body: dict[str, Any] = {"email": form.get("email", "").strip(), "role": form.get("role", "viewer")}
    status, data = await state.api("POST", path("/v1/clients/{}/portal/invites", client_id), json=body)
    if status == 404:
        return await not_found(request, session, "clients", f"client {client_id}")
    if status != 201:
        detail = data.get("detail") if isinstance(data, dict) else None
        return await _page(request, client_id, str(detail or f"refused ({status})"))
    link = str(request.base_url).rstrip("/") + data["invite_path"]
    await state.sessions.flash(
        session,
        "invite",
        f"Invite for {data['email']} ({data['role']})",
        link=link,
        hours=data["invite_hours"],
    )
    return redirect(path("/console/clients/{}/portal", client_id))


@router.post("/clients/{client_id}/portal/users/{user_id}/disable")
async def disable_user(request: Request, client_id: str, user_id: str) -> Response:
    session, _ = await guard(request)
    status, _ = await state_of(request).api(
        "POST", path("/v1/clients/{}/portal/users/{}/disable", client_id, user_id)
    )
    if status != 200:
        return await not_found(request, session, "clients", f"portal user {user_id}")
    await state_of(request).sessions.flash(session, "info", "Disabled: their sessions have ended.")
    return redirect(path("/console/clients/{}/portal", client_id))


@router.post("/clients/{client_id}/portal/disable")
async def disable_all(request: Request, client_id: str) -> Response:
    session, _ = await guard(request)
    status, data = await state_of(request).api("POST", path("/v1/clients/{}/portal/disable", client_id))
    if status != 200:
        return await not_found(request, session, "clients", f"client {client_id}")
    await state_of(request).sessions.flash(session, "info", f"Disabled {data['disabled']} people.")
    return redirect(path("/console/clients/{}/portal", client_id))
