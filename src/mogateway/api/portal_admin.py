"""The admin API of the client portal: invite a client's people, list and disable them, read a client's
audit (the admin token; the console and ``mogateway clients invite`` use these)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import Response

from mogateway.api.common import AdminRoute, client_of, gateway_of, json_response
from mogateway.api.openapi import documented
from mogateway.api.problems import ApiProblem
from mogateway.api.views.messages import iso
from mogateway.core.portal_accounts import EMAIL_PATTERN, PortalUser, normalize_email
from mogateway.gateway_view import GatewayView
from mogateway.service.portal_accounts import InviteRefused, PortalAccounts

__all__ = ["invite_person", "operator_audit", "router", "user_json"]

router = APIRouter(tags=["portal"], route_class=AdminRoute)


class InviteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The schema says the pattern; the check says it in words ("… is not an e-mail address").
    email: str = Field(min_length=5, max_length=320, json_schema_extra={"pattern": EMAIL_PATTERN})
    role: str = Field("viewer", pattern="^(viewer|admin)$")

    _email = field_validator("email")(classmethod(lambda cls, v: normalize_email(v)))


class PortalUserOut(BaseModel):
    id: str
    client_id: str
    email: str
    role: str
    created_at: str | None
    password_set: bool
    two_factor: bool
    disabled_at: str | None


class InviteOut(PortalUserOut):
    #: ``/portal/invite/<token>``: the gateway's address before it is the link (shown only now).
    invite_path: str
    invite_hours: float


class PortalUsers(BaseModel):
    users: list[PortalUserOut]


class Disabled(BaseModel):
    disabled: int


class AuditEntryOut(BaseModel):
    at: str | None
    actor: str
    action: str
    detail: str


class AuditOut(BaseModel):
    audit: list[AuditEntryOut]


def user_json(user: PortalUser) -> dict[str, Any]:
    return {
        "id": user.id,
        "client_id": user.client_id,
        "email": user.email,
        "role": user.role,
        "created_at": iso(user.created_at),
        "password_set": bool(user.password_hash),
        "two_factor": user.totp_on,
        "disabled_at": iso(user.disabled_at) if user.disabled_at else None,
    }


async def invite_person(
    accounts: PortalAccounts, client_id: str, email: str, role: str, hours: float, actor: str
) -> dict[str, Any]:
    """Invite a person; the answer's ``invite_path`` (``/portal/invite/<token>``) is shown only now."""
    try:
        user, token = await accounts.invite(client_id, email, role, hours, actor)
    except InviteRefused as exc:
        if exc.conflict:
            raise ApiProblem(409, str(exc), kind="portal-user-conflict") from None
        raise ApiProblem(422, str(exc), kind="invalid-field", field="email", reason=str(exc)) from None
    return {**user_json(user), "invite_path": f"/portal/invite/{token}", "invite_hours": hours}


async def operator_audit(gateway: GatewayView, client_id: str, action: str, detail: str = "") -> None:
    """Record a change an operator made to a client through the admin API (or the console, which
    calls it) in the client's audit, which its portal admins read too."""
    await PortalAccounts(gateway.journal.portal()).audit(client_id, "operator", action, detail)


def _accounts(request: Request) -> PortalAccounts:
    return PortalAccounts(gateway_of(request).journal.portal())


@router.post(
    "/v1/clients/{client_id}/portal/invites",
    summary="Invite a person to a client's portal (the link is shown once)",
    **documented(400, 404, 409, 413, 422, ok=InviteOut, status=201),
)
async def invite(request: Request, client_id: str, body: InviteIn) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)
    out = await invite_person(
        _accounts(request), client_id, body.email, body.role, gateway.settings.portal_invite_hours, "operator"
    )
    return json_response(out, 201)


@router.get(
    "/v1/clients/{client_id}/portal/users",
    summary="The people of a client's portal",
    **documented(404, ok=PortalUsers),
)
async def users(request: Request, client_id: str) -> Response:
    await client_of(gateway_of(request), client_id)
    found = await _accounts(request).store.users_of(client_id)
    return json_response({"users": [user_json(u) for u in found]})


@router.post(
    "/v1/clients/{client_id}/portal/users/{user_id}/disable",
    summary="Disable one person of a client's portal (their sessions end)",
    **documented(404, ok=Disabled),
)
async def disable_user(request: Request, client_id: str, user_id: str) -> Response:
    await client_of(gateway_of(request), client_id)
    if not await _accounts(request).disable(client_id, user_id, "operator"):
        raise ApiProblem(404, f"no portal user {user_id} of client {client_id}", kind="not-found")
    return json_response({"disabled": 1})


@router.post(
    "/v1/clients/{client_id}/portal/disable",
    summary="Disable every person of a client's portal (their sessions end)",
    **documented(404, ok=Disabled),
)
async def disable_all(request: Request, client_id: str) -> Response:
    await client_of(gateway_of(request), client_id)
    return json_response({"disabled": await _accounts(request).disable(client_id, None, "operator")})


@router.get(
    "/v1/clients/{client_id}/audit",
    summary="Who changed what of a client, when",
    **documented(404, ok=AuditOut),
)
async def audit(request: Request, client_id: str) -> Response:
    await client_of(gateway_of(request), client_id)
    entries = await _accounts(request).store.audit(client_id, 500)
    return json_response(
        {
            "audit": [
                {"at": iso(e.at), "actor": e.actor, "action": e.action, "detail": e.detail} for e in entries
            ]
        }
    )
