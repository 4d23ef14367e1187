"""The client registry: which application gets which MO, and the table it routes with.

Routing: the shortcode, then the first word of the message as a keyword (case-insensitive). A client
with keywords receives only those keywords on its shortcodes; a client without keywords is the default
for its shortcodes. The most specific match wins. Two clients may not claim the same (shortcode, keyword)
pair, nor both be the default of one shortcode.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import secrets
import time
from dataclasses import replace

from mogateway.storage.journal import ClientRecord, Journal

__all__ = ["ClientConflict", "Registry", "first_word", "new_client_token"]

log = logging.getLogger(__name__)


class ClientConflict(ValueError):
    """A registration that would claim a route another client already has."""


def new_client_token() -> str:
    """A bearer token for a client application: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def _new_client_id() -> str:
    return "cl_" + base64.b32encode(os.urandom(10)).decode("ascii").lower()


def first_word(message: str) -> str:
    """The routing keyword of a message: its first word, case-folded ("" for an empty message)."""
    parts = message.split(maxsplit=1)
    return parts[0].casefold() if parts else ""


Route = tuple[str, str | None]


def _routes(client: ClientRecord) -> list[Route]:
    keywords: list[str | None] = [k.casefold() for k in client.keywords] or [None]
    return [(sc, kw) for sc in client.shortcodes for kw in keywords]


class Registry:
    """Clients in memory, kept in step with the journal."""

    def __init__(self, journal: Journal, refresh_s: float = 2.0) -> None:
        self._journal = journal
        self._clients: dict[str, ClientRecord] = {}
        self._table: dict[Route, ClientRecord] = {}
        self._version = -1.0
        self._refresh_s = refresh_s
        self._lock = asyncio.Lock()
        self.on_change: list[object] = []

    # ------------------------------------------------------------------ routing (hot path)

    def route(self, shortcode: str, message: str) -> ClientRecord | None:
        """The client for an MO, or None when nobody is registered for it."""
        table = self._table
        if not table:
            return None
        client = table.get((shortcode, first_word(message)))
        if client is None:
            client = table.get((shortcode, None))
        return client

    def get(self, client_id: str) -> ClientRecord | None:
        return self._clients.get(client_id)

    def all(self) -> list[ClientRecord]:
        return sorted(self._clients.values(), key=lambda c: c.created_at)

    # ------------------------------------------------------------------ keeping in step

    def _rebuild(self, clients: list[ClientRecord]) -> None:
        table: dict[Route, ClientRecord] = {}
        for client in sorted(clients, key=lambda c: c.created_at):
            for route in _routes(client):
                table.setdefault(route, client)
        self._clients = {c.id: c for c in clients}
        self._table = table

    async def load(self) -> None:
        """Read every client from the journal."""
        version = await self._journal.clients_version()
        self._rebuild(await self._journal.list_clients())
        self._version = version

    async def refresh_forever(self) -> None:
        """Pick up changes other nodes made (cheap: one small query per period)."""
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                if await self._journal.clients_version() != self._version:
                    async with self._lock:
                        await self.load()
            except Exception:  # a journal hiccup must not kill routing
                log.exception("client registry refresh failed")

    # ------------------------------------------------------------------ changes

    def _check_conflicts(self, candidate: ClientRecord) -> None:
        for route in _routes(candidate):
            owner = self._table.get(route)
            if owner is not None and owner.id != candidate.id:
                shortcode, keyword = route
                what = (
                    f"keyword {keyword!r} on shortcode {shortcode}" if keyword else f"shortcode {shortcode}"
                )
                raise ClientConflict(f"{what} already belongs to client {owner.id} ({owner.name})")

    async def add(self, client: ClientRecord) -> ClientRecord:
        async with self._lock:
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
            return client

    async def update(self, client: ClientRecord) -> ClientRecord:
        async with self._lock:
            client = replace(client, updated_at=max(time.time(), client.updated_at + 1e-6))
            self._check_conflicts(client)
            await self._journal.put_client(client)
            await self.load()
            return client

    async def rotate_token(self, client_id: str) -> ClientRecord | None:
        current = self._clients.get(client_id)
        if current is None:
            return None
        return await self.update(replace(current, token=new_client_token()))

    async def remove(self, client_id: str) -> bool:
        async with self._lock:
            removed = await self._journal.delete_client(client_id)
            await self.load()
            return removed
