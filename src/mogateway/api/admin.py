"""The admin API: client applications, messages and their timelines, replay, metrics, and ending every
console session."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from pydantic.config import JsonDict
from starlette.responses import PlainTextResponse, Response

from mogateway.api import dlt
from mogateway.api.auth import require_token
from mogateway.api.common import (
    AdminRoute,
    client_of,
    gateway_of,
    json_response,
    reload_clients,
)
from mogateway.api.openapi import (
    BindList,
    ClientList,
    ClientOut,
    MessageOut,
    MessagePage,
    Replayed,
    SessionsRevoked,
    documented,
)
from mogateway.api.portal_admin import operator_audit
from mogateway.api.problems import ApiProblem
from mogateway.api.render import iso, message_json
from mogateway.core.callback_url import UrlRefused, normalize_callback_url
from mogateway.core.clients import ClientRecord
from mogateway.core.message import (
    BUSINESS_NUMBER_RULE,
    CHANNELS,
    SHORTCODE_RULE,
    check_business_number,
    check_shortcode,
)
from mogateway.core.numbering import NumberRejected, normalize_msisdn
from mogateway.core.ports import MessageFilter
from mogateway.core.timeline import State
from mogateway.edges.urlguard import check_callback_url
from mogateway.gateway_view import GatewayView
from mogateway.service.registry import ClientConflict, NotSigning, new_signing_secret
from mogateway.service.replay import NotReplayable

__all__ = ["message_json", "router"]

#: Every route answers only to the admin token, checked before the body is read (api.common);
#: /metrics, which may be public, is on a router of its own, included at the end.
router = APIRouter(tags=["admin"], route_class=AdminRoute)
_maybe_public = APIRouter(tags=["admin"])


# ---------------------------------------------------------------------------------------- clients


def _shortcodes(values: list[Any]) -> list[str]:
    out: list[str] = []
    for v in values:
        if isinstance(v, float) and v.is_integer():  # JSON has one number type: 56767.0 is 56767
            v = int(v)
        text = str(v).strip() if isinstance(v, int | str) and not isinstance(v, bool) else ""
        try:
            check_shortcode(text)
        except ValueError:
            raise ValueError(f"{v!r} is not a shortcode ({SHORTCODE_RULE})") from None
        if text not in out:
            out.append(text)
    return out


def _whatsapp_numbers(values: list[Any]) -> list[str]:
    """WhatsApp business numbers as digits (``+91 98765 43210`` is ``919876543210``)."""
    out: list[str] = []
    for v in values:
        text = str(v).strip() if isinstance(v, int | str) and not isinstance(v, bool) else ""
        try:
            digits = check_business_number(text)
        except ValueError:
            raise ValueError(f"{v!r} is not a WhatsApp number ({BUSINESS_NUMBER_RULE})") from None
        if digits not in out:
            out.append(digits)
    return out


def _no_route() -> ApiProblem:
    """A client with neither a shortcode nor a WhatsApp number: it could receive nothing."""
    reason = "at least one shortcode or WhatsApp number (whatsapp_numbers) is required"
    return ApiProblem(
        422,
        f"shortcodes: {reason}",
        kind="invalid-field",
        field="shortcodes",
        reason=reason,
        errors=[{"field": "shortcodes", "reason": reason}],
    )


def _keywords(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        word = v.strip()
        if not word or len(word) > 32 or any(ch.isspace() for ch in word):
            raise ValueError(f"{v!r} is not a keyword (one word, at most 32 characters)")
        if word.casefold() not in (k.casefold() for k in out):
            out.append(word.upper())
    return out


def _callback_url(value: str) -> str:
    """The URL's stored form (ASCII: IDNA host, percent-encoded rest); control characters refused."""
    try:
        return normalize_callback_url(value)
    except UrlRefused as exc:
        raise ValueError(str(exc)) from None


