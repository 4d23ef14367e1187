"""The Callback page: the URL (an admin changes it under the admin API's rules, audited) and "test my
endpoint": one simulated MO sent exactly as the dispatcher sends it — the same body, headers, bearer
token and signature, through the same exchange (``service.caller``) and transport with its SSRF guard —
whose answer is judged and shown, and never handed to a reply channel.

The answer's headers are shown too (the test's transport captures them, within ``edges.http1``'s
bound); a cookie's value and any header whose name looks like a credential are masked: the page may be
seen over a shoulder, and an endpoint may echo secrets back."""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway import __version__
from mogateway.api.portal.web import PortalRoute, context, guard, html, page, redirect, state_of
from mogateway.core.contract import callback_body, callback_headers
from mogateway.core.message import Message
from mogateway.core.numbering import NumberRejected, normalize_msisdn
from mogateway.core.ports import RawAnswer
from mogateway.core.signing import signature_headers
from mogateway.edges.http1 import MAX_CAPTURED_HEADER_BYTES, MAX_CAPTURED_HEADERS, Http1Client
from mogateway.edges.numbering_files import sender_resolver
from mogateway.service.caller import exchange
from mogateway.service.client_scope import CredentialError

__all__ = ["router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)

_TEST_MSISDN = "919000000000"
#: Answer headers whose values are masked: credentials by any usual name.
_SECRET_HEADER = re.compile(r"auth|token|secret|passw|session|cookie|api-?key|credential|signature")
#: Characters of an answer that is not a reply shown as it came (an error page, a JSON error).
_SHOWN_BODY = 4000


@router.get("/callback")
async def callback_page(request: Request) -> Response:
    visit = await page(request)
    return html("callback.html", await context(request, visit, "callback", result=None, form={}))


@router.post("/callback")
async def change_callback(request: Request) -> Response:
    visit, form = await guard(request, "change_callback")
    url = form.get("callback_url", "")
    try:
        if not 8 <= len(url.strip()) <= 2048:
            raise CredentialError("callback_url: a URL has 8 to 2048 characters")
        await visit.scope.set_callback_url(url, visit.actor)
    except CredentialError as exc:
        ctx = await context(request, visit, "callback", result=None, form=form)
        ctx["error"] = str(exc)
        return html("callback.html", ctx, 422)
    await state_of(request).sessions.flash(visit.session, "info", "Callback URL saved.")
    return redirect("/portal/callback")


def _masked(headers: dict[str, str]) -> list[tuple[str, str]]:
    out = []
    for name, value in headers.items():
        if name == "authorization":
            value = "Bearer …" + value[-4:]
        out.append((name, value))
    return out


def _masked_answer(headers: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The answer's headers as shown: a ``set-cookie`` keeps its cookie's name and attributes, not its
    value; an auth-like header keeps only its length."""
    out = []
    for name, value in headers:
        if name == "set-cookie":
            cookie, sep, attributes = value.partition(";")
            value = cookie.partition("=")[0].strip() + "=… (masked)" + sep + attributes
        elif _SECRET_HEADER.search(name):
            value = f"… (masked, {len(value)} characters)"
        out.append((name, value))
    return out


def _raw_body(answer: RawAnswer) -> str:
    """An answer that does not become a reply, as text to show (cut): what the endpoint said instead."""
    text = answer.body.decode("utf-8", "replace")
    return text if len(text) <= _SHOWN_BODY else text[:_SHOWN_BODY] + f" … ({len(text) - _SHOWN_BODY} more)"


class _KeepsAnswer:
    """The test's transport: the capturing client, remembering the last answer (for its headers)."""

    def __init__(self, http: Http1Client) -> None:
        self._http = http
        self.answer: RawAnswer | None = None

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> RawAnswer:
        self.answer = None
        self.answer = await self._http.post(url, body, headers)
        return self.answer


@router.post("/callback/test")
async def test_endpoint(request: Request) -> Response:
    visit, form = await guard(request, "test_endpoint")
    client = visit.scope.record()
    if client is None:
        return redirect("/portal/callback")
    now = time.time()
    numbers = [*client.shortcodes, *client.whatsapp_numbers]
    number = form.get("shortcode", "") if form.get("shortcode", "") in numbers else numbers[0]
    whatsapp = number in client.whatsapp_numbers
    result: dict[str, Any] = {}
    try:
        msisdn = normalize_msisdn(form.get("msisdn", "").strip() or _TEST_MSISDN)
    except NumberRejected as exc:
        msisdn = ""
        result["error"] = f"sender: {exc}"
    if msisdn:
        message = Message(
            id="test-" + secrets.token_hex(8),
            shortcode=number,
            msisdn=msisdn,
            text=(form.get("message", "").strip() or (client.keywords or ["TEST"])[0])[:1000],
            received_at=now,
            origin="whatsapp:portal-test" if whatsapp else "http",
            source_id=f"wamid.PORTALTEST{secrets.token_hex(8).upper()}" if whatsapp else None,
            sender=sender_resolver().sender(msisdn, "", ""),
        )
        body = callback_body(message, "s" if client.tsunix_unit == "s" else "ms")
        headers = callback_headers(client.callback_token(now), message.id, __version__)
        if client.signing_secret:
            headers.update(signature_headers(client.signing_secrets(now), int(now), body))
        allow_private = state_of(request).gateway.settings.allow_private_callbacks
        http = Http1Client(allow_private=allow_private, capture_headers=True)
        transport = _KeepsAnswer(http)
        try:
            ex = await exchange(
                transport,
                client.callback_url,
                body,
                headers,
                deadline_s=client.timeout_s,
                unescape_newlines=client.unescape_newlines,
                allow_private=allow_private,
                channel=message.channel,
            )
        finally:
            await http.close()
        outcome = ex.outcome
        answer = transport.answer
        result.update(
            answer_headers=_masked_answer(answer.headers) if answer is not None else [],
            answer_headers_left_out=answer.headers_left_out if answer is not None else 0,
            header_bound=(MAX_CAPTURED_HEADERS, MAX_CAPTURED_HEADER_BYTES // 1024),
            raw_body=_raw_body(answer) if answer is not None and not outcome.sends_reply else "",
            url=client.callback_url,
            request_headers=_masked(headers),
            request_body=body.decode("utf-8"),
            outcome=outcome.kind.value,
            status=outcome.status,
            reply=outcome.reply,
            detail=outcome.detail,
            elapsed_ms=ex.elapsed_ms,
            attempts=[
                {"status": a.status, "elapsed_ms": a.elapsed_ms, "error": a.error} for a in ex.attempts
            ],
            would_reply=outcome.sends_reply,
        )
        await visit.scope.note(
            visit.actor, "endpoint tested", f"{outcome.kind.value} ({outcome.status or '-'})"
        )
    ctx = await context(request, visit, "callback", result=result, form=form)
    return html("callback.html", ctx)
