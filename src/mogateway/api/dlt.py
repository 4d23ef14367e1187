"""The admin API of a client's DLT settings: PE id and enforcement (on the client), and its templates.

Rules stated before the code:

* ``dlt_pe_id`` (19 digits, or null) and ``dlt_enforce`` are fields of the client: set on
  ``POST /v1/clients``, changed by ``PATCH /v1/clients/{id}``, shown by every client view with the
  number of templates (``dlt_templates``). ``dlt_enforce`` needs a PE id.
* ``POST /v1/clients/{id}/dlt-templates`` ``{"template_id", "text"}`` adds one (201); the same id with the
  same text again is 200, with another text 409. ``GET`` lists them; ``DELETE …/{template_id}`` removes
  one (204, or 404).
* ``POST /v1/clients/{id}/dlt-templates/import`` takes a DLT portal's CSV export as the body (up to
  ``max_batch_bytes``) and answers with what was added, updated, unchanged and refused (line, id,
  reason). ``?replace=true`` makes the file the whole list; ``?dry_run=true`` changes nothing.
* ``POST /v1/clients/{id}/dlt-check`` ``{"text"}`` says which template a reply would match, or why none.
* Malformed ids and templates are 422 problems naming the field; every change is one write of the
  client's document, applied to the journal's current copy (service.registry.Registry.change).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from mogateway.api.common import AdminRoute, client_of, gateway_of, json_response
from mogateway.api.openapi import CheckOut, ImportReport, TemplateList, TemplateOut, documented
from mogateway.api.problems import ApiProblem
from mogateway.core.clients import ClientRecord
from mogateway.core.dlt import DltInvalid, Template, check_dlt_id, parse_template
from mogateway.core.dlt_csv import DltCsvError, decode_csv, read_dlt_csv
from mogateway.core.isotime import iso
from mogateway.service.dlt import DltProfile, StoredTemplate, compile_templates

__all__ = [
    "CLIENT_FIELDS",
    "IMPORT_SUFFIX",
    "client_fields_json",
    "router",
    "valid_pe_id",
    "with_client_fields",
]

#: Every route answers only to the admin token, checked before the body is read (api.common).
router = APIRouter(tags=["admin: DLT"], route_class=AdminRoute)

#: The client fields this module owns.
CLIENT_FIELDS: Final = ("dlt_pe_id", "dlt_enforce")
IMPORT_SUFFIX: Final = "/dlt-templates/import"
#: Most templates one client may have (every one is in memory on every node).
MAX_TEMPLATES: Final = 10_000


# ---------------------------------------------------------------------------------- client fields


def valid_pe_id(value: str | None) -> str | None:
    """A validator for ``dlt_pe_id`` (pydantic turns the ValueError into a 422 naming the field)."""
    if value is None:
        return None
    try:
        return check_dlt_id(value.strip(), "dlt_pe_id")
    except DltInvalid as exc:
        raise ValueError(exc.reason) from None


def with_client_fields(client: ClientRecord, changes: Mapping[str, Any]) -> ClientRecord:
    """``client`` with ``dlt_pe_id`` / ``dlt_enforce`` changed as given (422: enforcing without a PE id)."""
    profile = DltProfile.of(client)
    pe_id = changes.get("dlt_pe_id", profile.pe_id)  # an explicit None removes it
    enforce = changes.get("dlt_enforce")
    enforce = profile.enforce if enforce is None else bool(enforce)
    if enforce and pe_id is None:
        raise ApiProblem(
            422,
            "dlt_enforce: needs dlt_pe_id (the replies to block are those that cannot carry a template)",
            kind="invalid-field",
            field="dlt_enforce",
            reason="needs dlt_pe_id",
        )
    return DltProfile(pe_id, enforce, profile.templates).put_on(client)


def client_fields_json(client: ClientRecord) -> dict[str, Any]:
    """The DLT fields of a client's JSON view."""
    profile = DltProfile.of(client)
    return {
        "dlt_pe_id": profile.pe_id,
        "dlt_enforce": profile.enforce,
        "dlt_templates": len(profile.templates),
    }


