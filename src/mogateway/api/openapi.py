"""What ``/openapi.json`` says about each operation: who may call it, the shapes of its answers, and the
problem documents it can answer with.

Rules:

* The document is a contract, checked by schemathesis in the test suite
  (``tests/gateway/test_gateway_openapi.py``): every status an operation can answer is listed, with its
  media type (``application/json``, ``application/problem+json``, ``text/plain`` for /metrics), and a
  request the schema allows is accepted unless the operation's description says why not (a rule that
  depends on the gateway's settings or state, e.g. a callback host that must resolve to a public address).
* Routes answer with ready-made :class:`~starlette.responses.Response` objects (orjson, no response
  validation on the hot path), so the models here document and are never used to serialize. They are
  kept true by the schemathesis run, which validates every answer against them.
* Two bearer-token schemes: ``admin`` (the admin API) and ``ingest`` (operators pushing MOs).
* The callback the gateway makes is described under ``webhooks`` (``callback``): the seed's body, and a
  WhatsApp MO's ``whatsapp`` member, whose schema is the one shipped in the package for the SDK too
  (``core.whatsapp_member``): component ``WhatsAppMember``, its objects ``WhatsAppMember_<name>``. The
  admin API's message view shows the same member.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mogateway.core.timeline import State
from mogateway.core.whatsapp_member import SCHEMA_FILE

__all__ = ["ADMIN", "INGEST", "Problem", "documented", "install_openapi"]

ADMIN = "admin"
INGEST = "ingest"

_PROBLEM_WHY = {
    400: "The body is not valid JSON, or the client went away before sending all of it.",
    401: "The bearer token is missing or wrong (`WWW-Authenticate: Bearer`).",
    403: "The signed URL is not valid (its signature) or has expired.",
    404: "No such resource.",
    409: "The request conflicts with the current state (the detail says how).",
    413: "The body (or the batch) is larger than the gateway accepts.",
    415: "The body is not JSON.",
    410: "Gone: Meta no longer has this media (kept 7 days after the message).",
    422: "A field is invalid; `field` and `reason` name it (for a body, `errors` lists every one).",
    429: "Too many requests of this client in flight; `retry_after_s` says when to try again.",
    502: "Meta's Graph API failed, could not be reached, or the media breaks a limit (the detail says).",
    503: "The gateway cannot do this now (journal unavailable, not started); nothing was changed.",
    504: "Meta's Graph API did not answer in time.",
}


class Problem(BaseModel):
    """An RFC 9457 problem document: every error the API answers has this shape."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="`urn:mogateway:problem:<kind>` or `about:blank`")
    title: str
    status: int
    detail: str
    field: str | None = Field(None, description="the invalid field (422)")
    reason: str | None = Field(None, description="why the field is invalid (422)")