#: The schema of what the validators below accept (they keep the error messages; the schema tells a
#: client beforehand). The callback URL's host must also resolve to a public address unless the
#: operator allows private ones: a rule no schema can state.
_SHORTCODES: JsonDict = {
    "items": {
        "anyOf": [
            {"type": "string", "pattern": "^[1-9][0-9]{2,9}$"},
            {"type": "integer", "minimum": 100, "maximum": 9_999_999_999},
        ]
    }
}
_URL: JsonDict = {
    "description": "http or https; no spaces, control characters or credentials (percent-encode them)",
    "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s\x00-\x1f\x7f-\x9f]+$",
}
_WHATSAPP: JsonDict = {
    "description": "WhatsApp business numbers (digits with the country code), routed like shortcodes",
    "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
}
_KEYWORDS: JsonDict = {"items": {"type": "string", "pattern": r"^\S{1,32}$"}}
_PE_ID: JsonDict = {"pattern": "^[0-9]{19}$"}


class ClientIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    shortcodes: list[Any] = Field(default_factory=list, max_length=100, json_schema_extra=_SHORTCODES)
    whatsapp_numbers: list[Any] = Field(default_factory=list, max_length=100, json_schema_extra=_WHATSAPP)
    callback_url: str = Field(min_length=8, max_length=2048, json_schema_extra=_URL)
    keywords: list[str] = Field(default_factory=list, max_length=100, json_schema_extra=_KEYWORDS)
    timeout_s: float = Field(30.0, ge=1, le=30)
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    tsunix_unit: Literal["ms", "s"] = "ms"
    unescape_newlines: StrictBool = True
    sign_callbacks: StrictBool = False
    dlt_pe_id: str | None = Field(None, json_schema_extra=_PE_ID)
    dlt_enforce: StrictBool = Field(
        False, description="refuse replies matching no template (needs dlt_pe_id)"
    )

    _sc = field_validator("shortcodes")(classmethod(lambda cls, v: _shortcodes(v)))
    _wa = field_validator("whatsapp_numbers")(classmethod(lambda cls, v: _whatsapp_numbers(v)))
    _kw = field_validator("keywords")(classmethod(lambda cls, v: _keywords(v)))
    _pe = field_validator("dlt_pe_id")(classmethod(lambda cls, v: dlt.valid_pe_id(v)))
    _url = field_validator("callback_url")(classmethod(lambda cls, v: _callback_url(v)))


class ClientPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=100)
    shortcodes: list[Any] | None = Field(None, max_length=100, json_schema_extra=_SHORTCODES)
    whatsapp_numbers: list[Any] | None = Field(None, max_length=100, json_schema_extra=_WHATSAPP)
    callback_url: str | None = Field(None, min_length=8, max_length=2048, json_schema_extra=_URL)
    keywords: list[str] | None = Field(None, max_length=100, json_schema_extra=_KEYWORDS)
    timeout_s: float | None = Field(None, ge=1, le=30)
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    tsunix_unit: Literal["ms", "s"] | None = None
    unescape_newlines: StrictBool | None = None
    sign_callbacks: StrictBool | None = None
    dlt_pe_id: str | None = Field(None, json_schema_extra=_PE_ID)  # null removes it
    dlt_enforce: StrictBool | None = None

    _sc = field_validator("shortcodes")(classmethod(lambda cls, v: None if v is None else _shortcodes(v)))
    _wa = field_validator("whatsapp_numbers")(
        classmethod(lambda cls, v: None if v is None else _whatsapp_numbers(v))
    )
    _kw = field_validator("keywords")(classmethod(lambda cls, v: None if v is None else _keywords(v)))
    _pe = field_validator("dlt_pe_id")(classmethod(lambda cls, v: dlt.valid_pe_id(v)))
    _url = field_validator("callback_url")(classmethod(lambda cls, v: v and _callback_url(v)))


