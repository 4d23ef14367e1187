"""The ingest API: operators push MOs here (``POST /v1/inbound`` and ``/v1/inbound/batch``).

The body is parsed by hand (orjson) rather than through pydantic: it is the hot path, and every item
that is a JSON object — even an invalid one — must reach intake so that its rejection is recorded.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.auth import require_token
from mogateway.api.common import gateway_of, json_response
from mogateway.api.openapi import INGEST, BatchOut, StoredOut, documented
from mogateway.api.problems import ApiProblem, problem
from mogateway.core.message import Arrival, Message, Rejection
from mogateway.core.ports import Stored
from mogateway.core.timeline import State
from mogateway.gateway_view import GatewayView
from mogateway.service.journal_health import JournalUnavailable

__all__ = ["arrival_from_json", "router"]

router = APIRouter(tags=["ingest"])
log = logging.getLogger(__name__)


def _text(
    obj: dict[str, Any], key: str, *, numeric_ok: bool, required: bool
) -> tuple[str | None, str | None]:
    """(value, problem) of a member that must be a string (or a number, where ``numeric_ok``)."""
    value = obj.get(key)
    if value is None:
        return None, ("is required" if required else None)
    if isinstance(value, str):
        return value, None
    if numeric_ok and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type: 9812345678.0 is 9812345678
    if numeric_ok and isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    return None, ("must be a string of digits" if numeric_ok else "must be a string")


def arrival_from_json(obj: Any, origin: str = "http", now: float | None = None) -> Arrival | tuple[str, str]:
    """An Arrival from one pushed JSON object, or (field, reason) when it is not even an object."""
    if not isinstance(obj, dict):
        return "body", "must be a JSON object"
    problem_: Rejection | None = None
    values: dict[str, str | None] = {}
    for key, numeric_ok, required in (
        ("shortcode", True, True),
        ("msisdn", True, True),
        ("message", False, True),
        ("id", True, False),
        ("operator", False, False),
        ("circle", False, False),
    ):
        value, why = _text(obj, key, numeric_ok=numeric_ok, required=required)
        values[key] = value
        if why and problem_ is None:
            problem_ = Rejection(key, why)
    received_at: datetime | None = None
    raw_time = obj.get("received_at")
    if raw_time is not None:
        try:
            if not isinstance(raw_time, str):
                raise ValueError
            received_at = datetime.fromisoformat(raw_time)
            if received_at.tzinfo is None:
                raise ValueError
        except ValueError:
            received_at = None
            if problem_ is None:
                problem_ = Rejection(
                    "received_at",
                    "must be ISO 8601 with a UTC offset, e.g. 2026-11-20T10:00:00.000Z",
                )
    arrived = time.time() if now is None else now
    message = Message(
        id="",
        shortcode=values["shortcode"] or "",
        msisdn=values["msisdn"] or "",
        text=values["message"] or "",
        received_at=received_at.timestamp() if received_at is not None else arrived,
        origin=origin,
        source_id=values["id"],
    )
    return Arrival(message, operator=values["operator"], circle=values["circle"], problem=problem_)


def _result_json(result: Stored) -> dict[str, Any]:
    if result.rejection is not None:
        return {
            "id": result.id,
            "state": result.state.value,
            "duplicate": result.duplicate,
            "field": result.rejection.field,
            "reason": result.rejection.reason,
        }
    return {"id": result.id, "state": result.state.value, "duplicate": result.duplicate}


async def _json_body(request: Request) -> Any:
    content_type = request.headers.get("content-type", "application/json")
    if not content_type.split(";")[0].strip().lower().endswith("json"):
        raise ApiProblem(415, "send application/json", kind="unsupported-media-type")
    body = await request.body()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiProblem(400, f"body is not valid JSON: {exc}", kind="invalid-json") from None


async def _accept(gateway: GatewayView, items: list[Arrival]) -> list[Stored]:
    """Intake, with a storage failure turned into 503: nothing was acknowledged, send it again."""
    try:
        results = await gateway.intake.accept(items)
    except Exception as exc:
        if not isinstance(exc, JournalUnavailable):  # that one is logged already, rate-limited
            log.error("could not store %d pushed MOs: %s: %s", len(items), type(exc).__name__, exc)
        detail = "the journal could not store the MO; nothing was accepted: send it again"
        if isinstance(exc, JournalUnavailable):
            detail = f"nothing was accepted: {exc}; send it again later"
        raise ApiProblem(503, detail, kind="unavailable") from None
    return results


#: One MO as an operator pushes it (the JSON schema of what :func:`arrival_from_json` reads).
MO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["shortcode", "msisdn", "message"],
    "properties": {
        "shortcode": {
            "anyOf": [
                {"type": "string", "pattern": "^[1-9][0-9]{2,9}$"},
                {"type": "integer", "minimum": 100, "maximum": 9_999_999_999},
            ]
        },
        "msisdn": {
            "description": "an Indian mobile number: 10 digits, optionally after 91, +91 or 0",
            "anyOf": [
                {"type": "string", "pattern": "^(\\+?91|0)?[6-9][0-9]{9}$"},
                {"type": "integer", "minimum": 6_000_000_000, "maximum": 9_999_999_999},
                {"type": "integer", "minimum": 916_000_000_000, "maximum": 919_999_999_999},
            ],
        },
        "message": {"type": "string"},
        "id": {
            "description": "the operator's id of the MO: a second push with the same id is a duplicate",
            "anyOf": [{"type": "string", "maxLength": 200}, {"type": "integer"}, {"type": "null"}],
        },
        "operator": {"type": ["string", "null"]},
        "circle": {"type": ["string", "null"]},
        "received_at": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "ISO 8601 with a UTC offset; not before 2000, not more than a day ahead",
        },
    },
}
#: Any list: every item gets its own result, an item that is not a valid MO included ("invalid").
BATCH_SCHEMA: dict[str, Any] = {
    "description": "a list of MOs (each as in POST /v1/inbound), or an object with the list as `items`",
    "anyOf": [
        {"type": "array", "items": {}},
        {"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "items": {}}}},
    ],
}
#: What both ingest operations may answer besides their result: bad JSON, too large, not JSON, invalid,
#: journal unavailable (and 401).
_PROBLEMS = (400, 413, 415, 422, 503)


def _json_body_of(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_REJECTED = (
    "422 also for an MO the gateway refuses (a number outside India's mobile series, a time out of "
    "range...): it is recorded as `rejected` and the problem document carries its `id`."
)


@router.post(
    "/v1/inbound",
    status_code=202,
    summary="Push one MO",
    description=_REJECTED,
    **documented(*_PROBLEMS, auth=INGEST, ok=StoredOut, status=202, body=_json_body_of(MO_SCHEMA)),
)
async def inbound(request: Request) -> Response:
    gateway = gateway_of(request)
    require_token(request, gateway.ingest_token, "ingest")
    item = arrival_from_json(await _json_body(request))
    if isinstance(item, tuple):
        field, reason = item
        raise ApiProblem(422, f"{field}: {reason}", kind="invalid-field", field=field, reason=reason)
    (result,) = await _accept(gateway, [item])
    if result.state is State.REJECTED:
        rejection = result.rejection or Rejection("", "")
        return problem(
            422,
            f"{rejection.field}: {rejection.reason}",
            kind="rejected",
            field=rejection.field,
            reason=rejection.reason,
            id=result.id,
            state=result.state.value,
            duplicate=result.duplicate,
        )
    return json_response(_result_json(result), 202)


@router.post(
    "/v1/inbound/batch",
    summary="Push many MOs; one result per item, in order",
    description='A JSON list of MOs (or `{"items": [...]}`). Each item gets its result: an invalid '
    "or refused item does not refuse the others.",
    **documented(*_PROBLEMS, auth=INGEST, ok=BatchOut, body=_json_body_of(BATCH_SCHEMA)),
)
async def inbound_batch(request: Request) -> Response:
    gateway = gateway_of(request)
    require_token(request, gateway.ingest_token, "ingest")
    data = await _json_body(request)
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if not isinstance(data, list):
        raise ApiProblem(422, "body must be a JSON list of MO objects", kind="invalid-field", field="body")
    limit = gateway.settings.max_batch_items
    if len(data) > limit:
        raise ApiProblem(413, f"at most {limit} items per batch", kind="too-large")
    now = time.time()
    parsed = [arrival_from_json(obj, now=now) for obj in data]
    items = [p for p in parsed if not isinstance(p, tuple)]
    accepted = iter(await _accept(gateway, items))
    results: list[dict[str, Any]] = []
    counts = {"accepted": 0, "rejected": 0, "duplicates": 0}
    for entry in parsed:
        if isinstance(entry, tuple):
            results.append({"state": "invalid", "field": entry[0], "reason": entry[1]})
            counts["rejected"] += 1
            continue
        result = next(accepted)
        results.append(_result_json(result))
        if result.duplicate:
            counts["duplicates"] += 1
        elif result.state is State.REJECTED:
            counts["rejected"] += 1
        else:
            counts["accepted"] += 1
    return json_response({**counts, "results": results}, 200)