# -------------------------------------------------------------------------------------- templates


class TemplateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    template_id: str = Field(max_length=64, json_schema_extra={"pattern": "^[0-9]{19}$"})
    text: str = Field(max_length=10_000, json_schema_extra={"minLength": 1})  # empty: 422 "is empty"


class CheckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # 10,000 characters fit the default body limit (64 KiB) however they are written in JSON.
    text: str = Field(max_length=10_000)


def _invalid(exc: DltInvalid) -> ApiProblem:
    return ApiProblem(422, str(exc), kind="invalid-field", field=exc.field, reason=exc.reason)


def _template_json(stored: StoredTemplate, parsed: Template | None = None) -> dict[str, Any]:
    if parsed is None:
        try:
            parsed = parse_template(stored.template_id, stored.text)
        except DltInvalid:
            parsed = None
    return {
        "template_id": stored.template_id,
        "text": stored.text,
        "variables": None if parsed is None else parsed.variables,
        "added_at": iso(stored.added_at) if stored.added_at else None,
    }


def _list_json(client: ClientRecord) -> dict[str, Any]:
    profile = DltProfile.of(client)
    return {
        "client_id": client.id,
        "dlt_pe_id": profile.pe_id,
        "dlt_enforce": profile.enforce,
        "count": len(profile.templates),
        "templates": [_template_json(t) for t in profile.templates],
    }


def _too_many(count: int) -> ApiProblem:
    return ApiProblem(
        422, f"a client may have at most {MAX_TEMPLATES} DLT templates ({count} asked)", kind="too-many"
    )


@router.get(
    "/v1/clients/{client_id}/dlt-templates",
    summary="A client's DLT templates",
    **documented(404, ok=TemplateList),
)
async def list_templates(request: Request, client_id: str) -> Response:
    gateway = gateway_of(request)
    return json_response(_list_json(await client_of(gateway, client_id)))


@router.post(
    "/v1/clients/{client_id}/dlt-templates",
    status_code=201,
    summary="Add a DLT template",
    description="200 when the same template is registered already. 422 also for a text DLT refuses (only "
    "variables, too many variables...), or when the client has as many templates as allowed.",
    **documented(400, 404, 409, 413, 422, ok=TemplateOut, status=201, also={200: TemplateOut}),
)
async def add_template(request: Request, client_id: str, body: TemplateIn) -> Response:
    gateway = gateway_of(request)
    client = await client_of(gateway, client_id)
    try:
        parsed = parse_template(body.template_id, body.text, unescape_newlines=client.unescape_newlines)
        stored = StoredTemplate(
            body.template_id, parse_template(body.template_id, body.text).text, time.time()
        )
    except DltInvalid as exc:
        raise _invalid(exc) from None
    outcome: dict[str, StoredTemplate | None] = {"existing": None}

    def edit(current: ClientRecord) -> ClientRecord:
        profile = DltProfile.of(current)
        existing = profile.template(stored.template_id)
        if existing is not None:
            if existing.text != stored.text:
                raise ApiProblem(
                    409,
                    f"template {stored.template_id} is already registered for this client with another "
                    "text; delete it first",
                    kind="template-conflict",
                    text=existing.text,
                )
            outcome["existing"] = existing
            return current
        if len(profile.templates) >= MAX_TEMPLATES:
            raise _too_many(len(profile.templates) + 1)
        return profile.with_template(stored).put_on(current)

    if await gateway.registry.change(client_id, edit) is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    existing = outcome["existing"]
    if existing is not None:
        return json_response(_template_json(existing, parsed), 200)
    return json_response(_template_json(stored, parsed), 201)