def client_json(
    client: ClientRecord, *, with_token: bool = False, with_signing_secret: bool = False
) -> dict[str, Any]:
    """A client as the API shows it. Its secrets only when asked: right after they were made."""
    in_grace = client.in_signing_grace(time.time())
    out: dict[str, Any] = {
        "id": client.id,
        "name": client.name,
        "shortcodes": client.shortcodes,
        "whatsapp_numbers": client.whatsapp_numbers,
        "keywords": client.keywords,
        "callback_url": client.callback_url,
        "timeout_s": client.timeout_s,
        "max_concurrency": client.max_concurrency,
        "tsunix_unit": client.tsunix_unit,
        "unescape_newlines": client.unescape_newlines,
        "sign_callbacks": client.sign_callbacks,
        # During a rotation: when the previous signing secret stops signing (null otherwise).
        "signing_grace_until": iso(client.previous_signing_until) if in_grace else None,
        "created_at": iso(client.created_at),
        "updated_at": iso(client.updated_at),
        **dlt.client_fields_json(client),
    }
    if with_token:
        out["token"] = client.token
    if with_signing_secret and client.signing_secret:
        out["signing_secret"] = client.signing_secret
    return out


async def _check_url(gateway: GatewayView, url: str) -> None:
    try:
        await check_callback_url(url, gateway.settings.allow_private_callbacks)
    except UrlRefused as exc:
        raise ApiProblem(
            422, f"callback_url: {exc}", kind="invalid-field", field="callback_url", reason=str(exc)
        ) from None


def _conflict(exc: ClientConflict) -> ApiProblem:
    return ApiProblem(409, str(exc), kind="route-conflict")


@router.post(
    "/v1/clients",
    status_code=201,
    summary="Register a client application",
    description="422 also when the callback host resolves to a private, loopback or reserved address "
    "(unless the operator allows them), or when dlt_enforce is set without dlt_pe_id.",
    **documented(400, 409, 413, 422, ok=ClientOut, status=201),
)
async def create_client(request: Request, body: ClientIn) -> Response:
    gateway = gateway_of(request)
    if not body.shortcodes and not body.whatsapp_numbers:
        raise _no_route()
    await _check_url(gateway, body.callback_url)
    record = ClientRecord(
        id="",
        name=body.name,
        shortcodes=body.shortcodes,
        whatsapp_numbers=body.whatsapp_numbers,
        keywords=body.keywords,
        callback_url=body.callback_url,
        token="",
        timeout_s=body.timeout_s,
        max_concurrency=body.max_concurrency or gateway.settings.default_client_concurrency,
        tsunix_unit=body.tsunix_unit,
        unescape_newlines=body.unescape_newlines,
        signing_secret=new_signing_secret() if body.sign_callbacks else "",
    )
    record = dlt.with_client_fields(record, {"dlt_pe_id": body.dlt_pe_id, "dlt_enforce": body.dlt_enforce})
    try:
        created = await gateway.registry.add(record)
    except ClientConflict as exc:
        raise _conflict(exc) from None
    await operator_audit(gateway, created.id, "created", created.name)
    return json_response(client_json(created, with_token=True, with_signing_secret=True), 201)


@router.get("/v1/clients", summary="List client applications", **documented(503, ok=ClientList))
async def list_clients(request: Request) -> Response:
    gateway = gateway_of(request)
    await reload_clients(gateway)
    return json_response({"clients": [client_json(c) for c in gateway.registry.all()]})


@router.get(
    "/v1/clients/{client_id}", summary="Show one client application", **documented(404, 503, ok=ClientOut)
)
async def get_client(request: Request, client_id: str) -> Response:
    return json_response(client_json(await client_of(gateway_of(request), client_id)))


