"""Sending WhatsApp replies through the Graph API: ``POST {graph_url}/{version}/{phone_number_id}/messages``.

An asyncio client over httpx (already a dependency; the callback client ``edges/http1.py`` refuses
loopback and private addresses by design, which a Graph URL pointing at a fake must reach). The rules of
what to send and what an error means are pure and live in ``core/whatsapp_send.py``; this module only
carries them over HTTP:

* ``Authorization: Bearer <access token>`` per call (a token per number); the token is never logged and
  never appears in an error's text.
* Every call has one overall deadline (``timeout_s``, covering connect, send and the whole answer, so a
  server that trickles its answer cannot hold a call longer), and at most ``max_answer_bytes`` of an
  answer are read. Redirects are not followed.
* A success is a 2xx whose body names the new message's wamid. Anything else raises
  :class:`GraphSendError` carrying a :class:`~mogateway.core.whatsapp_send.SendFailure`: Graph's error
  envelope classified by its ``code``; an answer that is not Graph's by its HTTP status (5xx, 408, 429 →
  retry); no answer at all (refused, reset, timed out) → retry. ``maybe_sent`` tells a lost answer (the
  request reached Graph and may have been taken) from a refused connection (it did not).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import httpx

from mogateway.core.whatsapp_send import (
    SendAction,
    SendFailure,
    classify_answer,
    mark_read_request,
    message_request,
    network_failure,
    parse_send_answer,
    text_message,
)

__all__ = ["DEFAULT_GRAPH_URL", "GraphSendError", "GraphSender"]

DEFAULT_GRAPH_URL = "https://graph.facebook.com"
_VERSION = re.compile(r"^v\d{1,3}\.\d{1,3}$")
_ID = re.compile(r"^\d{1,32}$")
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class GraphSendError(Exception):
    """A send or mark-read that failed; ``failure`` says why and what to do, ``sent`` lists the wamids of
    the parts of the same text that did go out before it (:meth:`GraphSender.send_parts`)."""

    def __init__(self, failure: SendFailure, sent: tuple[str, ...] = ()) -> None:
        code = "" if failure.code is None else f" (code {failure.code})"
        super().__init__(f"{failure.action}: {failure.title}{code}: {failure.details}")
        self.failure = failure
        self.sent = sent


class GraphSender:
    """One client for all numbers (connections are pooled per Graph host). Close it with :meth:`aclose`."""

    def __init__(
        self,
        graph_url: str = DEFAULT_GRAPH_URL,
        api_version: str = "v21.0",
        *,
        timeout_s: float = 10.0,
        max_answer_bytes: int = 64 * 1024,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not graph_url.startswith(("https://", "http://")):
            raise ValueError("graph_url must be an http(s) URL")
        if not _VERSION.match(api_version):
            raise ValueError("api_version must look like v21.0")
        if timeout_s <= 0 or max_answer_bytes <= 0:
            raise ValueError("timeout_s and max_answer_bytes must be positive")
        self.graph_url = graph_url.rstrip("/")
        self.api_version = api_version
        self.timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=max_connections),
            follow_redirects=False,
            transport=transport,
            headers={"User-Agent": "mogateway", "Content-Type": "application/json"},
        )

    def messages_url(self, phone_number_id: str) -> str:
        """``{graph_url}/{api_version}/{phone_number_id}/messages``."""
        return f"{self.graph_url}/{self.api_version}/{phone_number_id}/messages"

    async def send_text(
        self, phone_number_id: str, access_token: str, to: str, body: str, *, context_wamid: str | None = None
    ) -> str:
        """Send one text (at most 4,096 characters: split first) to ``to``; returns its wamid."""
        return await self.send_message(
            phone_number_id, access_token, to, text_message(body), context_wamid=context_wamid
        )

    async def send_message(
        self,
        phone_number_id: str,
        access_token: str,
        to: str,
        message: dict[str, Any],
        *,
        context_wamid: str | None = None,
    ) -> str:
        """Send one message object (``core.whatsapp_answer``: checked first) to ``to``; returns its wamid."""
        answer = await self._post(phone_number_id, access_token, message_request(to, message, context_wamid))
        wamid = parse_send_answer(answer)
        if wamid is None:
            raise GraphSendError(
                SendFailure(
                    SendAction.FAIL_NOW,
                    None,
                    "answer without a wamid",
                    "Graph answered 2xx without messages[0].id",
                    200,
                    maybe_sent=True,
                )
            )
        return wamid

    async def send_parts(
        self,
        phone_number_id: str,
        access_token: str,
        to: str,
        parts: Sequence[str],
        *,
        context_wamid: str | None = None,
    ) -> list[str]:
        """Send ``parts`` (from ``core.whatsapp_send.split_text``) in order, the first as a reply to
        ``context_wamid``; returns their wamids. A failure raises :class:`GraphSendError` whose ``sent``
        holds the wamids of the parts already sent (resume with ``parts[len(sent):]``)."""
        messages = [text_message(part) for part in parts]
        return await self.send_messages(
            phone_number_id, access_token, to, messages, context_wamid=context_wamid
        )

    async def send_messages(
        self,
        phone_number_id: str,
        access_token: str,
        to: str,
        messages: Sequence[dict[str, Any]],
        *,
        context_wamid: str | None = None,
    ) -> list[str]:
        """Send ``messages`` in order, the first as a reply to ``context_wamid``; returns their wamids. A
        failure raises :class:`GraphSendError` whose ``sent`` holds the wamids of those already sent
        (resume with ``messages[len(sent):]``)."""
        sent: list[str] = []
        for i, message in enumerate(messages):
            try:
                sent.append(
                    await self.send_message(
                        phone_number_id,
                        access_token,
                        to,
                        message,
                        context_wamid=context_wamid if i == 0 else None,
                    )
                )
            except GraphSendError as exc:
                raise GraphSendError(exc.failure, tuple(sent)) from None
        return sent

    async def mark_read(self, phone_number_id: str, access_token: str, wamid: str) -> None:
        """Mark an inbound message read (shows blue ticks to the sender)."""
        await self._post(phone_number_id, access_token, mark_read_request(wamid))

    async def _post(self, phone_number_id: str, access_token: str, content: bytes) -> bytes:
        if not _ID.match(phone_number_id):
            raise GraphSendError(
                SendFailure(SendAction.FAIL_NOW, None, "bad phone_number_id", "it must be digits only")
            )
        if not access_token:
            raise GraphSendError(
                SendFailure(SendAction.FAIL_AND_ALERT_TOKEN, None, "no access token", "none is configured")
            )
        headers = {"Authorization": f"Bearer {access_token}"}
        writing = _Writing()
        try:
            async with asyncio.timeout(self.timeout_s):
                status, body, whole = await self._exchange(
                    self.messages_url(phone_number_id), content, headers, writing
                )
        except _NOT_SENT as exc:
            raise GraphSendError(network_failure(_describe(exc), maybe_sent=False)) from None
        except (httpx.TransportError, TimeoutError) as exc:
            # The deadline can pass while the request still waits for a pooled connection (a busy Graph
            # API, every connection in use): then nothing was written, and the send is retried as
            # unsent instead of ending "possibly sent".
            maybe_sent = writing.started
            raise GraphSendError(network_failure(_describe(exc), maybe_sent=maybe_sent)) from None
        if 200 <= status < 300:
            if not whole:
                raise GraphSendError(
                    SendFailure(
                        SendAction.FAIL_NOW,
                        None,
                        "answer too large",
                        f"more than {self.max_answer_bytes} bytes",
                        status,
                        maybe_sent=True,
                    )
                )
            return body
        raise GraphSendError(classify_answer(status, body))

    async def _exchange(
        self, url: str, content: bytes, headers: dict[str, str], writing: _Writing
    ) -> tuple[int, bytes, bool]:
        """(status, at most max_answer_bytes of the body, whether that is the whole body)."""
        extensions = {"trace": writing.trace}
        async with self._http.stream(
            "POST", url, content=content, headers=headers, extensions=extensions
        ) as answer:
            chunks: list[bytes] = []
            size = 0
            async for chunk in answer.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_answer_bytes:
                    return answer.status_code, b"".join(chunks)[: self.max_answer_bytes], False
            return answer.status_code, b"".join(chunks), True

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> GraphSender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Writing:
    """Whether a request's bytes began to go out (httpcore's trace events): before that, a failure or a
    deadline means the Graph API cannot have seen it."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False

    async def trace(self, event: str, _info: object) -> None:
        if event.endswith("send_request_headers.started"):
            self.started = True


def _describe(exc: BaseException) -> str:
    """What went wrong, without the request (whose headers hold the token)."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "no answer within the deadline"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
