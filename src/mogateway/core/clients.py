"""Client applications and how MOs are routed to them.

Routing: the shortcode, then the first word of the message as a keyword (case-insensitive). A client
with keywords receives only those keywords on its shortcodes; a client without keywords is the default
for its shortcodes. The most specific match wins. Two clients may not claim the same (shortcode,
keyword) pair, nor both be the default of one shortcode: :func:`conflict` says which claim is taken.

WhatsApp numbers (``whatsapp_numbers``, the business numbers' digits) are routed exactly like shortcodes,
keywords included, in the same table: a business number has 11 to 15 digits and a shortcode at most 10
(``core.message``), so the two never meet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, field
from typing import Any

from mogateway.core.immutable import immutable

__all__ = ["ClientRecord", "Route", "RoutingTable", "conflict", "first_word", "routes"]


@immutable
class ClientRecord:
    """A client application: where its MOs go and how it wants them. Secrets stay out of its repr."""

    id: str
    name: str
    shortcodes: list[str]
    keywords: list[str]
    callback_url: str
    token: str = field(repr=False)
    timeout_s: float = 30.0
    max_concurrency: int = 64
    tsunix_unit: str = "ms"
    unescape_newlines: bool = True
    created_at: float = 0.0
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: Callbacks are signed with this secret (core.signing); "" when the client does not sign.
    signing_secret: str = field(default="", repr=False)
    #: The secret before the last rotation; it signs too until ``previous_signing_until`` (unix s).
    previous_signing_secret: str = field(default="", repr=False)
    previous_signing_until: float = 0.0
    #: WhatsApp business numbers (digits with the country code) routed to this client like shortcodes.
    whatsapp_numbers: list[str] = field(default_factory=list)
    #: A rotated bearer token waiting for its overlap window to end: callbacks carry ``token`` until
    #: ``next_token_at`` (unix s), then this one (the application accepts both meanwhile).
    next_token: str = field(default="", repr=False)
    next_token_at: float = 0.0

    @property
    def sign_callbacks(self) -> bool:
        return bool(self.signing_secret)

    def in_signing_grace(self, now: float) -> bool:
        """True while the previous secret still signs (a rotation's grace period)."""
        return bool(self.previous_signing_secret) and now < self.previous_signing_until

    def signing_secrets(self, now: float) -> list[str]:
        """The secrets a callback sent at ``now`` is signed with, newest first; [] when not signed."""
        if not self.signing_secret:
            return []
        if self.in_signing_grace(now):
            return [self.signing_secret, self.previous_signing_secret]
        return [self.signing_secret]

    def callback_token(self, now: float) -> str:
        """The bearer token a callback sent at ``now`` carries."""
        if self.next_token and now >= self.next_token_at:
            return self.next_token
        return self.token

    def to_doc(self) -> dict[str, Any]:
        """The client as the JSON document the journals keep."""
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> ClientRecord:
        """A client from its stored document (members this version does not know are kept in ``extra``)."""
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        unknown = {k: v for k, v in doc.items() if k not in cls.__dataclass_fields__}
        if unknown:
            known["extra"] = {**known.get("extra", {}), **unknown}
        return cls(**known)


def first_word(message: str) -> str:
    """The routing keyword of a message: its first word, case-folded ("" for an empty message)."""
    parts = message.split(maxsplit=1)
    return parts[0].casefold() if parts else ""


Route = tuple[str, str | None]


def routes(client: ClientRecord) -> list[Route]:
    """The (shortcode, keyword or None for the default) pairs ``client`` claims."""
    keywords: list[str | None] = [k.casefold() for k in client.keywords] or [None]
    return [(sc, kw) for sc in (*client.shortcodes, *client.whatsapp_numbers) for kw in keywords]


class RoutingTable:
    """Route -> client, built from every client (the earliest registered wins a contested route)."""

    __slots__ = ("_table",)

    def __init__(self, clients: Iterable[ClientRecord] = ()) -> None:
        table: dict[Route, ClientRecord] = {}
        for client in sorted(clients, key=lambda c: c.created_at):
            for route in routes(client):
                table.setdefault(route, client)
        self._table = table

    def route(self, shortcode: str, message: str) -> ClientRecord | None:
        """The client for an MO, or None when nobody is registered for it."""
        table = self._table
        if not table:
            return None
        client = table.get((shortcode, first_word(message)))
        if client is None:
            client = table.get((shortcode, None))
        return client

    def owner(self, route: Route) -> ClientRecord | None:
        return self._table.get(route)


def conflict(table: RoutingTable, candidate: ClientRecord) -> str | None:
    """Why ``candidate`` cannot have its routes (one already belongs to another client), or None."""
    for route in routes(candidate):
        owner = table.owner(route)
        if owner is not None and owner.id != candidate.id:
            shortcode, keyword = route
            number = f"WhatsApp number {shortcode}" if len(shortcode) > 10 else f"shortcode {shortcode}"
            what = f"keyword {keyword!r} on {number}" if keyword else number
            return f"{what} already belongs to client {owner.id} ({owner.name})"
    return None
