"""The admin API: client applications, messages and their timelines, replay, metrics."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import Response

from mogateway.api.auth import require_token
from mogateway.api.problems import ApiProblem
from mogateway.core.numbering import NumberRejected, normalize_msisdn
from mogateway.core.timeline import EventKind, State
from mogateway.service.registry import ClientConflict
from mogateway.service.urlguard import UrlRefused, check_callback_url
from mogateway.storage.journal import ClientRecord, Event, MessageFilter, MessageRecord, iso

__all__ = ["message_json", "router"]

router = APIRouter(tags=["admin"])


def _admin(request: Request) -> Any:
    gateway = request.app.state.gateway
    require_token(request, gateway.admin_token, "admin")
    return gateway


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


# ---------------------------------------------------------------------------------------- clients


def _shortcodes(values: list[Any]) -> list[str]:
    out: list[str] = []
    for v in values:
        text = str(v).strip() if isinstance(v, int | str) and not isinstance(v, bool) else ""
        if not (text.isdigit() and 3 <= len(text) <= 10 and text[0] != "0"):
            raise ValueError(f"{v!r} is not a shortcode (3 to 10 digits, not starting with 0)")
        if text not in out:
            out.append(text)
    return out


def _keywords(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        word = v.strip()
        if not word or len(word) > 32 or any(ch.isspace() for ch in word):
            raise ValueError(f"{v!r} is not a keyword (one word, at most 32 characters)")
        if word.casefold() not in (k.casefold() for k in out):
            out.append(word.upper())
    return out


class ClientIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    shortcodes: list[Any] = Field(min_length=1, max_length=100)
    callback_url: str = Field(min_length=8, max_length=2048)
    keywords: list[str] = Field(default_factory=list, max_length=100)
    timeout_s: float = Field(30.0, ge=1, le=30)
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    tsunix_unit: Literal["ms", "s"] = "ms"
    unescape_newlines: bool = True

    _sc = field_validator("shortcodes")(classmethod(lambda cls, v: _shortcodes(v)))
    _kw = field_validator("keywords")(classmethod(lambda cls, v: _keywords(v)))


class ClientPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=100)
    shortcodes: list[Any] | None = Field(None, min_length=1, max_length=100)
    callback_url: str | None = Field(None, min_length=8, max_length=2048)
    keywords: list[str] | None = Field(None, max_length=100)
    timeout_s: float | None = Field(None, ge=1, le=30)
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    tsunix_unit: Literal["ms", "s"] | None = None
    unescape_newlines: bool | None = None

    _sc = field_validator("shortcodes")(classmethod(lambda cls, v: None if v is None else _shortcodes(v)))
    _kw = field_validator("keywords")(classmethod(lambda cls, v: None if v is None else _keywords(v)))


def client_json(client: ClientRecord, *, with_token: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": client.id,
        "name": client.name,
        "shortcodes": client.shortcodes,
        "keywords": client.keywords,
        "callback_url": client.callback_url,
        "timeout_s": client.timeout_s,
        "max_concurrency": client.max_concurrency,
        "tsunix_unit": client.tsunix_unit,
        "unescape_newlines": client.unescape_newlines,
        "created_at": iso(client.created_at),
        "updated_at": iso(client.updated_at),
    }
    if with_token:
        out["token"] = client.token
    return out


async def _check_url(gateway: Any, url: str) -> None:
    try:
        await check_callback_url(url, gateway.settings.allow_private_callbacks)
    except UrlRefused as exc:
        raise ApiProblem(
            422, f"callback_url: {exc}", kind="invalid-field", field="callback_url", reason=str(exc)
        ) from None


def _conflict(exc: ClientConflict) -> ApiProblem:
    return ApiProblem(409, str(exc), kind="route-conflict")


@router.post("/v1/clients", status_code=201, summary="Register a client application")
async def create_client(request: Request, body: ClientIn) -> Response:
    gateway = _admin(request)
    await _check_url(gateway, body.callback_url)
    record = ClientRecord(
        id="",
        name=body.name,
        shortcodes=body.shortcodes,
        keywords=body.keywords,
        callback_url=body.callback_url,
        token="",
        timeout_s=body.timeout_s,
        max_concurrency=body.max_concurrency or gateway.settings.default_client_concurrency,
        tsunix_unit=body.tsunix_unit,
        unescape_newlines=body.unescape_newlines,
    )
    try:
        created = await gateway.registry.add(record)
    except ClientConflict as exc:
        raise _conflict(exc) from None
    return _json(client_json(created, with_token=True), 201)


@router.get("/v1/clients", summary="List client applications")
async def list_clients(request: Request) -> Response:
    gateway = _admin(request)
    await gateway.registry.load()
    return _json({"clients": [client_json(c) for c in gateway.registry.all()]})


def _client_or_404(gateway: Any, client_id: str) -> ClientRecord:
    client: ClientRecord | None = gateway.registry.get(client_id)
    if client is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    return client


@router.get("/v1/clients/{client_id}", summary="Show one client application")
async def get_client(request: Request, client_id: str) -> Response:
    gateway = _admin(request)
    await gateway.registry.load()
    return _json(client_json(_client_or_404(gateway, client_id)))


@router.patch("/v1/clients/{client_id}", summary="Change a client application")
async def patch_client(request: Request, client_id: str, body: ClientPatch) -> Response:
    gateway = _admin(request)
    current = _client_or_404(gateway, client_id)
    changes = body.model_dump(exclude_unset=True)
    if changes.get("callback_url"):
        await _check_url(gateway, changes["callback_url"])
    for key in ("name", "shortcodes", "callback_url", "timeout_s", "tsunix_unit", "unescape_newlines"):
        if changes.get(key) is None:
            changes.pop(key, None)
    try:
        updated = await gateway.registry.update(replace(current, **changes))
    except ClientConflict as exc:
        raise _conflict(exc) from None
    return _json(client_json(updated))


@router.delete("/v1/clients/{client_id}", status_code=204, summary="Remove a client application")
async def delete_client(request: Request, client_id: str) -> Response:
    gateway = _admin(request)
    _client_or_404(gateway, client_id)
    await gateway.registry.remove(client_id)
    return Response(status_code=204)


@router.post("/v1/clients/{client_id}/token", summary="Rotate a client's bearer token")
async def rotate_token(request: Request, client_id: str) -> Response:
    gateway = _admin(request)
    _client_or_404(gateway, client_id)
    updated = await gateway.registry.rotate_token(client_id)
    return _json(client_json(updated, with_token=True))


# --------------------------------------------------------------------------------------- messages


def _timeline_json(events: list[Event]) -> list[dict[str, Any]]:
    """The timeline as people read it. The journal keeps it compact (one row for a whole callback
    exchange, the stored time inside the received row); here it is spread out again: received, stored,
    routed, each attempt, outcome, reply..."""
    out: list[dict[str, Any]] = []
    for ev in events:
        data = dict(ev.data)
        if ev.kind in (EventKind.RECEIVED, EventKind.REJECTED):
            stored_at = data.pop("stored_at", None)
            out.append({"at": iso(ev.at), "event": ev.kind.value, **data})
            if ev.kind is EventKind.RECEIVED and stored_at is not None:
                out.append({"at": iso(stored_at), "event": "stored"})
            continue
        if ev.kind is EventKind.OUTCOME and "routed_at" in data:
            routed_at = data.pop("routed_at")
            client = {"client_id": data.pop("client_id", None), "client": data.pop("client", None)}
            out.append({"at": iso(routed_at), "event": EventKind.ROUTED.value, **client})
            for attempt in data.pop("attempts", []):
                attempt = dict(attempt)
                out.append(
                    {"at": iso(attempt.pop("at", routed_at)), "event": EventKind.ATTEMPT.value, **attempt}
                )
        out.append({"at": iso(ev.at), "event": ev.kind.value, **data})
    return out


def message_json(record: MessageRecord, events: list[Event] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": record.id,
        "state": record.state.value,
        "origin": record.origin,
        "source_id": record.source_id,
        "shortcode": record.shortcode,
        "msisdn": record.msisdn,
        "message": record.message,
        "sender": None
        if record.cc is None
        else {
            "cc": record.cc,
            "ndc": record.ndc,
            "sn": record.sn,
            "operator": record.operator,
            "circle": record.circle,
        },
        "received_at": iso(record.received_at),
        "stored_at": iso(record.stored_at),
        "updated_at": iso(record.updated_at),
        "client_id": record.client_id,
        "reply": record.reply_text,
    }
    if events is not None:
        out["timeline"] = _timeline_json(events)
        for ev in reversed(events):
            if ev.kind is EventKind.REJECTED:
                out["rejection"] = {"field": ev.data.get("field"), "reason": ev.data.get("reason")}
                break
    return out


def _parse_since(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ApiProblem(
            422, "since: must be ISO 8601 or unix seconds", kind="invalid-field", field="since"
        ) from None
    if moment.tzinfo is None:
        raise ApiProblem(422, "since: needs a UTC offset", kind="invalid-field", field="since")
    return moment.timestamp()


@router.get("/v1/messages", summary="Find messages")
async def list_messages(
    request: Request,
    shortcode: str | None = None,
    msisdn: str | None = None,
    state: str | None = None,
    since: str | None = None,
    limit: int = 50,
) -> Response:
    gateway = _admin(request)
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
        limit=limit,
    )
    records = await gateway.journal.find(where)
    return _json({"messages": [message_json(r) for r in records]})


@router.get("/v1/messages/{message_id}", summary="One message with its whole timeline")
async def get_message(request: Request, message_id: str) -> Response:
    gateway = _admin(request)
    record = await gateway.journal.get(message_id)
    if record is None:
        raise ApiProblem(404, f"no message {message_id}", kind="not-found")
    return _json(message_json(record, await gateway.journal.timeline(message_id)))


@router.post("/v1/messages/{message_id}/replay", status_code=202, summary="Call the callback again")
async def replay_message(request: Request, message_id: str) -> Response:
    gateway = _admin(request)
    try:
        record = await gateway.replay(message_id)
    except ValueError as exc:
        raise ApiProblem(409, str(exc), kind="not-replayable") from None
    if record is None:
        raise ApiProblem(404, f"no message {message_id}", kind="not-found")
    return _json({"id": record.id, "state": record.state.value}, 202)


# ------------------------------------------------------------------------------------ operations


@router.get("/v1/binds", summary="SMPP binds and their state")
async def binds(request: Request) -> Response:
    gateway = _admin(request)
    return _json({"binds": gateway.smpp.status() if gateway.smpp is not None else []})


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=True)
async def metrics(request: Request) -> Response:
    gateway = request.app.state.gateway
    if not gateway.settings.metrics_public:
        require_token(request, gateway.admin_token, "admin")
    gateway.metrics.queue_lag.set(
        gateway.queue.lag() + (gateway.dispatcher.waiting() if gateway.dispatcher else 0)
    )
    return Response(generate_latest(gateway.metrics.registry), media_type=CONTENT_TYPE_LATEST)
