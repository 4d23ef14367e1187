"""The journal: where every MO, its timeline, the client registry and the gateway's own secrets live.

A small protocol with real implementations (SQLite for one machine, PostgreSQL for many). Rules every
implementation keeps, checked by one behavioural test suite run against each:

* ``store`` returns only after the rows are durably committed; a message whose id is already stored is
  not stored again (its existing state is returned with ``duplicate=True``).
* ``apply`` applies each change atomically; a change with ``expect`` is applied only when the message's
  current state is one of those (compare-and-set), so two nodes cannot both record an outcome.
* Events are kept in the order they were applied; a message's state is the result of its events
  according to ``core.timeline``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from mogateway.core.contract import format_tsiso
from mogateway.core.timeline import EventKind, State

__all__ = [
    "Change",
    "ClientRecord",
    "Event",
    "Journal",
    "MESSAGE_COLUMNS",
    "MessageFilter",
    "MessageRecord",
    "NewMessage",
    "StoreResult",
    "iso",
    "message_from_row",
    "id_for_source",
    "new_message_id",
]


def _b32(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


def new_message_id() -> str:
    """A fresh id: 48 bits of milliseconds then 80 random bits, 26 base32 characters, time-sortable."""
    return _b32(int(time.time() * 1000).to_bytes(6, "big") + os.urandom(10))


def id_for_source(source_key: str) -> str:
    """The id of a message a source named ``source_key`` ("<origin>:<source id>"): same key, same id.

    Being a pure function of the key, it is the same on every node, which is what lets the journal and
    the work queue deduplicate a message pushed twice, even to two different nodes.
    """
    return _b32(hashlib.blake2b(source_key.encode("utf-8"), digest_size=16).digest())


@dataclass(slots=True)
class NewMessage:
    """A message as intake hands it to the journal (accepted, or rejected with a reason)."""

    id: str
    origin: str
    source_id: str | None
    shortcode: str
    msisdn: str
    message: str
    received_at: float  # unix seconds
    state: State  # QUEUED or REJECTED
    cc: int | None = None
    ndc: int | None = None
    sn: int | None = None
    operator: str = ""
    circle: str = ""
    reason: str = ""  # why it was rejected
    reason_field: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoreResult:
    id: str
    state: State
    duplicate: bool
    reason: str = ""
    reason_field: str = ""


@dataclass(slots=True)
class Event:
    kind: EventKind
    at: float  # unix seconds
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Change:
    """Events to append to one message and the state they lead to (None: unchanged)."""

    message_id: str
    events: list[Event]
    state: State | None = None
    expect: frozenset[State] | None = None
    client_id: str | None = None
    reply_text: str | None = None
    reply_refs: Sequence[str] = ()


@dataclass(slots=True)
class MessageRecord:
    id: str
    origin: str
    source_id: str | None
    shortcode: str
    msisdn: str
    message: str
    received_at: float
    stored_at: float
    updated_at: float
    state: State
    cc: int | None
    ndc: int | None
    sn: int | None
    operator: str
    circle: str
    client_id: str | None
    reply_text: str | None


#: The columns of a message row, in the order :func:`message_from_row` reads them (both journals).
MESSAGE_COLUMNS = (
    "id, origin, source_id, shortcode, msisdn, message, received_at, stored_at, updated_at, state, "
    "cc, ndc, sn, operator, circle, client_id, reply_text"
)


def message_from_row(row: Sequence[Any]) -> MessageRecord:
    """A MessageRecord from a row selected with :data:`MESSAGE_COLUMNS`."""
    return MessageRecord(
        id=row[0],
        origin=row[1],
        source_id=row[2],
        shortcode=row[3],
        msisdn=row[4],
        message=row[5],
        received_at=row[6],
        stored_at=row[7],
        updated_at=row[8],
        state=State(row[9]),
        cc=row[10],
        ndc=row[11],
        sn=row[12],
        operator=row[13],
        circle=row[14],
        client_id=row[15],
        reply_text=row[16],
    )


@dataclass(slots=True)
class MessageFilter:
    shortcode: str | None = None
    msisdn: str | None = None
    state: State | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 50


@dataclass(slots=True)
class ClientRecord:
    """A client application: where its MOs go and how it wants them."""

    id: str
    name: str
    shortcodes: list[str]
    keywords: list[str]
    callback_url: str
    token: str
    timeout_s: float = 30.0
    max_concurrency: int = 64
    tsunix_unit: str = "ms"
    unescape_newlines: bool = True
    created_at: float = 0.0
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Journal(Protocol):
    """What the gateway needs from durable storage."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    # messages
    async def store(self, messages: Sequence[NewMessage]) -> list[StoreResult]: ...

    async def apply(self, changes: Sequence[Change]) -> list[bool]: ...

    async def get(self, message_id: str) -> MessageRecord | None: ...

    async def timeline(self, message_id: str) -> list[Event]: ...

    async def find(self, where: MessageFilter) -> list[MessageRecord]: ...

    async def unfinished(self, limit: int, older_than: float | None = None) -> list[MessageRecord]: ...

    async def record_delivery(self, ref: str, status: str, detail: str) -> str | None: ...

    async def counts_by_state(self) -> dict[str, int]: ...

    # client registry
    async def put_client(self, client: ClientRecord) -> None: ...

    async def get_client(self, client_id: str) -> ClientRecord | None: ...

    async def list_clients(self) -> list[ClientRecord]: ...

    async def delete_client(self, client_id: str) -> bool: ...

    async def clients_version(self) -> float: ...

    # the gateway's own settings (generated tokens)
    async def get_setting(self, key: str) -> str | None: ...

    async def set_setting_if_absent(self, key: str, value: str) -> str: ...


def iso(ts: float | None) -> str | None:
    """ISO 8601 UTC with milliseconds (the tsiso shape) for API output."""
    return None if ts is None else format_tsiso(datetime.fromtimestamp(ts, UTC))
