"""The Clients page: the table with the last hour's figures; add, change, rotate, remove; test MO."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.console.messages import summarize
from mogateway.api.console.render import html
from mogateway.api.console.sessions import Session
from mogateway.api.console.web import (
    ConsoleRoute,
    guard,
    inline,
    not_found,
    page_context,
    page_session,
    path,
    redirect,
    split_words,
    state_of,
)
from mogateway.core.timeline import FINAL_STATES

__all__ = ["router"]

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)

_LISTS = ("shortcodes", "whatsapp_numbers", "keywords")
_TEST_EXTRA_WAIT_S = 5.0  # a test MO's outcome is awaited the client's timeout and this much more


async def _clients_page(
    request: Request, session: Session, *, error: str | None = None, form: dict[str, str] | None = None
) -> Response:
    state = state_of(request)
    _, listing = await state.api("GET", "/v1/clients")
    stats = await state.stats.snapshot("1h")
    figures = {c["id"]: c for c in stats["clients"]}
    context = await page_context(
        request,
        session,
        "clients",
        clients=listing["clients"],
        figures=figures,
        form=form or {},
    )
    context["error"] = error
    return html("clients.html", context, status=422 if error else 200)


@router.get("/clients")
async def clients(request: Request) -> Response:
    session = await page_session(request)
    return await _clients_page(request, session)


def _client_body(form: dict[str, str], *, partial: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": form.get("name", "").strip(),
        "shortcodes": split_words(form.get("shortcodes", "")),
        # "+91 98765 43210" is one number: only commas and line ends separate them
        "whatsapp_numbers": [
            n.strip() for n in re.split(r"[,\n]", form.get("whatsapp_numbers", "")) if n.strip()
        ],
        "callback_url": form.get("callback_url", "").strip(),
        "keywords": split_words(form.get("keywords", "")),
    }
    for key in ("timeout_s", "max_concurrency"):
        if form.get(key, "").strip():
            body[key] = form[key].strip()
    if partial:
        # The form shows every list: an emptied one is emptied (the API refuses a client left with
        # neither a shortcode nor a WhatsApp number).
        body = {k: v for k, v in body.items() if v != "" and (k in _LISTS or v != [])}
    return body


@router.post("/clients")
async def create_client(request: Request) -> Response:
    session, form = await guard(request)
    status, data = await state_of(request).api("POST", "/v1/clients", json=_client_body(form, partial=False))
    if status != 201:
        return await _clients_page(request, session, error=data["detail"], form=form)
    await state_of(request).sessions.flash(
        session, "token", f"Client {data['name']} added.", client=data["name"], token=data["token"]
    )
    return redirect(path("/console/clients#client-{}", data["id"]))


async def _client_or_none(request: Request, client_id: str) -> dict[str, Any] | None:
    status, data = await state_of(request).api("GET", path("/v1/clients/{}", client_id))
    return data if status == 200 else None


@router.get("/clients/{client_id}")
async def edit_client_page(request: Request, client_id: str) -> Response:
    session = await page_session(request)
    client = await _client_or_none(request, client_id)
    if client is None:
        return await not_found(request, session, "clients", f"client {client_id}")
    return html("client_edit.html", await page_context(request, session, "clients", client=client, form=None))


@router.post("/clients/{client_id}")
async def edit_client(request: Request, client_id: str) -> Response:
    session, form = await guard(request)
    state = state_of(request)
    status, data = await state.api(
        "PATCH", path("/v1/clients/{}", client_id), json=_client_body(form, partial=True)
    )
    if status == 404:
        return await not_found(request, session, "clients", f"client {client_id}")
    if status != 200:
        client = await _client_or_none(request, client_id)
        context = await page_context(request, session, "clients", client=client, form=form)
        context["error"] = data["detail"]
        return html("client_edit.html", context, status=422)
    await state_of(request).sessions.flash(session, "info", f"Client {data['name']} saved.")
    return redirect(path("/console/clients#client-{}", client_id))


@router.post("/clients/{client_id}/token")
async def rotate_token(request: Request, client_id: str) -> Response:
    session, _ = await guard(request)
    status, data = await state_of(request).api("POST", path("/v1/clients/{}/token", client_id))
    if status != 200:
        return await not_found(request, session, "clients", f"client {client_id}")
    await state_of(request).sessions.flash(
        session,
        "token",
        f"New token of {data['name']}; the old one no longer works.",
        client=data["name"],
        token=data["token"],
    )
    return redirect(path("/console/clients#client-{}", client_id))


@router.get("/clients/{client_id}/remove")
async def remove_client_page(request: Request, client_id: str) -> Response:
    session = await page_session(request)
    client = await _client_or_none(request, client_id)
    if client is None:
        return await not_found(request, session, "clients", f"client {client_id}")
    return html("client_remove.html", await page_context(request, session, "clients", client=client))


@router.post("/clients/{client_id}/remove")
async def remove_client(request: Request, client_id: str) -> Response:
    session, _ = await guard(request)
    state = state_of(request)
    client = await _client_or_none(request, client_id)
    status, _ = await state.api("DELETE", path("/v1/clients/{}", client_id))
    if status != 204 or client is None:
        return await not_found(request, session, "clients", f"client {client_id}")
    await state_of(request).sessions.flash(session, "info", f"Client {client['name']} removed.")
    return redirect("/console/clients")


@router.post("/clients/{client_id}/test")
async def test_mo(request: Request, client_id: str) -> Response:
    """Push a test MO through the ingest API, like ``mogateway send``, and wait for its outcome."""
    session, form = await guard(request)
    state = state_of(request)
    client = await _client_or_none(request, client_id)
    if client is None:
        return await not_found(request, session, "clients", f"client {client_id}")
    body = {
        "shortcode": form.get("shortcode") or (client["shortcodes"] or [""])[0],
        "msisdn": form.get("msisdn", "").strip(),
        "message": form.get("message", "").strip() or "TEST",
    }
    result: dict[str, Any] = {"client": client, "sent": body}
    if not body["shortcode"]:  # a test MO is an SMS; WhatsApp messages come by Meta's webhook only
        status, data = 0, {"detail": "a test MO is an SMS, and this client has no shortcode"}
    else:
        status, data = await state.api("POST", "/v1/inbound", json=body, ingest=True)
    if status != 202:
        result["error"] = data.get("detail", f"refused ({status})")
    else:
        deadline = time.monotonic() + float(client["timeout_s"]) + _TEST_EXTRA_WAIT_S
        while True:
            _, message = await state.api("GET", path("/v1/messages/{}", data["id"]))
            if message["state"] in FINAL_STATES or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        result["message"] = message
        result["summary"] = summarize(message)
    if inline(request):
        return html("_test_result.html", {"result": result})
    await state_of(request).sessions.flash(session, "test", "Test MO sent.", result=result)
    return redirect(path("/console/clients#client-{}", client_id))
