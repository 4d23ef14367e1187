"""``GET /v1/whatsapp/media/{message_id}``: a stored WhatsApp message's media, streamed from Graph.

Rules stated before the code (the pure ones are ``core.whatsapp_media`` and ``core.media_url``):

* **Who may fetch.** (1) A signed URL — the callback's ``url`` (``?client=&exp=&sig=``): a bad signature
  → 403 ``bad-signature``, past its expiry → 403 ``url-expired``; a URL signed for the operator
  (``client=operator``, made by the console for a signed-in operator, valid a minute) counts as the
  admin token. (2) Without a signature, a bearer token: the admin token (the operator: any message), or
  the token of the client the message was routed to (while it is queued and not yet answered, the
  client it routes to: the one whose callback may be fetching it). Any other token, a message routed
  to another client, a message that does not exist or has no media: the same 404. No token at all: 401.
* **Without a ``[whatsapp]`` table** the route answers 404, as the webhook does.
* **Streaming.** The number's access token (from the message's origin, ``whatsapp:<phone_number_id>``)
  asks Graph for the media's URL and downloads it (``edges.whatsapp.media``); the bytes go to the client
  as they come (at most 64 KiB a read), never held whole, at the client's pace (a slow reader slows the
  download: uvicorn's write buffer pauses the sends). ``Content-Type`` is the message's MIME type (or
  the download's), ``Content-Length`` the download's (or Graph's ``file_size``).
* **Checks.** A size above ``whatsapp_media_max_bytes`` (Graph's ``file_size`` or the download's
  ``Content-Length``) is refused before a byte is sent (502 ``media-too-large``). The sha256 is computed
  while streaming and the last chunk is held back until it is known: a digest that differs from the
  webhook's (or a body shorter or longer than announced) ends the answer without its last chunk — the
  client sees a truncated body, never a complete wrong file — and is logged and counted.
* **Failures** before the first byte are problem documents: 410 ``media-expired`` (Graph no longer has
  it), 502 ``graph-error``/``graph-unreachable``, 504 ``graph-timeout``, 429 ``busy`` when the client
  already has ``whatsapp_media_client_concurrency`` fetches in flight in this process.
* Metrics: ``mogateway_whatsapp_media_fetches_total{result}``, ``…_media_bytes_total``, the time to the
  first and to the last byte. Nothing of any token is logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mogateway.api.auth import bearer_of
from mogateway.api.openapi import documented
from mogateway.api.problems import ApiProblem
from mogateway.core.ids import ID_SHAPE
from mogateway.core.media_url import EXPIRED, MEDIA_PATH, check
from mogateway.core.message import Message
from mogateway.core.ports import MessageRecord
from mogateway.core.timeline import State
from mogateway.core.whatsapp_media import MediaRef, expected_digest, media_of, too_large
from mogateway.edges.whatsapp.media_store import StoreWriter
from mogateway.service.throttle import Throttle

__all__ = ["MEDIA_ROUTE", "OPERATOR", "prefetch_media", "router"]

MEDIA_ROUTE: Final = MEDIA_PATH.format("{message_id}")
#: The ``client`` of a URL signed for the operator (the console): never a client id (``cl_…``).
OPERATOR: Final = "operator"

router = APIRouter(tags=["whatsapp"])
log = logging.getLogger("mogateway.whatsapp")
# Set when this request's answer is left unfinished on purpose (a cut body): uvicorn then logs "ASGI
# callable returned without completing response." at ERROR, in the same task; the line above it (ours)
# says why, so that one is dropped for these requests only.
_cut_on_purpose: ContextVar[bool] = ContextVar("media_cut_on_purpose", default=False)


class _PurposefulCut(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_cut_on_purpose.get() and "without completing response" in str(record.msg))


logging.getLogger("uvicorn.error").addFilter(_PurposefulCut())
_throttle = Throttle(10.0)
# Fetches in flight in this process, by client id (or OPERATOR).
_in_flight: dict[str, int] = {}

_NOT_FOUND: Final = "no media for this message"
_MEDIA_CONTENT: Final = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def _not_found() -> ApiProblem:
    return ApiProblem(404, _NOT_FOUND, kind="not-found")


def _acquire(gateway: Any, who: str) -> None:
    """Take one of ``who``'s fetch slots in this process, or refuse with 429."""
    limit = gateway.settings.whatsapp_media_client_concurrency
    if _in_flight.get(who, 0) >= limit:
        gateway.metrics.whatsapp_media_fetches.labels("busy").inc()
        raise ApiProblem(
            429,
            f"already {limit} media fetches in flight for this client (whatsapp_media_client_concurrency)",
            kind="busy",
            retry_after_s=1,
        )
    _in_flight[who] = _in_flight.get(who, 0) + 1


def _release(who: str) -> None:
    left = _in_flight.get(who, 1) - 1
    if left > 0:
        _in_flight[who] = left
    else:
        _in_flight.pop(who, None)


async def _record(gateway: Any, message_id: str) -> MessageRecord:
    if not ID_SHAPE.match(message_id):
        raise _not_found()
    record: MessageRecord | None = await gateway.journal.get(message_id)
    if record is None or record.message.channel != "whatsapp":
        raise _not_found()
    return record