@router.patch(
    "/v1/clients/{client_id}",
    summary="Change a client application",
    description="A field that is absent or null is left as it is (but `dlt_pe_id: null` removes the PE id). "
    "422 also for a callback host that resolves to a private address (unless allowed), or "
    "dlt_enforce on a client without dlt_pe_id.",
    **documented(400, 404, 409, 413, 422, ok=ClientOut),
)
async def patch_client(request: Request, client_id: str, body: ClientPatch) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)
    changes = body.model_dump(exclude_unset=True)
    if changes.get("callback_url"):
        await _check_url(gateway, changes["callback_url"])
    dlt_changes: dict[str, Any] = {key: changes.pop(key) for key in dlt.CLIENT_FIELDS if key in changes}
    changes = {key: value for key, value in changes.items() if value is not None}  # null: left as it is
    # Turning signing on makes a secret (shown in this answer only); off forgets every secret; asking
    # for what is already so changes nothing (and shows no secret).
    sign = changes.pop("sign_callbacks", None)
    started_signing = False

    def edit(current: ClientRecord) -> ClientRecord:
        nonlocal started_signing
        signing: dict[str, Any] = {}
        started_signing = sign is True and not current.sign_callbacks
        if started_signing:
            signing["signing_secret"] = new_signing_secret()
        elif sign is False:
            signing.update(signing_secret="", previous_signing_secret="", previous_signing_until=0.0)
        edited = replace(current, **changes, **signing)
        if not edited.shortcodes and not edited.whatsapp_numbers:
            raise _no_route()
        return dlt.with_client_fields(edited, dlt_changes)

    try:
        # Applied to the journal's current copy: a template added meanwhile is not lost.
        updated = await gateway.registry.change(client_id, edit)
    except ClientConflict as exc:
        raise _conflict(exc) from None
    if updated is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    changed = sorted([*changes, *dlt_changes, *(["sign_callbacks"] if sign is not None else [])])
    await operator_audit(gateway, client_id, "changed", ", ".join(changed))
    return json_response(client_json(updated, with_signing_secret=started_signing))


@router.delete(
    "/v1/clients/{client_id}", status_code=204, summary="Remove a client application", **documented(404)
)
async def delete_client(request: Request, client_id: str) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)
    await gateway.registry.remove(client_id)
    return Response(status_code=204)


@router.post(
    "/v1/clients/{client_id}/token", summary="Rotate a client's bearer token", **documented(404, ok=ClientOut)
)
async def rotate_token(request: Request, client_id: str) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)
    updated = await gateway.registry.rotate_token(client_id)
    if updated is None:  # removed meanwhile
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    await operator_audit(gateway, client_id, "bearer token rotated", "at once")
    return json_response(client_json(updated, with_token=True))


@router.post(
    "/v1/clients/{client_id}/signing-secret",
    summary="Rotate a client's signing secret",
    **documented(404, 409, ok=ClientOut),
)
async def rotate_signing_secret(request: Request, client_id: str) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)
    try:
        updated = await gateway.registry.rotate_signing_secret(client_id, gateway.settings.signing_grace_s)
    except NotSigning as exc:
        raise ApiProblem(
            409, f'{exc}: turn signing on with PATCH {{"sign_callbacks": true}}', kind="not-signing"
        ) from None
    if updated is None:  # removed meanwhile
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    await operator_audit(gateway, client_id, "signing secret rotated", "")
    return json_response(client_json(updated, with_signing_secret=True))


# --------------------------------------------------------------------------------------- messages


def _parse_since(value: str, field: str = "since") -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ApiProblem(
            422, f"{field}: must be ISO 8601 or unix seconds", kind="invalid-field", field=field
        ) from None
    if moment.tzinfo is None:
        raise ApiProblem(422, f"{field}: needs a UTC offset", kind="invalid-field", field=field)
    return moment.timestamp()


_TIME_DOC = "ISO 8601 with a UTC offset, or unix seconds"
_TIME: JsonDict = {
    "pattern": r"^(|[0-9]{1,10}(\.[0-9]{1,6})?|[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))$"
}
_CURSOR: JsonDict = {"pattern": r"^$|^[0-9]{1,10}(\.[0-9]{1,6})?:[!-~]{1,64}$"}