def documented(
    *problems: int,
    auth: str | None = ADMIN,
    ok: type[BaseModel] | None = None,
    status: int = 200,
    body: dict[str, Any] | None = None,
    ok_content: dict[str, Any] | None = None,
    also: dict[int, type[BaseModel]] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for a route decorator: its security, its answer and its problems.

    ``problems`` are the error statuses the operation can answer (401 is added when ``auth`` is set);
    ``ok`` the model of the successful answer (``status``); ``body`` a request body for routes that read
    theirs by hand; ``ok_content`` a successful answer that is not JSON; ``also`` other successful
    answers (status: model).
    """
    codes = sorted({*problems, *((401,) if auth else ())})
    responses: dict[int | str, dict[str, Any]] = {
        code: {"description": _PROBLEM_WHY[code], "content": _PROBLEM_CONTENT} for code in codes
    }
    if ok is not None:
        responses[status] = {"model": ok}
    if ok_content is not None:
        responses[status] = {"content": ok_content}
    for code, model in (also or {}).items():
        responses[code] = {"model": model}
    extra: dict[str, Any] = {}
    if auth:
        extra["security"] = [{auth: []}]
    if body is not None:
        extra["requestBody"] = body
    return {"responses": responses, "openapi_extra": extra or None}


_PROBLEM_CONTENT = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
_FASTAPI_422 = "#/components/schemas/HTTPValidationError"


def install_openapi(app: Any, *, refine: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Make ``app.openapi()`` add the security schemes and the Problem schema, and drop the 422 answers
    FastAPI adds to every route with parameters: routes whose parameters are all strings never answer
    them, and the others document their own 422 (a problem document). ``refine`` edits the document
    once more with what depends on the gateway's settings (limits)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return dict(app.openapi_schema)
        doc: dict[str, Any] = generate()
        components = doc.setdefault("components", {})
        components["securitySchemes"] = {
            ADMIN: {"type": "http", "scheme": "bearer", "description": "the admin token"},
            INGEST: {"type": "http", "scheme": "bearer", "description": "the ingest token (operators)"},
        }
        schemas = components.setdefault("schemas", {})
        schemas["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        schemas.update(whatsapp_member_schemas())
        schemas["Callback"] = _CALLBACK
        doc.setdefault("webhooks", {})["callback"] = _CALLBACK_OPERATION
        message_out = schemas.get("MessageOut", {}).get("properties", {})
        if "whatsapp" in message_out:
            message_out["whatsapp"] = {
                "description": "a WhatsApp MO's callback member (one message only)",
                "$ref": f"{_COMPONENTS}WhatsAppMember",
            }
        for path_item in doc.get("paths", {}).values():
            for operation in path_item.values():
                answers = operation.get("responses", {})
                schema = answers.get("422", {}).get("content", {}).get("application/json", {}).get("schema")
                if schema == {"$ref": _FASTAPI_422}:
                    del answers["422"]
        if refine is not None:
            refine(doc)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi


# ------------------------------------------------------------------------------------ the callback

_COMPONENTS = "#/components/schemas/"


@cache
def whatsapp_member_schemas() -> dict[str, Any]:
    """The shipped JSON Schema of the callback's ``whatsapp`` member as OpenAPI components:
    ``WhatsAppMember`` and one ``WhatsAppMember_<name>`` per object of its ``$defs``."""
    text = (importlib.resources.files("mogateway") / "data" / SCHEMA_FILE).read_text("utf-8")
    member: dict[str, Any] = json.loads(text.replace('"#/$defs/', f'"{_COMPONENTS}WhatsAppMember_'))
    defs = member.pop("$defs")
    member.pop("$schema", None)
    member.pop("$id", None)
    return {"WhatsAppMember": member, **{f"WhatsAppMember_{name}": d for name, d in defs.items()}}


_NUMBER = {"type": "integer", "minimum": 0}
_CALLBACK: dict[str, Any] = {
    "title": "Callback",
    "description": "The body the gateway POSTs to a client application's callback URL (docs/contract.md): "
    "compact JSON, members in this order. `channel` and `whatsapp` only for a WhatsApp MO.",
    "type": "object",
    "required": ["shortcode", "msisdn", "message", "sender", "tsiso", "tsunix"],
    "properties": {
        "shortcode": _NUMBER,
        "msisdn": _NUMBER,
        "message": {"type": "string"},
        "sender": {
            "type": "object",
            "required": ["cc", "ndc", "sn", "operator", "circle"],
            "properties": {
                "cc": _NUMBER,
                "ndc": _NUMBER,
                "sn": _NUMBER,
                "operator": {"type": "string"},
                "circle": {"type": "string"},
            },
        },
        "tsiso": {"type": "string", "description": "yyyy-mm-ddThh:mm:ss.mmmZ"},
        "tsunix": _NUMBER,
        "channel": {"type": "string", "enum": ["whatsapp"]},
        "whatsapp": {"$ref": f"{_COMPONENTS}WhatsAppMember"},
    },
}
_CALLBACK_OPERATION: dict[str, Any] = {
    "post": {
        "summary": "The callback to a client application (the gateway calls it, Bearer the client's token)",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"{_COMPONENTS}Callback"}}},
        },
        "responses": {
            "200": {
                "description": "The reply: a text/plain body (blank: no reply).",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    }
}


# ------------------------------------------------------------------------------------ the answers


class Sender(BaseModel):
    cc: int
    ndc: int
    sn: int
    operator: str
    circle: str


class TimelineEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    at: str | None
    event: str


class MessageOut(BaseModel):
    """A message: its state, the MO as received and enriched, and (one message only) its timeline."""

    id: str
    state: State
    origin: str
    channel: Literal["sms", "whatsapp"] = "sms"
    source_id: str | None
    shortcode: str
    msisdn: str
    message: str
    sender: Sender | None
    received_at: str | None
    stored_at: str | None
    updated_at: str | None
    client_id: str | None
    reply: str | None
    timeline: list[TimelineEntry] | None = None
    rejection: dict[str, str] | None = None
    whatsapp: dict[str, Any] | None = None


class MessagePage(BaseModel):
    messages: list[MessageOut]
    next: str | None = Field(description="pass as `before` for the next page; null on the last one")


class SessionsRevoked(BaseModel):
    """Sign out everywhere: how many console sessions ended."""

    revoked: int


class Replayed(BaseModel):
    id: str
    state: State


class ClientOut(BaseModel):
    """A client application. ``token`` and ``signing_secret`` only in the answer that made them."""

    id: str
    name: str
    shortcodes: list[str]
    whatsapp_numbers: list[str] = []
    keywords: list[str]
    callback_url: str
    timeout_s: float
    max_concurrency: int
    tsunix_unit: Literal["ms", "s"]
    unescape_newlines: bool
    sign_callbacks: bool
    signing_grace_until: str | None
    created_at: str | None
    updated_at: str | None
    dlt_pe_id: str | None
    dlt_enforce: bool
    dlt_templates: int
    token: str | None = None
    signing_secret: str | None = None


class ClientList(BaseModel):
    clients: list[ClientOut]


class StoredOut(BaseModel):
    """What became of one pushed MO (``duplicate``: this source id was stored before)."""

    id: str | None = None
    state: State | Literal["invalid"]
    duplicate: bool | None = None
    field: str | None = None
    reason: str | None = None


class BatchOut(BaseModel):
    accepted: int
    rejected: int
    duplicates: int
    results: list[StoredOut]


class TemplateOut(BaseModel):
    template_id: str
    text: str
    variables: int | None
    added_at: str | None


class TemplateList(BaseModel):
    client_id: str
    dlt_pe_id: str | None
    dlt_enforce: bool
    count: int
    templates: list[TemplateOut]


class ImportReport(BaseModel):
    model_config = ConfigDict(extra="allow")

    client_id: str
    dry_run: bool
    replace: bool
    rows: int
    added: list[str]
    updated: list[str]
    unchanged: int
    removed: list[str]
    total: int
    refused: list[dict[str, Any]]
    entity_ids: list[str]


class CheckOut(BaseModel):
    client_id: str
    verdict: Literal["matched", "blocked", "unmatched", "not_applied"]
    template_id: str | None
    text: str | None
    closest: list[dict[str, Any]]


class BindList(BaseModel):
    binds: list[dict[str, Any]]


class NodeList(BaseModel):
    node: str
    count: int
    nodes: list[dict[str, Any]]


class Health(BaseModel):
    status: str
    version: str
    node: str | None
    uptime_s: float
    queue_lag: int
    waiting: int
    replies_waiting: int


class Stats(BaseModel):
    """Counts by outcome, series and latency over the window (see docs/console.md)."""

    model_config = ConfigDict(extra="allow")
