"""The WhatsApp webhook endpoint (``/v1/whatsapp/webhook``): Meta delivers the numbers' messages here.

Rules stated before the code (the facts are in ``core.whatsapp``; the settings in ``config.whatsapp``):

* Without a ``[whatsapp]`` table both methods answer 404: the gateway serves no WhatsApp number.
* ``GET`` is the subscription handshake: ``hub.mode=subscribe`` with the configured verify token → 200
  and the challenge as the whole body (text/plain); anything else → 403.
* ``POST`` checks ``X-Hub-Signature-256`` over the raw bytes received, in constant time. Missing or
  wrong → 401, nothing read further and nothing stored, and one log line per 10 s however many come.
  The body's size is bounded like every other (``max_batch_bytes``: Meta batches).
* A signed body that is not a webhook (``WebhookMalformed``) → 400, nothing stored.
* Every message of a known number is stored durably through intake — as an SMS MO is: the same journal,
  fsynced, before the answer — as a :class:`~mogateway.core.message.Message` of origin
  ``whatsapp:<phone_number_id>`` whose source id is the wamid, so a webhook Meta delivers again is the
  same message (one row, one callback). Its type, and a media message's media id and MIME type, are in
  its notes (the timeline's first entry); the media itself is not fetched.
* A sender that is not an Indian number (``wa_id`` 91 and ten digits) is recorded as rejected and never
  reaches a client. A message for a ``phone_number_id`` not configured here is logged and skipped.
  Either way the webhook is answered 200, or Meta would deliver it again for days.
* If the journal cannot store the batch → 503 and nothing is acknowledged: Meta delivers it again.
* Statuses of replies (``sent``, ``delivered``, ``read``, ``failed``) are recorded on the message whose
  reply part has that wamid (``ReceiptStore.record_deliveries``, like SMPP receipts), in whatever order
  they come; a status for a wamid not known yet is looked for again a few times, then logged.
* Numbers with ``mark_read`` have each newly stored message marked read, after the answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import orjson
from fastapi import APIRouter, Request
from starlette.responses import PlainTextResponse, Response

from mogateway.api.openapi import documented
from mogateway.api.problems import ApiProblem
from mogateway.core.message import Arrival, Message, Rejection
from mogateway.core.whatsapp import (
    SIGNATURE_HEADER,
    InboundMessage,
    StatusUpdate,
    WebhookMalformed,
    handshake,
    parse_webhook,
    verify_signature,
)
from mogateway.core.whatsapp_member import member_json
from mogateway.service.throttle import Throttle

__all__ = ["WEBHOOK_PATH", "arrival_for", "router"]

WEBHOOK_PATH: Final = "/v1/whatsapp/webhook"
#: A status for a wamid the journal does not know yet (Meta was faster than the reply's record) is
#: looked for again after these delays.
STATUS_RETRY_DELAYS_S: Final = (0.5, 2.0, 5.0)

router = APIRouter(tags=["whatsapp"])
log = logging.getLogger("mogateway.whatsapp")
_throttle = Throttle(10.0)
_late: set[asyncio.Task[None]] = set()


def _settings(request: Request) -> Any:
    gateway = request.app.state.gateway
    wa = gateway.settings.whatsapp
    if wa is None:
        raise ApiProblem(
            404, "this gateway serves no WhatsApp number ([whatsapp] is not set)", kind="not-found"
        )
    return gateway, wa


def _say(key: str, level: int, text: str, *args: Any) -> None:
    held = _throttle.ready(key)
    if held is not None:
        log.log(level, text + "%s", *args, _throttle.more(held))


_TEXT: Final = {"text/plain": {"schema": {"type": "string"}}}
_GET_DOC: Final = documented(404, auth=None, ok_content=_TEXT)
_GET_DOC["responses"][403] = {
    "description": "Not hub.mode=subscribe with the verify token.",
    "content": _TEXT,
}
_ANSWER: Final = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {
                "ids": {"type": "array", "items": {"type": "string"}},
                "messages": {"type": "integer"},
                "duplicates": {"type": "integer"},
                "rejected": {"type": "integer"},
                "statuses": {"type": "integer"},
            },
        }
    }
}
_WEBHOOK_BODY: Final = {
    "required": True,
    "content": {"application/json": {"schema": {"type": "object", "description": "Meta's webhook, signed"}}},
}


@router.get(
    WEBHOOK_PATH,
    summary="WhatsApp webhook subscription handshake (Meta calls it)",
    description="404 when the gateway serves no WhatsApp number ([whatsapp] is not set).",
    **_GET_DOC,
)
async def webhook_handshake(request: Request) -> Response:
    _, wa = _settings(request)
    q = request.query_params
    answer = handshake(
        q.get("hub.mode"),
        q.get("hub.verify_token"),
        q.get("hub.challenge"),
        wa.verify_token.get_secret_value(),
    )
    if answer.status != 200:
        _say("handshake", logging.WARNING, "WhatsApp webhook handshake refused: %s", answer.reason)
        return PlainTextResponse("forbidden", status_code=403)
    return PlainTextResponse(answer.body)


def _is_indian(wa_id: str) -> bool:
    return len(wa_id) == 12 and wa_id.startswith("91") and wa_id.isdigit()


def _notes(m: InboundMessage) -> tuple[str, ...]:
    notes = [f"whatsapp {m.type}"]
    if m.media_id is not None:
        notes.append(f"media id {m.media_id}" + (f" ({m.mime_type})" if m.mime_type else ""))
    if m.reply_id is not None:
        notes.append(f"reply id {m.reply_id}")
    if m.context_wamid is not None:
        notes.append(f"in reply to {m.context_wamid}")
    notes.extend(f"error {e.code}: {e.title}" for e in m.errors)
    return tuple(notes)


def arrival_for(m: InboundMessage, business_number: str) -> Arrival:
    """The arrival a webhook's message is, for intake (its sender is checked there as for an SMS, after
    the country: a WhatsApp sender outside India is refused here, whatever its digits look like)."""
    problem = (
        None if _is_indian(m.sender) else Rejection("msisdn", "must be an Indian number (country code 91)")
    )
    message = Message(
        id="",
        shortcode=business_number,
        msisdn=m.sender,
        text=m.text,
        received_at=float(m.timestamp),
        origin=f"whatsapp:{m.phone_number_id}",
        source_id=m.wamid,
        notes=_notes(m),
        whatsapp=member_json(m.raw, m.profile_name),
    )
    return Arrival(message, problem=problem, first_seen_ms=m.timestamp * 1000)


@router.post(
    WEBHOOK_PATH,
    summary="WhatsApp webhook notifications (Meta calls it, signed with X-Hub-Signature-256)",
    description="401 for a missing or wrong signature (nothing is stored); 404 when the gateway serves "
    "no WhatsApp number; 503 when the journal could not store the messages (Meta delivers them again).",
    **documented(400, 401, 404, 413, 503, auth=None, ok_content=_ANSWER, body=_WEBHOOK_BODY),
)
async def webhook(request: Request) -> Response:
    gateway, wa = _settings(request)
    body = await request.body()
    if not verify_signature(body, request.headers.get(SIGNATURE_HEADER), wa.app_secret.get_secret_value()):
        client = request.client.host if request.client else "?"
        _say(
            "signature",
            logging.WARNING,
            "WhatsApp webhook refused from %s: missing or wrong signature",
            client,
        )
        raise ApiProblem(401, f"missing or wrong {SIGNATURE_HEADER}", kind="bad-signature")
    try:
        hook = parse_webhook(body)
    except WebhookMalformed as exc:
        _say("malformed", logging.WARNING, "WhatsApp webhook not understood: %s", exc.reason)
        raise ApiProblem(400, f"not a WhatsApp webhook: {exc.reason}", kind="invalid-webhook") from None

    arrivals: list[Arrival] = []
    for m in hook.messages:
        number = wa.number(m.phone_number_id)
        if number is None:
            _say(
                f"unknown:{m.phone_number_id}",
                logging.WARNING,
                "WhatsApp message %s for phone_number_id %s, not configured here: acknowledged, not stored",
                m.wamid,
                m.phone_number_id,
            )
            continue
        arrivals.append(arrival_for(m, number.display_phone_number))
    stored: list[Any] = []
    if arrivals:
        try:
            stored = await gateway.intake.accept(arrivals)
        except Exception as exc:
            log.error("could not store %d WhatsApp messages: %s: %s", len(arrivals), type(exc).__name__, exc)
            raise ApiProblem(
                503, "the journal could not store the messages; nothing was accepted", kind="unavailable"
            ) from None
    for problem in hook.problems:
        _say(
            "problems",
            logging.WARNING,
            "WhatsApp webhook error for %s: %s",
            problem.phone_number_id,
            problem.errors,
        )
    if hook.statuses:
        await _record_statuses(gateway, hook.statuses)
    channel = getattr(gateway, "whatsapp", None)
    if channel is not None:
        for arrival, result in zip(arrivals, stored, strict=True):
            number = wa.number(arrival.message.origin.partition(":")[2])
            if number is not None and number.mark_read and not result.duplicate and result.rejection is None:
                _spawn(channel.mark_read(number.phone_number_id, arrival.message.source_id))
    answer = {
        "ids": [r.id for r in stored],
        "messages": len(arrivals),
        "duplicates": sum(1 for r in stored if r.duplicate),
        "rejected": sum(1 for r in stored if r.rejection is not None and not r.duplicate),
        "statuses": len(hook.statuses),
    }
    return Response(orjson.dumps(answer), media_type="application/json")


def _receipt(s: StatusUpdate) -> tuple[str, str, str]:
    detail = "; ".join(
        f"code {e.code}: {e.title}" + (f": {e.details}" if e.details else "") for e in s.errors
    )
    return s.wamid, s.status.value, detail


async def _record_statuses(gateway: Any, statuses: tuple[StatusUpdate, ...]) -> None:
    receipts = [_receipt(s) for s in statuses]
    try:
        found = await gateway.journal.record_deliveries(receipts)
    except Exception as exc:
        log.error("could not record %d WhatsApp statuses: %s: %s", len(receipts), type(exc).__name__, exc)
        raise ApiProblem(503, "the journal could not record the statuses", kind="unavailable") from None
    unknown = [r for r, f in zip(receipts, found, strict=True) if f is None]
    if unknown:
        _spawn(_statuses_later(gateway, unknown))


async def _statuses_later(gateway: Any, receipts: list[tuple[str, str, str]]) -> None:
    for delay in STATUS_RETRY_DELAYS_S:
        await asyncio.sleep(delay)
        try:
            found = await gateway.journal.record_deliveries(receipts)
        except Exception as exc:
            log.error("recording WhatsApp statuses failed: %s", exc)
            return
        receipts = [r for r, f in zip(receipts, found, strict=True) if f is None]
        if not receipts:
            return
    for wamid, status, _ in receipts:
        log.info("WhatsApp status %s for unknown wamid %s", status, wamid)


def _spawn(coro: Any) -> None:
    task = asyncio.create_task(coro)
    _late.add(task)
    task.add_done_callback(_late.discard)
