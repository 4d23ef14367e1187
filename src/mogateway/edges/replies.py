"""Reply channels: how a session reply leaves the gateway.

A channel (``core.ports.ReplyChannel``) takes a reply and either hands it over (returning what it
knows: parts, references for delivery receipts) or raises ``ReplyError``. The router
(``service.replier.ReplyRouter``) picks the channel by the MO's origin: an MO that came over an SMPP
bind goes back over SMPP, everything else uses the configured default. Both channels here may be asked
twice for one reply (the log; an MT endpoint that is sent the message id to deduplicate on), so they
need no intent record.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

import orjson

from mogateway.core.ports import Reply, ReplyError, ReplySubmitted
from mogateway.core.text import count_parts

if TYPE_CHECKING:  # the HTTP channel's session is made by its owner (node.py), aiohttp loaded then
    import aiohttp

__all__ = ["HttpReplyChannel", "LogReplyChannel"]

Handover = Callable[[], Awaitable[None]] | None

log = logging.getLogger("mogateway.replies")


class LogReplyChannel:
    """The embedded default: the reply is recorded in the journal and written to the log."""

    name = "log"
    needs_intent = False

    def ready(self, reply: Reply) -> bool:
        return True

    async def send(self, reply: Reply, handover: Handover = None) -> ReplySubmitted:
        parts = count_parts(reply.text).parts
        if log.isEnabledFor(logging.INFO):
            log.info(
                "reply %s from %s to %s (%d part%s): %r",
                reply.message_id,
                reply.message.shortcode,
                reply.message.msisdn,
                parts,
                "" if parts == 1 else "s",
                reply.text,
            )
        return ReplySubmitted(self.name, parts)


class HttpReplyChannel:
    """POSTs the reply as JSON ``{to, from, text, message_id}`` to an operator's MT URL (plus
    ``dlt_pe_id`` and ``dlt_template_id`` when the reply matched one of its client's DLT templates).

    The URL is a template: ``{to}``, ``{from}`` and ``{message_id}`` are replaced (URL-encoded). A 2xx
    answer hands the reply over (an ``id`` or ``message_id`` in a JSON answer is kept as the reference);
    5xx, 429 and connection failures are retryable, other statuses are not.
    """

    name = "http"
    needs_intent = False

    def __init__(self, session: aiohttp.ClientSession, url_template: str, timeout_s: float = 10.0) -> None:
        import aiohttp

        self._session = session
        self._template = url_template
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._unreachable = (aiohttp.ClientError, TimeoutError, OSError)

    def ready(self, reply: Reply) -> bool:
        return True

    async def send(self, reply: Reply, handover: Handover = None) -> ReplySubmitted:
        m = reply.message
        url = (
            self._template.replace("{to}", quote(m.msisdn))
            .replace("{from}", quote(m.shortcode))
            .replace("{message_id}", quote(m.id))
        )
        payload = {"to": m.msisdn, "from": m.shortcode, "text": reply.text, "message_id": m.id}
        if reply.dlt is not None:  # operators' HTTP MT APIs take the DLT ids next to the text
            payload["dlt_pe_id"], payload["dlt_template_id"] = reply.dlt.pe_id, reply.dlt.template_id
        body = orjson.dumps(payload)
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
        except self._unreachable as exc:
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
