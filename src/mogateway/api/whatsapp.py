"""The WhatsApp webhook endpoint (``/v1/whatsapp/webhook``): Meta delivers the numbers' messages here.

Rules stated before the code (the facts are in ``core.whatsapp``; the settings in ``config.whatsapp``):

* Without a ``[whatsapp]`` table both methods answer 404: the gateway serves no WhatsApp number.
* ``GET`` is the subscription handshake: ``hub.mode=subscribe`` with the configured verify token → 200
  and the challenge as the whole body (text/plain); anything else → 403.
* ``POST`` checks ``X-Hub-Signature-256`` over the raw bytes received, in constant time. A missing or
  malformed header → 401 before a byte of the body is read; the HMAC is computed while the body is
  read, and a wrong one → 401, nothing stored; one log line per 10 s however many come. The body is
  bounded by its own limit, ``[whatsapp] max_webhook_bytes`` (1 MiB; 413 beyond, by content-length
  before anything is read or while it streams: ``api.limits``), and at most ``max_webhook_items``
  messages and statuses of one body are taken (the rest are left out, counted as ``too_many``).
* A signed body that is not JSON (``WebhookMalformed``) → 400, nothing stored. Any signed JSON body is
  answered 200 whatever its shape (a non-2xx makes Meta deliver it again for days): each message and
  status is taken or left on its own (``core.whatsapp``), and what is left out — unreadable parts, a
  message for a number not configured here — is counted in ``mogateway_whatsapp_left_out{reason}`` and
  logged once per reason and 10 s, with where and why, never a traceback.
* Every message of a known number is stored durably through intake — as an SMS MO is: the same journal,
  fsynced, before the answer — as a :class:`~mogateway.core.message.Message` of origin
  ``whatsapp:<phone_number_id>`` whose source id is the wamid, so a webhook Meta delivers again is the
  same message (one row, one callback). Its type, and a media message's media id and MIME type, are in
  its notes (the timeline's first entry); the media itself is fetched only when asked for
  (``api.whatsapp_media``).
* A sender that is not an Indian number (``wa_id`` 91 and ten digits) is recorded as rejected and never
  reaches a client; so is a person who came with a business-scoped user id only (a WhatsApp username
  user: the callback's ``msisdn`` is an Indian number, and there is none), the message stored with its
  user id as ``msisdn`` and in its notes, and a group message (``group_id``). A removed reaction, a
  deleted message and a system notice are recorded as rejected (field ``type``) too: they are not a
  person's message (``core.whatsapp.stored_only``). A message without a timestamp is dated when it
  arrives. A message for a ``phone_number_id`` not configured here is logged and skipped. Either way the
  webhook is answered 200, or Meta would deliver it again for days.
* A message's id is derived from its number and wamid only (``whatsapp:<phone_number_id>:<wamid>``),
  never from Meta's timestamp: the same wamid with another timestamp is the same message. A message
  sent more than ``[whatsapp] max_message_age_s`` ago (8 days: longer than Meta's retries, 7 days) is
  answered 200, not stored, counted (``too_old``); one whose row retention deleted within that window
  (``whatsapp_seen``, kept by ``service.retention``) likewise (``replayed``): a re-posted signed body
  is never stored and answered twice.
* If the journal cannot store the batch → 503 and nothing is acknowledged: Meta delivers it again.
* Admission control (``service.admission``): while this worker holds more than ``[whatsapp]
  max_pending_webhook_messages`` messages it accepted and has not answered yet, a webhook is answered
  503 before a byte of it is read, and Meta delivers it again later — refusing early is safe, accepting
  and then failing to reply in time is not (issue 38).
* Statuses of replies (``sent``, ``delivered``, ``read``, ``failed``) are recorded on the message whose
  reply part has that wamid (``ReceiptStore.record_deliveries``, like SMPP receipts), in whatever order
  they come, matched by the wamid alone (``recipient_id`` may be missing); a status for a wamid not
  known yet is looked for again a few times, then logged. A status is applied only to a reply sent from
  the ``phone_number_id`` it came with: one whose wamid is a reply of another number (or an SMS part) is
  acknowledged, not applied, and counted (``other_number``) — every number's webhooks are signed with
  the same app secret, so a number's webhook must not move another number's message.
* Numbers with ``mark_read`` have each newly stored message marked read, after the answer.
* With ``whatsapp_media_store`` set, each newly stored media message's media is fetched into the store
  after the answer (``api.whatsapp_media.prefetch_media``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Final, NoReturn

import orjson
from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mogateway.api.openapi import documented
from mogateway.api.problems import ApiProblem
from mogateway.api.problems import problem as problem_answer
from mogateway.api.whatsapp_media import prefetch_media
from mogateway.core.message import Arrival, Message, Rejection, id_for_source
from mogateway.core.whatsapp import (
    SIGNATURE_HEADER,
    BodySignature,
    InboundMessage,
    StatusUpdate,
    Unread,
    Webhook,
    WebhookMalformed,
    handshake,
    parse_webhook,
    signature_given,
    stored_only,
)
from mogateway.core.whatsapp_media import media_of
from mogateway.core.whatsapp_member import member_json
from mogateway.service.intake import MAX_SOURCE_ID
from mogateway.service.throttle import Throttle

__all__ = ["WEBHOOK_PATH", "WebhookFastPath", "arrival_for", "router"]

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
    notes = [f"whatsapp {m.type}"]  # first: ``core.whatsapp.withholds_reply`` reads it
    if m.user_id is not None:
        notes.append(f"user id {m.user_id}")
    if m.group_id is not None:
        notes.append(f"group {m.group_id}")
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
    problem = _problem(m)
    message = Message(
        id="",
        shortcode=business_number,
        msisdn=m.sender or m.user_id or "",
        text=m.text,
        received_at=float(m.timestamp),
        origin=f"whatsapp:{m.phone_number_id}",
        source_id=m.wamid,
        notes=_notes(m),
        whatsapp=member_json(m.raw, m.profile_name),
    )
    return Arrival(message, problem=problem)  # its id: the number and the wamid only, never the time


def _problem(m: InboundMessage) -> Rejection | None:
    """Why ``m`` is stored refused and never called back, or None (the module docstring's rules)."""
    event = stored_only(m)
    if event is not None:
        return Rejection("type", event)
    if not m.sender:
        return Rejection(
            "msisdn",
            "a WhatsApp user with a business-scoped user id and no phone number: not an Indian number",
        )
    if not _is_indian(m.sender):
        return Rejection("msisdn", "must be an Indian number (country code 91)")
    if m.group_id is not None:
        return Rejection("group_id", "a WhatsApp group message: groups are not answered")
    return None


def _left_out(gateway: Any, reason: str, detail: str, *args: Any) -> None:
    """Count a part of a signed webhook that is acknowledged but not taken; log once per reason."""
    gateway.metrics.whatsapp_left_out.labels(reason).inc()
    _say(f"left-out:{reason}", logging.WARNING, "WhatsApp webhook: left out (%s): " + detail, reason, *args)


def _bad_signature(request: Request) -> NoReturn:
    client = request.client.host if request.client else "?"
    _say(
        "signature",
        logging.WARNING,
        "WhatsApp webhook refused from %s: missing or wrong signature",
        client,
    )
    raise ApiProblem(401, f"missing or wrong {SIGNATURE_HEADER}", kind="bad-signature")


def _busy(admission: Any) -> NoReturn:
    _say(
        "busy",
        logging.WARNING,
        "WhatsApp webhooks refused (503, Meta delivers them again): this worker holds %d unanswered "
        "messages, more than max_pending_webhook_messages=%d",
        admission.held(),
        admission.bound,
    )
    raise ApiProblem(
        503,
        "the gateway is busy answering the messages it holds; deliver this webhook again later",
        kind="unavailable",
    )


def _capped(gateway: Any, hook: Webhook, most: int) -> Webhook:
    """``hook`` with at most ``most`` messages and statuses (messages first); the rest counted."""
    over = len(hook.messages) + len(hook.statuses) - most
    if over <= 0:
        return hook
    gateway.metrics.whatsapp_left_out.labels("too_many").inc(over)
    _say(
        "left-out:too_many",
        logging.WARNING,
        "WhatsApp webhook: left out (too_many): %d items beyond max_webhook_items=%d",
        over,
        most,
    )
    messages = hook.messages[:most]
    return dataclasses.replace(hook, messages=messages, statuses=hook.statuses[: most - len(messages)])


async def _not_replayed(gateway: Any, arrivals: list[Arrival]) -> list[Arrival]:
    """``arrivals`` without the messages retention deleted within the replay window (a re-posted body
    of them is acknowledged, not stored and answered again)."""
    if not arrivals or gateway.settings.message_retention_days <= 0:
        return arrivals  # retention deletes nothing: the journal's own rows make a redelivery one message
    ids = [
        id_for_source(f"{a.message.origin}:{(a.message.source_id or '')[:MAX_SOURCE_ID]}") for a in arrivals
    ]
    try:
        seen = await _reads(gateway.journal).seen(ids)
    except Exception as exc:
        log.error("could not read the WhatsApp replay window: %s: %s", type(exc).__name__, exc)
        raise ApiProblem(
            503, "the journal could not be read; nothing was accepted", kind="unavailable"
        ) from None
    kept = []
    for arrival, mid in zip(arrivals, ids, strict=True):
        if mid in seen:
            _left_out(
                gateway,
                "replayed",
                "message %s was stored and deleted by retention already",
                arrival.message.source_id,
            )
        else:
            kept.append(arrival)
    return kept


class _MergedReads:
    """The journal reads of concurrent webhooks by key (the replay window's ids, the statuses' reply
    wamids), merged: while one read runs, the keys of the webhooks that arrive meanwhile wait and go
    in the next read together — one journal read for many webhooks under load — and each webhook gets
    the part of the answer for its own keys."""

    def __init__(self, read: Callable[[list[str]], Awaitable[Any]]) -> None:
        self._read = read
        self._waiting: list[tuple[list[str], asyncio.Future[Any]]] = []
        self._reading = False

    async def __call__(self, keys: list[str]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((keys, future))
        if not self._reading:
            self._reading = True
            _spawn(self._read_all())
        return await future

    async def _read_all(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                wanted = list(dict.fromkeys(k for keys, _ in batch for k in keys))
                try:
                    found = await self._read(wanted)
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for keys, future in batch:
                    if not future.done():
                        future.set_result(_part(found, keys))
        finally:
            self._reading = False


def _part(found: Any, keys: list[str]) -> Any:
    """What of a merged read's answer (a set of keys, or a mapping by key) concerns ``keys``."""
    if isinstance(found, dict):
        return {k: found[k] for k in keys if k in found}
    return set(found).intersection(keys)


class _JournalReads:
    __slots__ = ("origins", "seen")

    def __init__(self, journal: Any) -> None:
        self.seen = _MergedReads(journal.seen_whatsapp)
        self.origins = _MergedReads(journal.reply_origins)


_merged: weakref.WeakKeyDictionary[Any, _JournalReads] = weakref.WeakKeyDictionary()


def _reads(journal: Any) -> _JournalReads:
    reads = _merged.get(journal)
    if reads is None:
        reads = _merged[journal] = _JournalReads(journal)
    return reads


def _unread(gateway: Any, unread: tuple[Unread, ...]) -> None:
    for u in unread:
        _left_out(gateway, u.kind, "%s", u.reason)


@router.post(
    WEBHOOK_PATH,
    summary="WhatsApp webhook notifications (Meta calls it, signed with X-Hub-Signature-256)",
    description="401 for a missing or wrong signature (nothing is stored); 404 when the gateway serves "
    "no WhatsApp number; 503 when the journal could not store the messages or the gateway is too busy "
    "to take more (Meta delivers them again).",
    **documented(400, 401, 404, 413, 503, auth=None, ok_content=_ANSWER, body=_WEBHOOK_BODY),
)
async def webhook(request: Request) -> Response:
    gateway, wa = _settings(request)
    admission = getattr(gateway, "admission", None)
    if admission is not None and not admission.admits("whatsapp"):
        _busy(admission)  # before a byte is read: refusing must cost next to nothing
    secret = wa.app_secret.get_secret_value()
    given = signature_given(request.headers.get(SIGNATURE_HEADER))
    if given is None or not secret:
        _bad_signature(request)  # before a byte of the body is read
    signature = BodySignature(secret)
    chunks: list[bytes] = []
    async for chunk in request.stream():  # at most max_webhook_bytes (api.limits), else 413
        signature.update(chunk)
        chunks.append(chunk)
    if not signature.matches(given):
        _bad_signature(request)
    body = b"".join(chunks)
    try:
        hook = parse_webhook(body)
    except WebhookMalformed as exc:
        _say("malformed", logging.WARNING, "WhatsApp webhook not understood: %s", exc.reason)
        raise ApiProblem(400, f"not a WhatsApp webhook: {exc.reason}", kind="invalid-webhook") from None
    _unread(gateway, hook.unread)
    hook = _capped(gateway, hook, wa.max_webhook_items)

    arrivals: list[Arrival] = []
    now = time.time()
    for m in hook.messages:
        number = wa.number(m.phone_number_id)
        if number is None:
            _left_out(
                gateway,
                "unknown_number",
                "message %s for phone_number_id %s, not configured here",
                m.wamid,
                m.phone_number_id,
            )
            continue
        if m.timestamp <= 0:  # none that reads: dated as it arrives
            m = dataclasses.replace(m, timestamp=int(now))
        elif now - m.timestamp > wa.max_message_age_s:
            _left_out(
                gateway,
                "too_old",
                "message %s sent %d s ago, more than max_message_age_s=%d: a replay",
                m.wamid,
                int(now - m.timestamp),
                wa.max_message_age_s,
            )
            continue
        arrivals.append(arrival_for(m, number.display_phone_number))
    arrivals = await _not_replayed(gateway, arrivals)
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
    if getattr(gateway, "whatsapp_media_store", None) is not None:  # whatsapp_media_store: kept now
        for arrival, result in zip(arrivals, stored, strict=True):
            if not result.duplicate and result.rejection is None and media_of(arrival.message.whatsapp):
                _spawn(prefetch_media(gateway, dataclasses.replace(arrival.message, id=result.id)))
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


class WebhookFastPath:
    """ASGI: ``POST /v1/whatsapp/webhook`` answered by :func:`webhook` directly, everything else by
    ``app``.

    Meta's webhooks are as hot a path as SMS ingest, one message per request. FastAPI's own layers
    (its middleware stack, the routers matched in order, dependency solving, the exception middleware)
    were about a third of a worker's GIL time per webhook at saturation (``py-spy record --gil``;
    docs/benchmarks.md §6.1) and do nothing this handler needs: it reads its body itself and answers
    every expected failure as a problem document. So it is called here, inside the gateway's own
    outer layers (``api.limits.BodyLimit``: the webhook's size limit, 413; ``api.headers``: security
    headers), with the same answers FastAPI's handlers would give (``api.problems``). The route stays
    declared for the OpenAPI document and for the other methods (GET is the handshake).
    """

    def __init__(self, app: ASGIApp, fastapi_app: Any) -> None:
        self.app = app
        self._fastapi_app = fastapi_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != WEBHOOK_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        scope["app"] = self._fastapi_app  # what Request.app reads (the gateway is in its state)
        try:
            response = await webhook(Request(scope, receive))
        except ApiProblem as exc:
            response = problem_answer(exc.status, exc.detail, kind=exc.kind, **exc.extra)
        except ClientDisconnect:
            response = problem_answer(400, "the client went away before the request body was complete")
        except Exception:
            logging.getLogger("mogateway.api").exception("unexpected error")
            response = problem_answer(500, "internal error; see the gateway log")
        await response(scope, receive, send)


def _receipt(s: StatusUpdate) -> tuple[str, str, str]:
    detail = "; ".join(
        f"code {e.code}: {e.title}" + (f": {e.details}" if e.details else "") for e in s.errors
    )
    return s.wamid, s.status.value, detail


async def _record_statuses(gateway: Any, statuses: tuple[StatusUpdate, ...]) -> None:
    try:
        mine = await _of_their_number(gateway, list(statuses))
        found = await gateway.journal.record_deliveries([_receipt(s) for s in mine])
    except Exception as exc:
        log.error("could not record %d WhatsApp statuses: %s: %s", len(statuses), type(exc).__name__, exc)
        raise ApiProblem(503, "the journal could not record the statuses", kind="unavailable") from None
    unknown = [s for s, f in zip(mine, found, strict=True) if f is None]
    if unknown:
        _spawn(_statuses_later(gateway, unknown))


async def _of_their_number(gateway: Any, statuses: list[StatusUpdate]) -> list[StatusUpdate]:
    """``statuses`` without those whose wamid is a reply sent from another number than the
    ``phone_number_id`` they came with (counted as ``other_number``); an unknown wamid is kept."""
    if not statuses:
        return statuses
    origins = await _reads(gateway.journal).origins([s.wamid for s in statuses])
    kept = []
    for s in statuses:
        origin = origins.get(s.wamid)
        if origin is None or origin == f"whatsapp:{s.phone_number_id}":
            kept.append(s)
        else:
            _left_out(
                gateway,
                "other_number",
                "status %s of %s came with phone_number_id %s; that reply went out through %s",
                s.status.value,
                s.wamid,
                s.phone_number_id,
                origin,
            )
    return kept


async def _statuses_later(gateway: Any, statuses: list[StatusUpdate]) -> None:
    for delay in STATUS_RETRY_DELAYS_S:
        await asyncio.sleep(delay)
        try:
            statuses = await _of_their_number(gateway, statuses)
            found = await gateway.journal.record_deliveries([_receipt(s) for s in statuses])
        except Exception as exc:
            log.error("recording WhatsApp statuses failed: %s", exc)
            return
        statuses = [s for s, f in zip(statuses, found, strict=True) if f is None]
        if not statuses:
            return
    for s in statuses:
        log.info("WhatsApp status %s for unknown wamid %s", s.status.value, s.wamid)


def _spawn(coro: Any) -> None:
    task = asyncio.create_task(coro)
    _late.add(task)
    task.add_done_callback(_late.discard)
