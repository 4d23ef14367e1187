"""The WhatsApp reply channel: a session reply to a WhatsApp MO goes out through the Graph API.

Rules stated before the code (the facts are Meta's, see ``core.whatsapp_send``):

* The MO's origin is ``whatsapp:<phone_number_id>``: the reply leaves from that number, with that
  number's access token, to the sender's ``wa_id``, the first part as a reply to the inbound wamid
  (``context.message_id``). A reply longer than 4,096 characters is split (``split_text``); a rich reply
  (``core.whatsapp_answer``, checked when the answer came) is its messages, in order. The wamids the
  Graph API answers are the reply's refs, which the statuses webhooks name later.
* A failure after some parts went says which: ``after k of n parts: <their wamids>`` in the timeline's
  detail, whether the reply then fails or waits.
* What an error means is decided by Graph's ``code`` (``classify_answer``), never by the status or text:
  ``fail_now`` (131047, 131026, 100, 131009, 131051...) → the reply fails at once, with the code and
  Meta's details in the timeline; ``retry_backoff`` / ``retry_this_recipient`` (130429, 131056, 1, 2,
  131000, 5xx, a refused connection) → :class:`ReplyError` retryable, and the replier waits with backoff
  within the reply's validity without holding callback capacity; 190 (the token) → fails, with one
  operator log line per number; 131048, 133010, 131031, 368 → fails, one log line per number and code.
* A request whose answer was lost (a timeout after it was written) may have been taken by Meta: it is
  reported as possibly sent, and the replier decides (``reply_at_least_once``), as for SMPP.
* Sending twice reaches the person twice, so the channel needs an intent record (``handover`` is
  awaited right before the first request). Parts already sent before a retryable error are not sent
  again on the retry: the channel remembers them (in memory, per message, for at most a day).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from mogateway.config.whatsapp import WhatsAppSettings
from mogateway.core.ports import Reply, ReplyError, ReplySubmitted
from mogateway.core.whatsapp_answer import decode_reply, describe
from mogateway.core.whatsapp_send import SendAction, SendFailure, split_text, text_message
from mogateway.edges.whatsapp.graph_sender import GraphSender, GraphSendError

__all__ = ["WhatsAppReplyChannel", "describe_failure"]

log = logging.getLogger("mogateway.whatsapp")

_RETRY: Final = frozenset({SendAction.RETRY_BACKOFF, SendAction.RETRY_THIS_RECIPIENT})
#: Parts remembered for a reply that is being retried are forgotten after this long (a reply's validity
#: is at most a day).
_PROGRESS_TTL_S: Final = 86_400.0


def describe_failure(failure: SendFailure) -> str:
    """The timeline's words for a failed send: Graph's code and title, and Meta's details."""
    code = f"code {failure.code}" if failure.code is not None else "no Graph error code"
    status = f", HTTP {failure.http_status}" if failure.http_status is not None else ""
    return f"WhatsApp {code}{status}: {failure.title}: {failure.details}".rstrip(": ")


class WhatsAppReplyChannel:
    """``ReplyChannel`` for MOs whose origin is ``whatsapp:<phone_number_id>`` (``name`` "whatsapp")."""

    name = "whatsapp"
    needs_intent = True

    def __init__(self, settings: WhatsAppSettings, *, timeout_s: float | None = None) -> None:
        self.settings = settings
        # The Graph URL is the operator's setting, not a client's callback URL: the callback path's
        # refusal of loopback and private addresses does not apply (a fake, a private proxy).
        self.sender = GraphSender(
            settings.graph_url,
            settings.api_version,
            timeout_s=settings.graph_timeout_s if timeout_s is None else timeout_s,
            queue_timeout_s=settings.graph_queue_timeout_s,
            max_connections=settings.graph_max_connections,
            max_queued=settings.graph_max_queued,
            ca_file=settings.graph_ca_file or None,
            allow_private=True,
        )
        self._progress: dict[str, tuple[float, list[str]]] = {}  # message id -> (since, wamids sent)
        self._alerted: set[tuple[str, int | None]] = set()

    async def aclose(self) -> None:
        await self.sender.aclose()

    def ready(self, reply: Reply) -> bool:
        return True

    async def send(
        self, reply: Reply, handover: Callable[[], Awaitable[None]] | None = None
    ) -> ReplySubmitted:
        """Send ``reply``; the refs are the wamids of its parts."""
        m = reply.message
        pnid = m.origin.partition(":")[2]
        number = self.settings.number(pnid)
        if number is None:
            raise ReplyError(f"WhatsApp number {pnid or '?'} is not configured here")
        rich = decode_reply(reply.text)
        parts = [text_message(p) for p in split_text(reply.text)] if rich is None else list(rich)
        what = f"{len(parts)} text message(s)" if rich is None else ", ".join(describe(rich))
        now = time.time()
        self._forget_old(now)
        since, sent = self._progress.get(m.id, (now, []))
        if handover is not None:
            await handover()
        try:
            sent.extend(
                await self.sender.send_messages(
                    pnid,
                    number.access_token.get_secret_value(),
                    m.msisdn,
                    parts[len(sent) :],
                    context_wamid=m.wamid if not sent else None,
                )
            )
        except GraphSendError as exc:
            sent.extend(exc.sent)
            raise self._error(exc.failure, pnid, sent, len(parts), m.id, since) from None
        self._progress.pop(m.id, None)
        return ReplySubmitted(f"whatsapp:{pnid}", len(parts), list(sent), what)

    def _error(
        self, failure: SendFailure, pnid: str, sent: list[str], parts: int, message_id: str, since: float
    ) -> ReplyError:
        detail = describe_failure(failure)
        if sent:
            detail += f" (after {len(sent)} of {parts} parts: {', '.join(sent)})"
        if failure.action in _RETRY:
            if sent:
                self._progress[message_id] = (since, sent)
            return ReplyError(detail, retryable=True, possibly_sent=failure.maybe_sent)
        self._progress.pop(message_id, None)
        if failure.action in (SendAction.FAIL_AND_ALERT_TOKEN, SendAction.FAIL_AND_ALERT_OPERATOR):
            key = (pnid, None if failure.action is SendAction.FAIL_AND_ALERT_TOKEN else failure.code)
            if key not in self._alerted:
                self._alerted.add(key)
                what = (
                    "its access token was refused: set a valid one"
                    if failure.action is SendAction.FAIL_AND_ALERT_TOKEN
                    else "the Graph API refused it for the account"
                )
                log.error("WhatsApp number %s cannot send replies, %s (%s)", pnid, what, detail)
        return ReplyError(detail)

    def _forget_old(self, now: float) -> None:
        if self._progress:
            for mid in [mid for mid, (since, _) in self._progress.items() if now - since > _PROGRESS_TTL_S]:
                del self._progress[mid]

    async def mark_read(self, phone_number_id: str, wamid: str) -> None:
        """Mark an inbound message read (for numbers with ``mark_read``); failures are logged only."""
        number = self.settings.number(phone_number_id)
        if number is None:
            return
        try:
            await self.sender.mark_read(phone_number_id, number.access_token.get_secret_value(), wamid)
        except GraphSendError as exc:
            log.info("marking %s read failed: %s", wamid, describe_failure(exc.failure))