async def _authorised(request: Request, gateway: Any, message_id: str) -> tuple[MessageRecord, str]:
    """The message and who asks for it (a client id or OPERATOR), or the problem refusing it."""
    q = request.query_params
    if "sig" in q:
        client_id = q.get("client", "")
        reason = check(
            gateway.media_url_keys, message_id, client_id, q.get("exp", ""), q.get("sig", ""), time.time()
        )
        if reason is not None:
            raise ApiProblem(403, reason, kind="url-expired" if reason == EXPIRED else "bad-signature")
        return await _record(gateway, message_id), client_id
    token = bearer_of(request)
    if token is None:
        raise ApiProblem(
            401, "missing bearer token (use your client token, or a signed URL)", kind="unauthorized"
        )
    if gateway.admin_token and hmac.compare_digest(token.encode(), gateway.admin_token.encode()):
        return await _record(gateway, message_id), OPERATOR
    record = await _record(gateway, message_id)
    await gateway.registry.refresh_if_changed()  # a token rotated on another node a moment ago
    if record.client_id is not None:
        client = gateway.registry.get(record.client_id)
    elif record.state is State.QUEUED:
        # Not answered yet: the journal names the client with the answer (service.dispatcher), and an
        # application fetches the media while it handles the callback. Its client is the one the
        # message is routed to, the one being called back.
        client = gateway.registry.route(record.message.shortcode, record.message.text)
    else:
        client = None  # finished without a client (unroutable, rejected): nobody's
    if client is None or not hmac.compare_digest(token.encode(), client.token.encode()):
        raise _not_found()
    return record, client.id


@router.get(
    MEDIA_ROUTE,
    summary="The media of a WhatsApp message, streamed from Meta (signed URL or bearer token)",
    description="Authorised by the callback's signed `url`, the token of the client the message was "
    "routed to, or the admin token; 403 for a bad or expired signature, 404 for anything else it cannot "
    "show (another client's message included), 410 when Meta no longer has the media, 502/504 when "
    "Graph fails, 429 when the client has too many fetches in flight. The body is the media itself.",
    **documented(401, 403, 404, 410, 429, 502, 504, auth=None, ok_content=_MEDIA_CONTENT),
)
async def media(request: Request, message_id: str) -> Response:
    gateway = request.app.state.gateway
    if gateway.settings.whatsapp is None:
        raise ApiProblem(
            404, "this gateway serves no WhatsApp number ([whatsapp] is not set)", kind="not-found"
        )
    record, who = await _authorised(request, gateway, message_id)
    return await stream_media(gateway, record, who)


async def stream_media(gateway: Any, record: MessageRecord, who: str) -> Response:
    """The streaming answer for ``record``'s media, fetched on behalf of ``who``."""
    wa = gateway.settings.whatsapp
    ref = media_of(record.message.whatsapp)
    number = wa.number(record.message.origin.partition(":")[2]) if wa is not None else None
    fetcher = getattr(gateway, "whatsapp_media", None)
    if ref is None or number is None or fetcher is None:
        raise _not_found()
    metrics = gateway.metrics
    limit = gateway.settings.whatsapp_media_max_bytes
    started = time.monotonic()
    _acquire(gateway, who)  # released by the stream after its last byte, or here on a failure
    store = getattr(gateway, "whatsapp_media_store", None)
    kept = await store.open(record.id) if store is not None else None
    if kept is not None:  # the copy kept whole and checked when it was written (edges.whatsapp.media_store)
        size, chunks = kept
        source = _Source(chunks, _nothing, ref.mime_type, size, None)
        return MediaStream(gateway, record.id, ref, source, limit, started, who)
    # loaded with the fetcher (node.py: with a [whatsapp] table), aiohttp with it
    from mogateway.edges.whatsapp.media import MediaFetchError

    try:
        download = await fetcher.open(ref.media_id, number.access_token.get_secret_value())
    except MediaFetchError as exc:
        _release(who)
        failure = exc.failure
        metrics.whatsapp_media_fetches.labels(failure.kind.replace("-", "_").removeprefix("media_")).inc()
        _say(failure.kind, "WhatsApp media of message %s: %s", record.id, failure.detail)
        raise ApiProblem(failure.status, failure.detail, kind=failure.kind) from None
    except BaseException:
        _release(who)
        raise
    size = download.content_length if download.content_length is not None else download.location.file_size
    if too_large(size, limit) or too_large(download.location.file_size, limit):
        await download.aclose()
        _release(who)
        metrics.whatsapp_media_fetches.labels("too_large").inc()
        raise ApiProblem(
            502,
            f"the media is {size or download.location.file_size} bytes, more than "
            f"whatsapp_media_max_bytes={limit}",
            kind="media-too-large",
        )
    digest = expected_digest(ref.sha256) or expected_digest(download.location.sha256)
    source = _Source(download.chunks(), download.aclose, download.content_type, size, digest)
    writer = store.writer(record.id) if store is not None else None
    return MediaStream(gateway, record.id, ref, source, limit, started, who, writer)


