"""Reply channels: how a session reply leaves the gateway.

A channel takes a :class:`Reply` and either hands it over (returning what it knows: parts, references
for delivery receipts) or raises :class:`ReplyError`. The router picks the channel by the MO's origin:
an MO that came over an SMPP bind goes back over SMPP, everything else uses the configured default.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote

import aiohttp
import orjson

from mogateway.core.text import count_parts

__all__ = [
    "HttpReplyChannel",
    "LogReplyChannel",
    "Reply",
    "ReplyChannel",
    "ReplyError",
    "ReplyRouter",
    "ReplySubmitted",
]

log = logging.getLogger("mogateway.replies")


@dataclass(frozen=True, slots=True)
class Reply:
    message_id: str
    shortcode: str  # the reply is sent from the shortcode...
    msisdn: str  # ...to the sender
    text: str
    origin: str
    operator: str = ""


@dataclass(frozen=True, slots=True)
class ReplySubmitted:
    channel: str
    parts: int
    refs: list[str] = field(default_factory=list)
    detail: str = ""


class ReplyError(Exception):
    """A channel could not hand the reply over. ``retryable``: trying again later may work."""

    def __init__(self, detail: str, retryable: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable


class ReplyChannel(Protocol):
    name: str

    async def send(self, reply: Reply) -> ReplySubmitted: ...


class LogReplyChannel:
    """The embedded default: the reply is recorded in the journal and written to the log."""

    name = "log"

    async def send(self, reply: Reply) -> ReplySubmitted:
        parts = count_parts(reply.text).parts
        if log.isEnabledFor(logging.INFO):
            log.info(
                "reply %s from %s to %s (%d part%s): %r",
                reply.message_id,
                reply.shortcode,
                reply.msisdn,
                parts,
                "" if parts == 1 else "s",
                reply.text,
            )
        return ReplySubmitted(self.name, parts)


class HttpReplyChannel:
    """POSTs the reply as JSON ``{to, from, text, message_id}`` to an operator's MT URL.

    The URL is a template: ``{to}``, ``{from}`` and ``{message_id}`` are replaced (URL-encoded). A 2xx
    answer hands the reply over (an ``id`` or ``message_id`` in a JSON answer is kept as the reference);
    5xx, 429 and connection failures are retryable, other statuses are not.
    """

    name = "http"

    def __init__(self, session: aiohttp.ClientSession, url_template: str, timeout_s: float = 10.0) -> None:
        self._session = session
        self._template = url_template
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def send(self, reply: Reply) -> ReplySubmitted:
        url = (
            self._template.replace("{to}", quote(reply.msisdn))
            .replace("{from}", quote(reply.shortcode))
            .replace("{message_id}", quote(reply.message_id))
        )
        body = orjson.dumps(
            {"to": reply.msisdn, "from": reply.shortcode, "text": reply.text, "message_id": reply.message_id}
        )
        try:
            async with self._session.post(
                url,
                data=body,
                headers={"content-type": "application/json"},
                timeout=self._timeout,
                allow_redirects=False,
            ) as resp:
                status = resp.status
                answer = await resp.content.read(16 * 1024)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ReplyError(f"MT endpoint unreachable: {type(exc).__name__} {exc}", retryable=True) from None
        if not 200 <= status < 300:
            raise ReplyError(f"MT endpoint answered {status}", retryable=status >= 500 or status == 429)
        refs: list[str] = []
        try:
            doc = orjson.loads(answer) if answer else None
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            ref = doc.get("id") or doc.get("message_id")
            if isinstance(ref, str | int):
                refs.append(str(ref))
        return ReplySubmitted(self.name, count_parts(reply.text).parts, refs, f"status {status}")


class ReplyRouter:
    """Chooses the channel for a reply by the origin of its MO (``"smpp:<bind>"`` → the "smpp" channel)."""

    def __init__(self, default: ReplyChannel) -> None:
        self.default = default
        self._by_prefix: dict[str, ReplyChannel] = {}

    def register(self, prefix: str, channel: ReplyChannel) -> None:
        self._by_prefix[prefix] = channel

    def channel_for(self, origin: str) -> ReplyChannel:
        prefix = origin.split(":", 1)[0]
        return self._by_prefix.get(prefix, self.default)