@router.delete(
    "/v1/clients/{client_id}/dlt-templates/{template_id}",
    status_code=204,
    summary="Remove a DLT template",
    **documented(404),
)
async def delete_template(request: Request, client_id: str, template_id: str) -> Response:
    gateway = gateway_of(request)
    await client_of(gateway, client_id)

    def edit(current: ClientRecord) -> ClientRecord:
        profile = DltProfile.of(current)
        if profile.template(template_id) is None:
            raise ApiProblem(404, f"client {client_id} has no DLT template {template_id}", kind="not-found")
        return profile.without_template(template_id).put_on(current)

    if await gateway.registry.change(client_id, edit) is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    return Response(status_code=204)


@router.post(
    "/v1/clients/{client_id}" + IMPORT_SUFFIX,
    summary="Import a DLT portal's template export (CSV body)",
    description="422 when the file is not a DLT export the gateway can read (the detail says why).",
    **documented(
        400,
        404,
        413,
        422,
        ok=ImportReport,
        body={"content": {"text/csv": {"schema": {"type": "string"}}}, "required": True},
    ),
)
async def import_templates(
    request: Request, client_id: str, replace: bool = False, dry_run: bool = False
) -> Response:
    gateway = gateway_of(request)
    client = await client_of(gateway, client_id)
    try:
        text = decode_csv(await request.body())
        found = read_dlt_csv(
            text, pe_id=DltProfile.of(client).pe_id, unescape_newlines=client.unescape_newlines
        )
    except DltCsvError as exc:
        raise ApiProblem(422, f"file: {exc}", kind="invalid-file", field="file", reason=str(exc)) from None
    now = time.time()
    report: dict[str, Any] = {}

    def edit(current: ClientRecord) -> ClientRecord:
        profile = DltProfile.of(current)
        before = {t.template_id: t for t in profile.templates}
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        if replace:
            profile = DltProfile(profile.pe_id, profile.enforce, ())
        for _, template in found.templates:
            earlier = before.get(template.template_id)
            if earlier is None:
                added.append(template.template_id)
            elif earlier.text != template.text:
                updated.append(template.template_id)
            else:
                unchanged.append(template.template_id)
                if not replace:
                    continue
            added_at = now if earlier is None or earlier.text != template.text else earlier.added_at
            profile = profile.with_template(StoredTemplate(template.template_id, template.text, added_at))
        in_file = {t.template_id for _, t in found.templates}
        removed = sorted(tid for tid in before if tid not in in_file) if replace else []
        if len(profile.templates) > MAX_TEMPLATES:
            raise _too_many(len(profile.templates))
        report.update(added=added, updated=updated, unchanged=len(unchanged), removed=removed)
        report["total"] = len(profile.templates)
        return current if dry_run else profile.put_on(current)

    if await gateway.registry.change(client_id, edit) is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    return json_response(
        {
            "client_id": client_id,
            "dry_run": dry_run,
            "replace": replace,
            "rows": found.rows,
            "columns": found.columns,
            **report,
            "refused": [
                {"line": r.line, "template_id": r.template_id, "reason": r.reason} for r in found.refused
            ],
            "entity_ids": sorted(found.entity_ids),
        }
    )


@router.post(
    "/v1/clients/{client_id}/dlt-check",
    summary="Which DLT template a reply would match, or why none",
    **documented(400, 404, 413, 422, ok=CheckOut),
)
async def check_reply(request: Request, client_id: str, body: CheckIn) -> Response:
    gateway = gateway_of(request)
    client = await client_of(gateway, client_id)
    profile = DltProfile.of(client)
    templates = compile_templates(
        profile.templates,
        unescape_newlines=client.unescape_newlines,
        var_max=gateway.settings.dlt_var_max_chars,
    )
    found = templates.match(body.text)
    verdict = "matched" if found else ("blocked" if profile.enforce else "unmatched")
    if profile.pe_id is None:
        verdict = "not_applied"  # DLT applies to a client with a PE id only
    return json_response(
        {
            "client_id": client.id,
            "verdict": verdict,
            "template_id": found.template_id if found else None,
            "text": found.template.text if found else None,
            "closest": []
            if found
            else [{"template_id": m.template_id, "why": m.reason} for m in templates.explain(body.text)],
        }
    )
