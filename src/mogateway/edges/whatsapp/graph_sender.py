"""Sending WhatsApp replies through the Graph API: ``POST {graph_url}/{version}/{phone_number_id}/messages``.

Over the project's own HTTP/1.1 client (``edges/http1.py``: one request buffer, answers parsed by
httptools), with TLS from the standard ``ssl`` module, and **one pool of keep-alive connections per
business number**. httpx cost about 60 % of a worker's CPU at saturation here (its pool's bookkeeping
grows with the number of waiting requests; docs/benchmarks.md §6). The callback client's address guard
refuses loopback and private addresses; for Graph that is an explicit choice (``allow_private``, set when
the Graph URL is a fake or a private proxy on loopback), not a work-around. The rules of what to send and
what an error means are pure and live in ``core/whatsapp_send.py``; this module only carries them:

* ``Authorization: Bearer <access token>`` per call (a token per number); the token is never logged and
  never appears in an error's text.
* TLS verifies against the system's CAs, or only those of ``ca_file`` (``[whatsapp] graph_ca_file``: a
  private Graph proxy, the bench's fake).
* **Two budgets, never one**: a send first waits for one of its number's ``max_connections`` slots (at
  most ``max_queued`` sends wait per number; more are refused at once; the wait is bounded by
  ``queue_timeout_s``), then has ``timeout_s`` for the network (connect, write, the whole answer). A
  send refused or timed out while waiting, or while connecting, wrote nothing: it is a retryable
  failure with ``maybe_sent=False`` (retried, never "possibly sent"). Only a request whose bytes were
  handed to the connection (:class:`~mogateway.edges.http1.RequestProgress`) can end possibly sent, and
  before saying so the answer gets one more short look, in case the event loop was too busy to read
  one that had arrived.
* A reused connection the server closed is never silently used again for the same request
  (``retry_stale`` off): a reply must not reach a person twice.
* At most ``max_answer_bytes`` of an answer are read. Redirects are not followed.
* A success is a 2xx whose body names the new message's wamid. Anything else raises
  :class:`GraphSendError` carrying a :class:`~mogateway.core.whatsapp_send.SendFailure`: Graph's error
  envelope classified by its ``code``; an answer that is not Graph's by its HTTP status (5xx, 408, 429 →
  retry); no answer at all (refused, reset, timed out) → retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from mogateway.core.callback_url import UrlRefused
from mogateway.core.ports import RawAnswer, TransportError
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
from mogateway.edges.http1 import Http1Client, RequestProgress, tls_context

__all__ = ["DEFAULT_GRAPH_URL", "GraphSendError", "GraphSender", "SendQueueStats", "register_metrics"]

DEFAULT_GRAPH_URL = "https://graph.facebook.com"
_VERSION = re.compile(r"^v\d{1,3}\.\d{1,3}$")
_ID = re.compile(r"^\d{1,32}$")
#: After the network deadline, how long an answer that may already be in the socket's buffer is
#: still looked for (an event loop busy elsewhere reads it late).
_LAST_LOOK_S = 0.05


class GraphSendError(Exception):
    """A send or mark-read that failed; ``failure`` says why and what to do, ``sent`` lists the wamids of
    the parts of the same text that did go out before it (:meth:`GraphSender.send_parts`)."""

    def __init__(self, failure: SendFailure, sent: tuple[str, ...] = ()) -> None:
        code = "" if failure.code is None else f" (code {failure.code})"
        super().__init__(f"{failure.action}: {failure.title}{code}: {failure.details}")
        self.failure = failure
        self.sent = sent


class SendQueueStats:
    """One number's sends: in flight (holding a connection slot) and waiting for one; refusals."""

    __slots__ = ("in_flight", "refused", "waiting")

    def __init__(self) -> None:
        self.in_flight = 0
        self.waiting = 0
        self.refused = 0


class _Number:
    """A number's pool of connections and its bounded queue of sends waiting for one."""

    __slots__ = ("client", "slots", "stats")

    def __init__(self, client: Http1Client, slots: int) -> None:
        self.client = client
        self.slots = asyncio.Semaphore(slots)
        self.stats = SendQueueStats()