@router.get("/v1/messages", summary="Find messages", **documented(422, ok=MessagePage))
async def list_messages(
    request: Request,
    shortcode: str | None = None,
    msisdn: str | None = None,
    state: str | None = Query(None, json_schema_extra={"enum": ["", *(s.value for s in State)]}),
    since: str | None = Query(None, description=_TIME_DOC, json_schema_extra=_TIME),
    limit: int = Query(50, json_schema_extra={"minimum": 1, "maximum": 1000}),
    client: str | None = None,
    until: str | None = Query(None, description=_TIME_DOC, json_schema_extra=_TIME),
    before: str | None = Query(
        None, description="the `next` of the previous page", json_schema_extra=_CURSOR
    ),
    channel: str | None = Query(
        None,
        description="`sms` or `whatsapp` (read from the origin); empty or absent: both",
        json_schema_extra={"enum": ["", *CHANNELS]},
    ),
) -> Response:
    """Newest first. ``before`` is the ``next`` of the previous page (keyset paging: stable and cheap
    however deep one pages, where an offset would rescan everything before the page)."""
    gateway = gateway_of(request)
    if not 1 <= limit <= 1000:
        raise ApiProblem(422, "limit: must be 1 to 1000", kind="invalid-field", field="limit")
    wanted_state: State | None = None
    if state:
        try:
            wanted_state = State(state)
        except ValueError:
            choices = ", ".join(s.value for s in State)
            raise ApiProblem(
                422, f"state: must be one of {choices}", kind="invalid-field", field="state"
            ) from None
    if channel and channel not in CHANNELS:
        raise ApiProblem(
            422, f"channel: must be one of {', '.join(CHANNELS)}", kind="invalid-field", field="channel"
        )
    if msisdn:
        try:
            msisdn = normalize_msisdn(msisdn)
        except NumberRejected:
            pass  # rejected messages are stored with the msisdn as it was sent
    where = MessageFilter(
        shortcode=shortcode or None,
        msisdn=msisdn or None,
        state=wanted_state,
        since=_parse_since(since) if since else None,
        until=_parse_since(until, "until") if until else None,
        limit=limit,
        client_id=client or None,
        before=_parse_cursor(before) if before else None,
        channel=channel or None,
    )
    records = await gateway.journal.find(where)
    last = records[-1] if len(records) == limit else None
    return json_response(
        {
            "messages": [message_json(r) for r in records],
            "next": f"{last.message.received_at!r}:{last.id}" if last is not None else None,
        }
    )


def _parse_cursor(value: str) -> tuple[float, str]:
    at, _, message_id = value.partition(":")
    try:
        return float(at), message_id
    except ValueError:
        raise ApiProblem(
            422, "before: use the 'next' of the previous page", kind="invalid-field", field="before"
        ) from None


@router.get(
    "/v1/messages/{message_id}",
    summary="One message with its whole timeline",
    **documented(404, ok=MessageOut),
)
async def get_message(request: Request, message_id: str) -> Response:
    gateway = gateway_of(request)
    found = await gateway.journal.history(message_id)
    if found is None:
        raise ApiProblem(404, f"no message {message_id}", kind="not-found")
    record, events = found
    return json_response(message_json(record, events))


@router.post(
    "/v1/messages/{message_id}/replay",
    status_code=202,
    summary="Call the callback again",
    **documented(404, 409, ok=Replayed, status=202),
)
async def replay_message(request: Request, message_id: str) -> Response:
    gateway = gateway_of(request)
    try:
        record = await gateway.replay(message_id)
    except NotReplayable as exc:
        raise ApiProblem(409, str(exc), kind="not-replayable") from None
    if record is None:
        raise ApiProblem(404, f"no message {message_id}", kind="not-found")
    return json_response({"id": record.id, "state": record.state.value}, 202)


# ------------------------------------------------------------------------------------ operations


@router.get("/v1/binds", summary="SMPP binds and their state", **documented(ok=BindList))
async def binds(request: Request) -> Response:
    gateway = gateway_of(request)
    return json_response({"binds": await gateway.binds_status()})


@_maybe_public.get(
    "/metrics",
    summary="Prometheus metrics (admin token unless metrics_public)",
    response_class=PlainTextResponse,
    **documented(ok_content={"text/plain": {"schema": {"type": "string"}}}),
)
async def metrics(request: Request) -> Response:
    gateway = gateway_of(request)
    if not gateway.settings.metrics_public:
        require_token(request, gateway.admin_token, "admin")
    return Response(await gateway.metrics_exposition(), media_type=CONTENT_TYPE_LATEST)


@router.post(
    "/v1/console/sessions/revoke",
    summary="Sign out everywhere: end every console session",
    **documented(ok=SessionsRevoked),
)
async def revoke_console_sessions(request: Request) -> Response:
    ended = await gateway_of(request).journal.console_sessions().end_all_sessions()
    return json_response({"revoked": ended})


router.include_router(_maybe_public)
