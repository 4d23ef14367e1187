"""Meta's webhook bodies and their delivery, for tests and demos: one ``messages`` change per body
(:func:`webhook_body`, several with :func:`merge`), serialised once (:func:`encode`) and posted signed
like Meta's by :class:`WebhookSender`; the statuses of the business's messages (:func:`status`).

:mod:`.webhooks` re-exports all of it beside the message builders; import from there.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from mogateway.core.whatsapp import SIGNATURE_HEADER, sign_body
from mogateway.testing.fake_graph.fixtures import CLOUD_DISPLAY_NUMBER, CLOUD_PHONE_NUMBER_ID, DEST_WABA

__all__ = ["Delivery", "WebhookSender", "encode", "merge", "status", "webhook_body"]


def status(
    wamid: str,
    value: str,
    recipient: str | None,
    *,
    timestamp: int | None = None,
    error_code: int | None = None,
    error_title: str = "",
    details: str = "",
) -> dict[str, Any]:
    """A status of a message the business sent (``sent``, ``delivered``, ``read``, ``failed``); without
    ``recipient_id`` when ``recipient`` is None."""
    item: dict[str, Any] = {
        "id": wamid,
        "status": value,
        "timestamp": str(int(time.time()) if timestamp is None else timestamp),
    }
    if recipient is not None:
        item["recipient_id"] = recipient
    if value in ("sent", "delivered"):
        item["conversation"] = {"id": secrets.token_hex(16), "origin": {"type": "service"}}
        item["pricing"] = {"billable": False, "pricing_model": "CBP", "category": "service"}
    if error_code is not None:
        item["errors"] = [
            {
                "code": error_code,
                "title": error_title,
                "message": error_title,
                "error_data": {"details": details},
            }
        ]
    return item


def webhook_body(
    messages: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    statuses: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    *,
    phone_number_id: str = CLOUD_PHONE_NUMBER_ID,
    display_phone_number: str = CLOUD_DISPLAY_NUMBER,
    waba_id: str = DEST_WABA,
    errors: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One entry with one ``messages`` change carrying ``messages``, ``statuses`` and ``errors``."""
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": display_phone_number, "phone_number_id": phone_number_id},
    }
    senders = list(dict.fromkeys((m.get("from"), m.get("from_user_id")) for m in messages))
    if messages:
        contacts = []
        for wa_id, user_id in senders:
            contact: dict[str, Any] = {"profile": {"name": (names or {}).get(wa_id or "", "Test User")}}
            if wa_id:
                contact["wa_id"] = wa_id
            if user_id:
                contact["user_id"] = user_id
            contacts.append(contact)
        value["contacts"] = contacts
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    if errors:
        value["errors"] = list(errors)
    change = {"value": value, "field": "messages"}
    return {"object": "whatsapp_business_account", "entry": [{"id": waba_id, "changes": [change]}]}


def merge(*bodies: dict[str, Any]) -> dict[str, Any]:
    """Several bodies' entries in one body (as Meta batches them)."""
    return {"object": "whatsapp_business_account", "entry": [e for b in bodies for e in b["entry"]]}


def encode(body: dict[str, Any]) -> bytes:
    """The bytes Meta would send: compact JSON, non-ASCII as UTF-8."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Delivery:
    """One POST of a webhook and its answer."""

    body: bytes
    signature: str | None
    status: int
    text: str


class WebhookSender:
    """Posts signed webhooks to ``url`` as Meta does (a sync httpx client; close it, or use ``with``)."""

    def __init__(
        self,
        url: str,
        app_secret: str,
        *,
        phone_number_id: str = CLOUD_PHONE_NUMBER_ID,
        display_phone_number: str = CLOUD_DISPLAY_NUMBER,
        waba_id: str = DEST_WABA,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self.app_secret = app_secret
        self.phone_number_id = phone_number_id
        self.display_phone_number = display_phone_number
        self.waba_id = waba_id
        self._http = httpx.Client(timeout=timeout_s, headers={"User-Agent": "facebookexternalua"})
        self.deliveries: list[Delivery] = []

    def body(
        self,
        *messages: dict[str, Any],
        statuses: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
        errors: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> bytes:
        """The encoded body for this sender's number."""
        return encode(
            webhook_body(
                messages,
                statuses,
                phone_number_id=self.phone_number_id,
                display_phone_number=self.display_phone_number,
                waba_id=self.waba_id,
                errors=errors,
            )
        )

    def send(
        self,
        *messages: dict[str, Any],
        statuses: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
        errors: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> Delivery:
        """Build, sign and post one body."""
        return self.post(self.body(*messages, statuses=statuses, errors=errors))

    def post(self, body: bytes, *, signed: bool = True, signature: str | None = None) -> Delivery:
        """Post ``body`` as is: signed (the default), with the ``signature`` given, or unsigned."""
        header = (
            signature if signature is not None else (sign_body(body, self.app_secret) if signed else None)
        )
        headers = {"Content-Type": "application/json"}
        if header is not None:
            headers[SIGNATURE_HEADER] = header
        answer = self._http.post(self.url, content=body, headers=headers)
        delivery = Delivery(body, header, answer.status_code, answer.text)
        self.deliveries.append(delivery)
        return delivery

    def redeliver(self, delivery: Delivery) -> Delivery:
        """Post the same bytes with the same signature again, as Meta retries."""
        return self.post(delivery.body, signed=delivery.signature is not None, signature=delivery.signature)

    def handshake(
        self, verify_token: str, *, challenge: str = "1158201444", mode: str = "subscribe"
    ) -> httpx.Response:
        """The verification GET Meta sends when a callback URL is set."""
        params = {"hub.mode": mode, "hub.verify_token": verify_token, "hub.challenge": challenge}
        return self._http.get(self.url, params=params)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WebhookSender:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