class GraphSender:
    """The Graph API client: a pool of connections per number. Close it with :meth:`aclose`."""

    def __init__(
        self,
        graph_url: str = DEFAULT_GRAPH_URL,
        api_version: str = "v21.0",
        *,
        timeout_s: float = 10.0,
        queue_timeout_s: float = 10.0,
        max_answer_bytes: int = 64 * 1024,
        max_connections: int = 64,
        max_queued: int = 2048,
        ca_file: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        allow_private: bool = True,
    ) -> None:
        if not graph_url.startswith(("https://", "http://")):
            raise ValueError("graph_url must be an http(s) URL")
        if not _VERSION.match(api_version):
            raise ValueError("api_version must look like v21.0")
        if timeout_s <= 0 or queue_timeout_s <= 0 or max_answer_bytes <= 0:
            raise ValueError("timeout_s, queue_timeout_s and max_answer_bytes must be positive")
        if max_connections < 1 or max_queued < 0:
            raise ValueError("max_connections must be at least 1 and max_queued not negative")
        self.graph_url = graph_url.rstrip("/")
        self.api_version = api_version
        self.timeout_s = timeout_s
        self.queue_timeout_s = queue_timeout_s
        self.max_answer_bytes = max_answer_bytes
        self.max_connections = max_connections
        self.max_queued = max_queued
        self._allow_private = allow_private
        self._ssl = ssl_context
        if self._ssl is None and self.graph_url.startswith("https://"):
            self._ssl = tls_context(ca_file)  # a missing or unreadable CA file fails here, at start
        self._numbers: dict[str, _Number] = {}
        self._headers = {"user-agent": "mogateway", "content-type": "application/json"}

    def queues(self) -> dict[str, SendQueueStats]:
        """Each number's sends in flight and waiting (metrics, admission control)."""
        return {pnid: n.stats for pnid, n in self._numbers.items()}

    def _number(self, phone_number_id: str) -> _Number:
        number = self._numbers.get(phone_number_id)
        if number is None:
            client = Http1Client(
                allow_private=self._allow_private,
                max_body=self.max_answer_bytes,
                ssl_context=self._ssl,
                retry_stale=False,
            )
            number = self._numbers[phone_number_id] = _Number(client, self.max_connections)
        return number

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
        number = self._number(phone_number_id)
        await self._wait_for_slot(number)
        try:
            answer = await self._exchange(number, phone_number_id, access_token, content)
        finally:
            number.stats.in_flight -= 1
            number.slots.release()
        status = answer.status
        if 200 <= status < 300:
            if answer.oversized:
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
            return answer.body
        raise GraphSendError(classify_answer(status, answer.body))

    async def _wait_for_slot(self, number: _Number) -> None:
        """Take one of the number's connection slots, or raise an unsent, retryable failure: too many
        sends wait already, or none came free within ``queue_timeout_s``."""
        stats = number.stats
        if number.slots.locked():
            if stats.waiting >= self.max_queued:
                stats.refused += 1
                raise GraphSendError(
                    network_failure(
                        f"{stats.waiting} sends of this number wait already (max_queued): not sent",
                        maybe_sent=False,
                    )
                )
            stats.waiting += 1
            try:
                async with asyncio.timeout(self.queue_timeout_s):
                    await number.slots.acquire()
            except TimeoutError:
                stats.refused += 1
                raise GraphSendError(
                    network_failure("no connection came free within the queue's deadline", maybe_sent=False)
                ) from None
            finally:
                stats.waiting -= 1
        else:
            await number.slots.acquire()
        stats.in_flight += 1

    async def _exchange(
        self, number: _Number, phone_number_id: str, access_token: str, content: bytes
    ) -> RawAnswer:
        headers = dict(self._headers)
        headers["authorization"] = f"Bearer {access_token}"
        progress = RequestProgress()
        task = asyncio.ensure_future(
            number.client.post(self.messages_url(phone_number_id), content, headers, progress)
        )
        try:
            done, _ = await asyncio.wait((task,), timeout=self.timeout_s)
            if not done:
                # One more look: an answer that arrived while the event loop was busy elsewhere.
                done, _ = await asyncio.wait((task,), timeout=_LAST_LOOK_S)
        except BaseException:
            task.cancel()
            raise
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            # Still connecting (or never handed to the connection): nothing went out.
            raise GraphSendError(
                network_failure("no answer within the deadline", maybe_sent=progress.written)
            )
        try:
            return task.result()
        except UrlRefused as exc:
            raise GraphSendError(network_failure(f"UrlRefused: {exc}", maybe_sent=False)) from None
        except (TransportError, OSError, ssl.SSLError) as exc:
            raise GraphSendError(network_failure(_describe(exc), maybe_sent=progress.written)) from None

    async def aclose(self) -> None:
        """Close the pooled connections."""
        for number in self._numbers.values():
            await number.client.close()
        self._numbers.clear()

    async def __aenter__(self) -> GraphSender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _SendQueueCollector(Collector):
    """Each number's Graph sends in flight, waiting for a connection, and refused (read at scrape)."""

    def __init__(self, sender: GraphSender) -> None:
        self._sender = sender

    def collect(self) -> Iterator[Metric]:
        sends = GaugeMetricFamily(
            "mogateway_whatsapp_graph_sends",
            "Graph API sends of a number: in flight (holding one of its graph_max_connections) or "
            "waiting for one (at most graph_max_queued)",
            labels=["phone_number_id", "state"],
        )
        refused = CounterMetricFamily(
            "mogateway_whatsapp_graph_sends_refused",
            "Graph API sends refused unsent (queue full or no connection within graph_queue_timeout_s); "
            "their replies are retried",
            labels=["phone_number_id"],
        )
        for pnid, stats in self._sender.queues().items():
            sends.add_metric([pnid, "in_flight"], float(stats.in_flight))
            sends.add_metric([pnid, "waiting"], float(stats.waiting))
            refused.add_metric([pnid], float(stats.refused))
        yield sends
        yield refused

    def describe(self) -> Iterator[Metric]:
        return iter(())


def register_metrics(sender: GraphSender, registry: CollectorRegistry) -> None:
    """Expose ``sender``'s send queues in ``registry`` (read when it is scraped)."""
    registry.register(_SendQueueCollector(sender))


def _describe(exc: BaseException) -> str:
    """What went wrong, without the request (whose headers hold the token)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
