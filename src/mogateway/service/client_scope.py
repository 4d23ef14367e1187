"""One client's view of the gateway: the only object a portal handler gets (isolation by construction).

Rules:

* A :class:`ClientScope` is made for one client id, from the signed-in person's session, and holds
  no way to name another: every read passes its own id to the journal
  (``core.ports.PortalStore``, whose client reads filter by it in SQL), every change goes to the
  registry under that id. A message id, a filter or a parameter from a request can only narrow what
  the scope returns; a message of another client is "not found", exactly like one that does not exist.
* What it returns carries no operator-only data: the client's settings without its token or signing
  secrets (:class:`ClientView`), its own messages and figures; never other clients, binds, nodes.
* Every change (callback URL, credentials) is recorded in the client's audit with who made it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from mogateway.core.callback_url import UrlRefused, normalize_callback_url
from mogateway.core.clients import ClientRecord
from mogateway.core.portal_accounts import AuditEntry
from mogateway.core.portal_store import PortalStore
from mogateway.core.ports import MessageFilter, MessageRecord
from mogateway.core.timeline import REPLIED_STATES, Event
from mogateway.service.portal_accounts import PortalAccounts
from mogateway.service.registry import NotSigning, Registry, new_signing_secret
from mogateway.service.stats import percentile_ms

__all__ = ["ClientScope", "ClientView", "CredentialError", "EXPORT_PAGE"]

#: Rows an export reads from the journal at a time (the memory an export holds is one page).
EXPORT_PAGE = 2000
_LATENCY = "lat:"
_OUTCOMES = ("reply", "blank", "timeout", "http_error", "bad_response", "failed")

UrlCheck = Callable[[str], Awaitable[Any]]


def _figures(rows: list[tuple[str, str, str, int]], figures: dict[str, int]) -> dict[str, Any]:
    """One window's Overview figures from its (number, channel, state, count) rows and per-minute
    figures."""
    by_number: dict[tuple[str, str], dict[str, int]] = {}
    states: dict[str, int] = {}
    for number, channel, state, n in rows:
        entry = by_number.setdefault((number, channel), {})
        entry[state] = entry.get(state, 0) + n
        states[state] = states.get(state, 0) + n
    bins = {k[len(_LATENCY) :]: n for k, n in figures.items() if k.startswith(_LATENCY)}
    replied = [s.value for s in REPLIED_STATES]
    return {
        "mo_in": sum(states.values()),
        "replies": sum(states.get(s, 0) for s in replied),
        "states": states,
        "outcomes": {k: figures.get(k, 0) for k in _OUTCOMES},
        "p50_ms": percentile_ms(bins, 0.5),
        "p99_ms": percentile_ms(bins, 0.99),
        "by_number": [
            {
                "number": number,
                "channel": channel,
                "mo_in": sum(counts.values()),
                "replies": sum(counts.get(s, 0) for s in replied),
                "states": counts,
            }
            for (number, channel), counts in sorted(by_number.items())
        ],
    }


class CredentialError(ValueError):
    """A change the scope refuses (the message says why, in the API's words)."""


def _view(client: ClientRecord, now: float) -> dict[str, Any]:
    return {
        "id": client.id,
        "name": client.name,
        "shortcodes": list(client.shortcodes),
        "whatsapp_numbers": list(client.whatsapp_numbers),
        "keywords": list(client.keywords),
        "callback_url": client.callback_url,
        "timeout_s": client.timeout_s,
        "sign_callbacks": client.sign_callbacks,
        "signing_grace_until": client.previous_signing_until if client.in_signing_grace(now) else None,
        "token_switch_at": client.next_token_at if client.next_token and now < client.next_token_at else None,
    }


ClientView = dict[str, Any]


class ClientScope:
    """Everything the portal may read or change, for one client (module docstring)."""

    def __init__(
        self,
        store: PortalStore,
        registry: Registry,
        client_id: str,
        *,
        check_url: UrlCheck,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._registry = registry
        self._accounts = PortalAccounts(store, clock)
        self._clock = clock
        self._check_url = check_url
        self.client_id = client_id

    # ------------------------------------------------------------------ the client

    def record(self) -> ClientRecord | None:
        """The client's full record, secrets included: for the callback test only (never shown)."""
        return self._registry.get(self.client_id)

    def client(self) -> ClientView | None:
        found = self._registry.get(self.client_id)
        return None if found is None else _view(found, self._clock())

    # ------------------------------------------------------------------ messages

    async def messages(self, where: MessageFilter) -> list[MessageRecord]:
        return await self._store.client_find(self.client_id, where)

    async def history(self, message_id: str) -> tuple[MessageRecord, list[Event]] | None:
        return await self._store.client_history(self.client_id, message_id)

    # ------------------------------------------------------------------ figures

    async def traffic(
        self, since: float, recent_since: float, until: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """MO in, replies, states by shortcode/number and channel; outcomes and callback latency from
        the per-minute figures: for [since, until) and for its recent part [max(since, recent_since),
        until), both from one read (``core.portal_store.ClientTraffic``: the recent figures never
        exceed the whole window's)."""
        read = await self._store.client_traffic(self.client_id, since, recent_since, until)
        whole = _figures([row[:4] for row in read.states], {k: n for k, (n, _) in read.figures.items()})
        recent = _figures(
            [(*row[:3], row[4]) for row in read.states if row[4]],
            {k: n for k, (_, n) in read.figures.items() if n},
        )
        return whole, recent

    # ------------------------------------------------------------------ reports

    async def count(self, since: float, until: float) -> int:
        return await self._store.client_count(self.client_id, since, until)

    async def export(self, since: float, until: float) -> AsyncIterator[list[MessageRecord]]:
        """The client's messages received in [since, until), oldest first, a page at a time."""
        after: tuple[float, str] | None = None
        while True:
            page = await self._store.client_page(self.client_id, since, until, after, EXPORT_PAGE)
            if not page:
                return
            yield page
            if len(page) < EXPORT_PAGE:
                return
            last = page[-1]
            after = (last.message.received_at, last.message.id)

    # ------------------------------------------------------------------ audit

    async def audit(self, limit: int = 200) -> list[AuditEntry]:
        return await self._store.audit(self.client_id, limit)

    async def note(self, actor: str, action: str, detail: str) -> None:
        await self._accounts.audit(self.client_id, actor, action, detail)

    # ------------------------------------------------------------------ changes

    async def set_callback_url(self, url: str, actor: str) -> ClientView:
        """Change the callback URL under the admin API's rules (shape, then the SSRF guard)."""
        try:
            normalized = normalize_callback_url(url.strip())
            await self._check_url(normalized)
        except UrlRefused as exc:
            raise CredentialError(f"callback_url: {exc}") from None
        current = self._registry.get(self.client_id)
        if current is None:
            raise CredentialError("the client is gone")
        before = current.callback_url
        changed = await self._registry.change(
            self.client_id,
            lambda c: c if c.callback_url == normalized else replace(c, callback_url=normalized),
        )
        if changed is None:
            raise CredentialError("the client is gone")
        if before != normalized:
            await self.note(actor, "callback URL", f"{before} -> {normalized}")
        return _view(changed, self._clock())

    async def rotate_token(self, overlap_s: float, actor: str) -> tuple[str, float]:
        """A new bearer token (shown once) and when callbacks start carrying it."""
        updated = await self._registry.rotate_token(self.client_id, overlap_s)
        if updated is None:
            raise CredentialError("the client is gone")
        switch = updated.next_token_at if updated.next_token else self._clock()
        token = updated.next_token or updated.token
        await self.note(actor, "bearer token rotated", f"overlap {overlap_s / 60:g} min")
        return token, switch

    async def rotate_signing_secret(self, overlap_s: float, actor: str) -> tuple[str, float]:
        """A new signing secret (shown once); the old one signs next to it for ``overlap_s``. A client
        that did not sign starts signing."""
        current = self._registry.get(self.client_id)
        if current is None:
            raise CredentialError("the client is gone")
        try:
            updated = await self._registry.rotate_signing_secret(self.client_id, overlap_s)
        except NotSigning:
            updated = await self._registry.change(
                self.client_id, lambda c: replace(c, signing_secret=new_signing_secret())
            )
        if updated is None:
            raise CredentialError("the client is gone")
        await self.note(actor, "signing secret rotated", f"overlap {overlap_s / 60:g} min")
        return updated.signing_secret, updated.previous_signing_until
