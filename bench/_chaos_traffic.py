"""The crash campaign's traffic: the MOs, the HTTP pushers, the SMPP feed and the application's answer.

Every MO has a token (``H000042`` over HTTP, ``S000042`` over SMPP, ``W000042`` as a WhatsApp webhook),
its own msisdn and the text ``CHAOS <token>``; the application answers ``ok <token> <message id>``, so
every callback and every reply says which MO and which gateway message it is about.

WhatsApp MOs are posted as Meta posts them: several messages per webhook body (``wa_batch``), signed
with the app secret by the fake Graph API's :class:`WebhookSender`, and a body that got no 200 is
delivered again, the same bytes with the same wamids, until it is answered 200.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import aiohttp
import httpx
import orjson
from _chaos_checks import SentMo
from _chaos_gateway import APP_SECRET, INGEST, SHORTCODE, GatewayProcess

from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, RecordedCall
from mogateway.testing.smsc import SimulatedSmsc, StoredMo

__all__ = ["WEBHOOK_PATH", "Pacer", "Traffic", "make_mos", "wamid_of"]

#: Where the gateway takes Meta's webhooks.
WEBHOOK_PATH = "/v1/whatsapp/webhook"


def make_mos(n_http: int, n_smpp: int, n_whatsapp: int = 0) -> dict[str, SentMo]:
    """The campaign's MOs by token, each with its own (valid Indian mobile) msisdn (a WhatsApp MO's
    msisdn is its sender's ``wa_id``)."""
    mos = {f"H{i:06d}": SentMo(f"H{i:06d}", "http", f"9198{i:08d}") for i in range(n_http)}
    mos.update({f"S{i:06d}": SentMo(f"S{i:06d}", "smpp", f"9199{i:08d}") for i in range(n_smpp)})
    mos.update({f"W{i:06d}": SentMo(f"W{i:06d}", "whatsapp", f"9197{i:08d}") for i in range(n_whatsapp)})
    return mos


def wamid_of(token: str) -> str:
    """The inbound wamid of a WhatsApp MO (the same in every delivery of its webhook)."""
    return f"wamid.CHAOS{token}"


def token_of(text: str) -> str:
    """The token of an MO text ("CHAOS <token>") or of a reply ("ok <token> <id>"); "?" if none."""
    words = text.split()
    return words[1] if len(words) > 1 else "?"