async def _nothing() -> None:
    return None


@dataclass
class _Source:
    """Where the bytes come from: Graph's download or the kept copy."""

    chunks: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]
    content_type: str
    size: int | None
    digest: bytes | None  # None: checked already (the kept copy)


async def prefetch_media(gateway: Any, message: Message) -> None:
    """Keep ``message``'s media in the store now (``whatsapp_media_store``), as it comes: spawned by
    the webhook for each newly stored media message. Failures are logged by the store, never raised."""
    store = getattr(gateway, "whatsapp_media_store", None)
    fetcher = getattr(gateway, "whatsapp_media", None)
    wa = gateway.settings.whatsapp
    ref = media_of(message.whatsapp)
    number = wa.number(message.origin.partition(":")[2]) if wa is not None else None
    if store is None or fetcher is None or ref is None or number is None:
        return
    limit = gateway.settings.whatsapp_media_max_bytes

    async def fetch(writer: StoreWriter) -> None:
        download = await fetcher.open(ref.media_id, number.access_token.get_secret_value())
        try:
            size = (
                download.content_length
                if download.content_length is not None
                else download.location.file_size
            )
            if too_large(size, limit):
                return
            async for chunk in download.chunks():
                writer.write(chunk)
                if writer.size > limit:
                    return
            digest = expected_digest(ref.sha256) or expected_digest(download.location.sha256)
            if not await writer.finish(digest, size):
                _say(
                    "store", "WhatsApp media of message %s not kept: not whole, or not its sha256", message.id
                )
        finally:
            await download.aclose()

    await store.prefetch(message.id, fetch)


def _say(key: str, text: str, *args: Any) -> None:
    held = _throttle.ready(f"media:{key}")
    if held is not None:
        log.warning(text + "%s", *args, _throttle.more(held))


def _disposition(ref: MediaRef) -> str:
    if ref.filename:
        return f"attachment; filename*=UTF-8''{quote(ref.filename, safe='')}"
    return "inline"


class MediaStream(Response):
    """The media's bytes as they come (module docstring: the last chunk waits for the sha256); a
    ``writer`` (the store) gets every chunk and keeps the file when it is whole."""

    def __init__(
        self,
        gateway: Any,
        message_id: str,
        ref: MediaRef,
        source: _Source,
        limit: int,
        started: float,
        who: str,
        writer: StoreWriter | None = None,
    ) -> None:
        headers = {"cache-control": "private, no-store", "content-disposition": _disposition(ref)}
        if source.size is not None:
            headers["content-length"] = str(source.size)
        super().__init__(
            status_code=200,
            headers=headers,
            media_type=ref.mime_type or source.content_type or "application/octet-stream",
        )
        self._gateway = gateway
        self._id = message_id
        self._source = source
        self._size = source.size
        self._digest = source.digest
        self._limit = limit
        self._started = started
        self._who = who
        self._writer = writer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            result = await self._stream(send, gone)
        finally:
            watcher.cancel()
            if self._writer is not None:
                self._writer.abandon()  # a no-op once kept
            await self._source.close()
            _release(self._who)
        self._gateway.metrics.whatsapp_media_fetches.labels(result).inc()

    async def _stream(self, send: Send, gone: asyncio.Event) -> str:
        from mogateway.edges.whatsapp.media import MediaFetchError  # loaded with the fetcher, see above

        metrics = self._gateway.metrics
        writer = self._writer
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        metrics.whatsapp_media_first_byte.observe(time.monotonic() - self._started)
        hasher = hashlib.sha256()
        held = b""
        count = 0
        try:
            async for chunk in self._source.chunks:
                if gone.is_set():
                    return "disconnected"
                if held:
                    await send({"type": "http.response.body", "body": held, "more_body": True})
                    metrics.whatsapp_media_bytes.inc(len(held))
                hasher.update(chunk)
                if writer is not None:
                    writer.write(chunk)
                count += len(chunk)
                held = chunk
                if count > self._limit or (self._size is not None and count > self._size):
                    return self._cut("short", "more bytes than announced (%d so far)", count)
        except MediaFetchError as exc:
            return self._cut("short", "the download broke: %s", exc.failure.detail)
        if self._size is not None and count != self._size:
            return self._cut("short", "%d bytes instead of the %d announced", count, self._size)
        if self._digest is not None and hasher.digest() != self._digest:
            return self._cut("sha256_mismatch", "its sha256 is not the webhook's (%d bytes)", count)
        if writer is not None:
            await writer.finish(self._digest, count)
        await send({"type": "http.response.body", "body": held, "more_body": False})
        metrics.whatsapp_media_bytes.inc(len(held))
        metrics.whatsapp_media_seconds.observe(time.monotonic() - self._started)
        return "ok"

    def _cut(self, result: str, why: str, *args: Any) -> str:
        """Leave the answer unfinished (the server closes the connection: the client sees it cut)."""
        _cut_on_purpose.set(True)
        _say(result, "WhatsApp media of message %s cut short: " + why, self._id, *args)
        return result
