"""The client registry: the client applications in memory, kept in step with the journal.

The routing rules themselves are ``core.clients``; this module keeps the table current (every node
picks up the others' changes within ``refresh_s``) and serialises changes so that two registrations
cannot both claim one route.

Signing secrets: a client that signs has one current secret; rotating it keeps the previous one signing
next to it for a grace period (the ``signing_grace_s`` setting), so the application can switch without
refusing a callback. Rotating again during a grace period ends it: at most two secrets ever sign.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from mogateway.core.clients import ClientRecord, RoutingTable, conflict, first_word
from mogateway.core.ports import ClientStore, SecretKeyError
from mogateway.service.journal_health import journal_error_kind
from mogateway.service.throttle import Throttle

__all__ = ["ClientConflict", "NotSigning", "Registry", "first_word", "new_client_token", "new_signing_secret"]

log = logging.getLogger(__name__)


class ClientConflict(ValueError):
    """A registration that would claim a route another client already has."""


def new_client_token() -> str:
    """A bearer token for a client application: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def new_signing_secret() -> str:
    """A secret to sign a client's callbacks with: 256 random bits, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


class NotSigning(ValueError):
    """A signing-secret rotation for a client that does not sign its callbacks."""


def _without_expired_grace(client: ClientRecord, now: float) -> ClientRecord:
    # A previous secret whose grace is over signs nothing any more: do not keep it. A next token whose
    # overlap is over is the token now.
    if client.previous_signing_secret and not client.in_signing_grace(now):
        client = replace(client, previous_signing_secret="", previous_signing_until=0.0)
    if client.next_token and now >= client.next_token_at:
        client = replace(client, token=client.next_token, next_token="", next_token_at=0.0)
    return client


def _new_client_id() -> str:
    return "cl_" + base64.b32encode(os.urandom(10)).decode("ascii").lower()


class Registry:
    """Clients in memory, kept in step with the journal."""

    def __init__(self, journal: ClientStore, refresh_s: float = 2.0) -> None:
        self._journal = journal
        self._clients: dict[str, ClientRecord] = {}
        self._table = RoutingTable()
        self._version = -1.0
        self._refresh_s = refresh_s
        self._refresh_throttle = Throttle(60.0)
        self._lock = asyncio.Lock()
        #: Awaited after every change this registry makes: the worker processes of one gateway tell
        #: each other here, so that a client registered on one routes on all before the call returns.
        self.on_change: Callable[[], Awaitable[None]] | None = None

    # ------------------------------------------------------------------ routing (hot path)

    def route(self, shortcode: str, message: str) -> ClientRecord | None:
        """The client for an MO, or None when nobody is registered for it."""
        return self._table.route(shortcode, message)

    def get(self, client_id: str) -> ClientRecord | None:
        return self._clients.get(client_id)

    def all(self) -> list[ClientRecord]:
        return sorted(self._clients.values(), key=lambda c: c.created_at)

    # ------------------------------------------------------------------ keeping in step

    def _rebuild(self, clients: list[ClientRecord]) -> None:
        self._clients = {c.id: c for c in clients}
        self._table = RoutingTable(clients)

    async def load(self) -> None:
        """Read every client from the journal."""
        version = await self._journal.clients_version()
        self._rebuild(await self._journal.list_clients())
        self._version = version

    async def refresh_if_changed(self) -> bool:
        """Read the clients again if another node or worker changed one since the last read; whether
        anything was read (one small query when nothing changed)."""
        if await self._journal.clients_version() == self._version:
            return False
        async with self._lock:
            await self.load()
        return True

    async def reload(self) -> None:
        """Read every client again now (another worker changed one)."""
        async with self._lock:
            await self.load()

    async def refresh_forever(self) -> None:
        """Pick up changes other nodes made (cheap: one small query per period)."""
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                if await self._journal.clients_version() != self._version:
                    async with self._lock:
                        await self.load()
            except SecretKeyError as exc:  # another node wrote with a key this one lacks: say it in one line
                log.error("client registry refresh failed: %s", exc)
            except Exception as exc:  # a journal hiccup must not kill routing
                if journal_error_kind(exc) is None:
                    log.exception("client registry refresh failed")
                elif (held := self._refresh_throttle.ready("refresh")) is not None:
                    # The journal away (PostgreSQL restarting): an expected failure, one line a minute.
                    log.warning(
                        "client registry refresh failed: %s: %s%s",
                        type(exc).__name__,
                        exc,
                        self._refresh_throttle.more(held),
                    )

    # ------------------------------------------------------------------ changes

    def _check_conflicts(self, candidate: ClientRecord) -> None:
        why = conflict(self._table, candidate)
        if why is not None:
            raise ClientConflict(why)

    async def add(self, client: ClientRecord) -> ClientRecord:
        async with self._lock:
            await self.load()  # judge conflicts against what every node and worker wrote so far
            now = time.time()
            client = replace(
                client,
                id=client.id or _new_client_id(),
                token=client.token or new_client_token(),
                created_at=now,
                updated_at=now,
            )
            self._check_conflicts(client)
            await self._journal.put_client(client)
            await self.load()
        await self._changed()
        return client

    async def update(self, client: ClientRecord) -> ClientRecord:
        async with self._lock:
            await self.load()
            now = time.time()
            client = replace(
                _without_expired_grace(client, now), updated_at=max(now, client.updated_at + 1e-6)
            )
            self._check_conflicts(client)
            await self._journal.put_client(client)
            await self.load()
        await self._changed()
        return client

    async def change(
        self, client_id: str, edit: Callable[[ClientRecord], ClientRecord]
    ) -> ClientRecord | None:
        """Apply ``edit`` to the journal's current copy of a client, under the registry's lock, so two
        changes made on this node never lose each other (None: no such client). ``edit`` may raise, and
        returns ``current`` itself to change nothing (nothing is written then)."""
        async with self._lock:
            await self.load()
            current = await self._journal.get_client(client_id)
            if current is None:
                return None
            edited = edit(current)
            if edited is current:
                return current
            client = replace(edited, updated_at=max(time.time(), current.updated_at + 1e-6))
            self._check_conflicts(client)
            await self._journal.put_client(client)
            await self.load()
        await self._changed()
        return client

    async def rotate_token(self, client_id: str, overlap_s: float = 0.0) -> ClientRecord | None:
        """A new bearer token: at once, or with ``overlap_s`` the callbacks carry the current token that
        much longer and then the new one (``next_token``); the application accepts both meanwhile."""
        current = self._clients.get(client_id)
        if current is None:
            return None
        if overlap_s <= 0:
            return await self.update(
                replace(current, token=new_client_token(), next_token="", next_token_at=0.0)
            )
        now = time.time()
        base = _without_expired_grace(current, now)
        return await self.update(replace(base, next_token=new_client_token(), next_token_at=now + overlap_s))

    async def rotate_signing_secret(self, client_id: str, grace_s: float) -> ClientRecord | None:
        """A new signing secret; the current one keeps signing next to it for ``grace_s`` seconds.

        None for an unknown client; NotSigning when the client does not sign its callbacks.
        """
        current = self._clients.get(client_id)
        if current is None:
            return None
        if not current.signing_secret:
            raise NotSigning(f"client {client_id} does not sign its callbacks")
        rotated = replace(
            current,
            signing_secret=new_signing_secret(),
            previous_signing_secret=current.signing_secret if grace_s > 0 else "",
            previous_signing_until=time.time() + grace_s if grace_s > 0 else 0.0,
        )
        return await self.update(rotated)

    async def remove(self, client_id: str) -> bool:
        async with self._lock:
            removed = await self._journal.delete_client(client_id)
            await self.load()
        await self._changed()
        return removed

    async def _changed(self) -> None:
        if self.on_change is not None:
            try:
                await self.on_change()
            except Exception:  # the others pick the change up within refresh_s anyway
                log.exception("could not tell the other workers about a client change")