class Pacer:
    """Spaces ``take(n)`` calls to ``rate`` items per second on average, with no credit for idle time
    (after a gateway's downtime the offer resumes at the same pace, not in a burst)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.next_at = 0.0

    async def take(self, n: int) -> None:
        now = time.monotonic()
        start = max(self.next_at, now)
        self.next_at = start + n / self.rate
        if start > now:
            await asyncio.sleep(start - now)


class Traffic:
    """Offers the MOs over both transports until each is acknowledged, and answers the callbacks."""

    def __init__(
        self,
        mos: dict[str, SentMo],
        smsc: SimulatedSmsc,
        gateway: GatewayProcess,
        session: aiohttp.ClientSession,
        *,
        rate: float,
        pushers: int,
        batch: int,
        smpp_burst: int,
        callback_delay_s: float,
        wa_batch: int = 5,
    ) -> None:
        self.mos = mos
        self.smsc = smsc
        self.gateway = gateway
        self.session = session
        self.rate = rate
        self.pushers = pushers
        self.batch = batch
        self.smpp_burst = smpp_burst
        self.callback_delay_s = callback_delay_s
        self.http = [t for t, mo in mos.items() if mo.transport == "http"]
        self.smpp = [t for t, mo in mos.items() if mo.transport == "smpp"]
        self.whatsapp = [t for t, mo in mos.items() if mo.transport == "whatsapp"]
        self.wa_batch = wa_batch
        self.acked_whatsapp = 0
        self.webhooks_redelivered = 0
        #: Set while the gateway is up; the pushers wait on it after a kill.
        self.up = asyncio.Event()
        self.called: set[str] = set()  # tokens that reached the application
        self.acked_http = 0
        #: HTTP batches and WhatsApp webhooks sent and not answered yet, by a number of their own.
        self.in_flight: dict[int, list[str]] = {}
        self._batch_numbers = iter(range(1 << 62))
        self.batch_latencies: collections.deque[float] = collections.deque(maxlen=100)
        self.pushes_repeated = 0
        self.found_stored = 0  # re-pushed MOs the gateway already had
        self.queued: dict[str, StoredMo] = {}  # SMPP MOs handed to the simulator's store and forward

    # ------------------------------------------------------------------------- the application

    def answer(self, call: RecordedCall) -> Answer:
        """The application: after the delay, a reply naming the MO and the message it answers."""
        try:
            token = token_of(orjson.loads(call.body)["message"])
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            token = "?"
        self.called.add(token)
        message_id = call.headers.get("x-mogateway-message-id", "?")
        return Answer.text(f"ok {token} {message_id}", delay_s=self.callback_delay_s)

    # -------------------------------------------------------------------------------- progress

    def acked_smpp(self) -> int:
        return sum(1 for mo in self.queued.values() if mo.acknowledged)

    @property
    def acknowledged(self) -> int:
        return self.acked_http + self.acked_smpp() + self.acked_whatsapp

    def http_done(self) -> bool:
        """Every HTTP batch and every WhatsApp webhook answered."""
        return self.acked_http == len(self.http) and self.acked_whatsapp == len(self.whatsapp)

    def smpp_done(self) -> bool:
        return len(self.queued) == len(self.smpp) and self.smsc.outbox_size() == 0

    def intake_done(self) -> bool:
        return self.http_done() and self.smpp_done()

    async def run(self) -> None:
        """Offer every MO (returns once each was handed to a pusher or to the simulator)."""
        await asyncio.gather(self._push_http(), self._feed_smpp(), self._push_whatsapp())

    # -------------------------------------------------------------------------------- HTTP

    async def _push_http(self) -> None:
        batches: asyncio.Queue[list[str] | None] = asyncio.Queue()
        for start in range(0, len(self.http), self.batch):
            batches.put_nowait(self.http[start : start + self.batch])
        for _ in range(self.pushers):
            batches.put_nowait(None)
        pacer = Pacer(self.rate * len(self.http) / max(1, len(self.mos)))
        await asyncio.gather(*(self._pusher(batches, pacer) for _ in range(self.pushers)))

    async def _pusher(self, batches: asyncio.Queue[list[str] | None], pacer: Pacer) -> None:
        while (batch := await batches.get()) is not None:
            await pacer.take(len(batch))
            await self._push_until_acknowledged(batch)

    async def _push_until_acknowledged(self, batch: list[str]) -> None:
        """POST the batch until the gateway answers it; a request without an answer (the gateway was
        killed) or with a 5xx is sent again, with the same ids, once the gateway is back."""
        body = orjson.dumps(
            [
                {"shortcode": SHORTCODE, "msisdn": self.mos[t].msisdn, "message": f"CHAOS {t}", "id": t}
                for t in batch
            ]
        )
        headers = {"authorization": f"Bearer {INGEST}", "content-type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=30)
        for attempt in range(1, 10_000):
            if attempt > 1:
                self.pushes_repeated += 1
                await asyncio.sleep(0.05)  # the kill may not be noticed yet: do not spin
            await self.up.wait()
            number = next(self._batch_numbers)
            self.in_flight[number] = batch
            sent_at = time.monotonic()
            try:
                async with self.session.post(
                    self.gateway.url + "/v1/inbound/batch", data=body, headers=headers, timeout=timeout
                ) as resp:
                    status, answer = resp.status, await resp.read()
            except (aiohttp.ClientError, TimeoutError, OSError):
                continue
            finally:
                del self.in_flight[number]
            if status == 200:
                self.batch_latencies.append(time.monotonic() - sent_at)
                self._record(batch, orjson.loads(answer)["results"])
                return
            if status < 500 and status != 429:
                raise RuntimeError(f"the gateway refused a batch: {status} {answer[:300]!r}")
        raise RuntimeError(f"batch {batch[0]}… never acknowledged")

    def _record(self, batch: list[str], results: list[dict[str, Any]]) -> None:
        for token, result in zip(batch, results, strict=True):
            if result.get("state") in ("rejected", "invalid") or "id" not in result:
                raise RuntimeError(f"the gateway rejected MO {token}: {result}")
            mo = self.mos[token]
            if not mo.acknowledged:
                self.acked_http += 1
            mo.acknowledged = True
            mo.ack_ids.add(result["id"])
            if result.get("duplicate"):
                self.found_stored += 1

    # -------------------------------------------------------------------------------- WhatsApp

    async def _push_whatsapp(self) -> None:
        if not self.whatsapp:
            return
        bodies: asyncio.Queue[list[str] | None] = asyncio.Queue()
        for start in range(0, len(self.whatsapp), self.wa_batch):
            bodies.put_nowait(self.whatsapp[start : start + self.wa_batch])
        for _ in range(self.pushers):
            bodies.put_nowait(None)
        pacer = Pacer(self.rate * len(self.whatsapp) / max(1, len(self.mos)))
        await asyncio.gather(*(self._webhook_pusher(bodies, pacer) for _ in range(self.pushers)))

    async def _webhook_pusher(self, bodies: asyncio.Queue[list[str] | None], pacer: Pacer) -> None:
        # Meta's side: one sender (a sync client, used from a thread) per pusher; its URL follows the
        # gateway, which listens on a new port after every restart.
        meta = wh.WebhookSender(self.gateway.url + WEBHOOK_PATH, APP_SECRET, timeout_s=30)
        try:
            while (batch := await bodies.get()) is not None:
                await pacer.take(len(batch))
                await self._deliver_until_answered(meta, batch)
        finally:
            meta.close()

    async def _deliver_until_answered(self, meta: wh.WebhookSender, batch: list[str]) -> None:
        """Post the webhook until the gateway answers 200; without an answer (the gateway was killed) or
        with a 5xx, the same bytes are delivered again once it is back, as Meta retries."""
        body = meta.body(*(wh.text(self.mos[t].msisdn, f"CHAOS {t}", wamid=wamid_of(t)) for t in batch))
        for attempt in range(1, 10_000):
            if attempt > 1:
                self.webhooks_redelivered += 1
                await asyncio.sleep(0.05)
            await self.up.wait()
            meta.url = self.gateway.url + WEBHOOK_PATH
            number = next(self._batch_numbers)
            self.in_flight[number] = batch
            try:
                delivery = await asyncio.to_thread(meta.post, body)
            except httpx.HTTPError:
                continue
            finally:
                del self.in_flight[number]
            if delivery.status == 200:
                self._record_webhook(batch, orjson.loads(delivery.text))
                return
            if delivery.status < 500 and delivery.status != 429:
                raise RuntimeError(
                    f"the gateway refused a webhook: {delivery.status} {delivery.text[:300]!r}"
                )
        raise RuntimeError(f"webhook {batch[0]}… never answered 200")

    def _record_webhook(self, batch: list[str], answer: dict[str, Any]) -> None:
        ids = answer.get("ids") or []
        if len(ids) != len(batch) or answer.get("rejected"):
            raise RuntimeError(f"the gateway did not store webhook {batch[0]}…: {answer}")
        for token, message_id in zip(batch, ids, strict=True):
            mo = self.mos[token]
            if not mo.acknowledged:
                self.acked_whatsapp += 1
            mo.acknowledged = True
            mo.ack_ids.add(message_id)
        self.found_stored += int(answer.get("duplicates") or 0)

    # -------------------------------------------------------------------------------- SMPP

    async def _feed_smpp(self) -> None:
        """Hand the SMPP MOs to the simulator in bursts; it delivers them (again) until answered ROK."""
        pacer = Pacer(self.rate * len(self.smpp) / max(1, len(self.mos)))
        for start in range(0, len(self.smpp), self.smpp_burst):
            burst = self.smpp[start : start + self.smpp_burst]
            await pacer.take(len(burst))
            for token in burst:
                self.queued[token] = self.smsc.queue_mo(self.mos[token].msisdn, SHORTCODE, f"CHAOS {token}")

    def settle(self) -> None:
        """Copy the simulator's verdicts to the MOs: acknowledged means answered ESME_ROK."""
        for token, queued in self.queued.items():
            self.mos[token].acknowledged = queued.acknowledged
