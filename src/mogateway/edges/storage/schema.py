"""The journal's schema and rules, described once for both engines (SQLite, PostgreSQL).

What is here, and only here:

* the tables and their columns, each with its SQLite and PostgreSQL type (the migrations, which
  create and change the schema of both engines, must arrive at it, which a test checks);
* how a message row reads back as a :class:`~mogateway.core.ports.MessageRecord` and how a message is
  written as a row, and how its first timeline entry (received or rejected) is read from that row;
* how ``core.timeline``'s table becomes SQL: the states in which an event may be applied (a ``WHERE``
  clause) and the state it leads to (a ``CASE`` on the current state). A journal never writes a state
  of its own: it writes the expression this module derives from the table.

What differs between the engines — placeholders, arrays versus multi-row ``VALUES`` — is
``storage.dialect``'s; the writer and connections are each engine's module's.

A message is two rows. Its ``messages`` row is written once, when it is stored, and never changes: it
is the first entry of its timeline too (``received`` or ``rejected``, with its origin, source id, notes
and rejection). Its ``message_states`` row holds what changes as it moves: the state, the time of the
last change, the client, the reply text and the worker that owns it. A change rewrites only that short
row (4 µs less per update than rewriting the whole message, docs/benchmarks.md §0.8), and each event
adds one row to ``events``. Reads join the two on the id (:data:`MESSAGE_COLUMNS`, :data:`MESSAGES_FROM`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, Final

import orjson

from mogateway.core.immutable import immutable
from mogateway.core.message import Message, Rejection, Sender
from mogateway.core.ports import MessageRecord
from mogateway.core.timeline import TABLE, UNFINISHED_STATES, Event, EventKind, State, Step

__all__ = [
    "COLUMNS",
    "MESSAGES_FROM",
    "MESSAGE_COLUMNS",
    "STATE_COLUMNS",
    "TABLES",
    "UNFINISHED_SQL",
    "Column",
    "first_event",
    "first_state",
    "message_row",
    "postgres_types",
    "record_from_row",
    "state_row",
    "state_sql",
]


@immutable
class Column:
    name: str
    sqlite: str
    postgres: str


def _c(name: str, sqlite: str, postgres: str | None = None) -> Column:
    return Column(name, sqlite, postgres or sqlite.lower())


#: Every table, its columns in order. Indexes and keys are in the migrations.
TABLES: Final[dict[str, tuple[Column, ...]]] = {
    # What an MO is: written once, when it is stored.
    "messages": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("origin", "TEXT NOT NULL", "text NOT NULL"),
        _c("source_id", "TEXT", "text"),
        _c("shortcode", "TEXT NOT NULL", "text NOT NULL"),
        _c("msisdn", "TEXT NOT NULL", "text NOT NULL"),
        _c("message", "TEXT NOT NULL", "text NOT NULL"),
        _c("received_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("stored_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("cc", "INTEGER", "integer"),
        _c("ndc", "INTEGER", "integer"),
        _c("sn", "INTEGER", "bigint"),
        _c("operator", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("circle", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("notes", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("rejection_field", "TEXT", "text"),
        _c("rejection_reason", "TEXT", "text"),
        # A WhatsApp MO's callback member, the exact JSON text (Message.whatsapp; NULL for an SMS). Text,
        # not jsonb, in PostgreSQL too: jsonb reorders keys, and the callback's bytes must not change.
        _c("whatsapp", "TEXT", "text"),
    ),
    # Where it is: one row per message, the only one a change rewrites.
    "message_states": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("state", "TEXT NOT NULL", "text NOT NULL"),
        _c("updated_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("client_id", "TEXT", "text"),
        _c("reply_text", "TEXT", "text"),
        # The worker process that dispatches the MO (core.workers; 0 with one worker and in cluster mode).
        _c("owner", "INTEGER NOT NULL DEFAULT 0", "integer NOT NULL DEFAULT 0"),
    ),
    "events": (
        _c("seq", "INTEGER", "bigint NOT NULL"),
        _c("message_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("kind", "TEXT NOT NULL", "text NOT NULL"),
        _c("data", "TEXT NOT NULL", "jsonb NOT NULL"),
    ),
    "reply_refs": (
        _c("ref", "TEXT NOT NULL", "text NOT NULL"),
        _c("message_id", "TEXT NOT NULL", "text NOT NULL"),
    ),
    "clients": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("doc", "TEXT NOT NULL", "jsonb NOT NULL"),
        _c("updated_at", "REAL NOT NULL", "double precision NOT NULL"),
    ),
    "settings": (
        _c("key", "TEXT NOT NULL", "text NOT NULL"),
        _c("value", "TEXT NOT NULL", "text NOT NULL"),
    ),
    # Traffic figures (service.stats): absolute counts per interval, node, client and kind. Kept apart
    # from the messages so that reading "today" never touches them.
    "stats": (
        _c("span", "INTEGER NOT NULL", "integer NOT NULL"),
        _c("at", "INTEGER NOT NULL", "bigint NOT NULL"),
        _c("node", "TEXT NOT NULL", "text NOT NULL"),
        _c("client", "TEXT NOT NULL", "text NOT NULL"),
        _c("kind", "TEXT NOT NULL", "text NOT NULL"),
        _c("count", "INTEGER NOT NULL", "bigint NOT NULL"),
    ),
    # The console's sessions (a hash of the id, never the id) and failed sign-ins per address, shared
    # by every worker and node (edges/storage/console_sessions.py; migration 0008), each bound to the
    # admin token it was opened with by a keyed hash of that token (migration 0011).
    "console_sessions": (
        _c("id_hash", "TEXT NOT NULL", "text NOT NULL"),
        _c("expires_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("flashes", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("admin_token_tag", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
    ),
    "console_signin_failures": (
        _c("address", "TEXT NOT NULL", "text NOT NULL"),
        _c("at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("failures", "INTEGER NOT NULL", "integer NOT NULL"),
    ),
    # WhatsApp messages retention deleted, kept by id for the webhook's replay window (migration 0012).
    "whatsapp_seen": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("received_at", "REAL NOT NULL", "double precision NOT NULL"),
    ),
    # The client portal (edges/storage/portal_store.py; migration 0015): people, invites, sessions,
    # failed sign-ins, recovery codes and the audit of changes, each row of one client.
    "portal_users": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("client_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("email", "TEXT NOT NULL", "text NOT NULL"),
        _c("role", "TEXT NOT NULL", "text NOT NULL"),
        _c("password_hash", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("totp_secret", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
        _c("totp_step", "INTEGER NOT NULL DEFAULT 0", "bigint NOT NULL DEFAULT 0"),
        _c("created_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("disabled_at", "REAL NOT NULL DEFAULT 0", "double precision NOT NULL DEFAULT 0"),
        # What the person's device cookies are signed over; disabling, signing out everywhere and
        # setting a password add one (migration 0016).
        _c("device_generation", "INTEGER NOT NULL DEFAULT 0", "bigint NOT NULL DEFAULT 0"),
    ),
    "portal_recovery_codes": (
        _c("user_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("code_hash", "TEXT NOT NULL", "text NOT NULL"),
    ),
    "portal_invites": (
        _c("id_hash", "TEXT NOT NULL", "text NOT NULL"),
        _c("client_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("user_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("expires_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("used_at", "REAL NOT NULL DEFAULT 0", "double precision NOT NULL DEFAULT 0"),
    ),
    "portal_sessions": (
        _c("id_hash", "TEXT NOT NULL", "text NOT NULL"),
        _c("user_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("client_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("expires_at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("flashes", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
    ),
    "portal_signin_failures": (
        _c("address", "TEXT NOT NULL", "text NOT NULL"),
        _c("at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("failures", "INTEGER NOT NULL", "integer NOT NULL"),
    ),
    "portal_audit": (
        _c("id", "TEXT NOT NULL", "text NOT NULL"),
        _c("client_id", "TEXT NOT NULL", "text NOT NULL"),
        _c("at", "REAL NOT NULL", "double precision NOT NULL"),
        _c("actor", "TEXT NOT NULL", "text NOT NULL"),
        _c("action", "TEXT NOT NULL", "text NOT NULL"),
        _c("detail", "TEXT NOT NULL DEFAULT ''", "text NOT NULL DEFAULT ''::text"),
    ),
}

#: The columns of a ``messages`` row, as :func:`message_row` orders them (a new row has all of them).
COLUMNS: Final = tuple(c.name for c in TABLES["messages"])
INSERT_COLUMNS: Final = COLUMNS
#: The columns of a ``message_states`` row, as :func:`state_row` orders them.
STATE_COLUMNS: Final = tuple(c.name for c in TABLES["message_states"])
#: A message's two rows, joined: ``m`` is its ``messages`` row, ``s`` its ``message_states`` row.
MESSAGES_FROM: Final = "messages AS m JOIN message_states AS s ON s.id = m.id"
#: What :func:`record_from_row` reads, in its order, from :data:`MESSAGES_FROM`.
MESSAGE_COLUMNS: Final = (
    "m.id, m.origin, m.source_id, m.shortcode, m.msisdn, m.message, m.received_at, m.stored_at, "
    "s.updated_at, s.state, m.cc, m.ndc, m.sn, m.operator, m.circle, s.client_id, s.reply_text, "
    "m.notes, m.rejection_field, m.rejection_reason, s.owner, m.whatsapp"
)

#: ``state IN (...)`` of the unfinished messages, spelled identically in queries and partial indexes
#: (SQLite uses a partial index only for a query whose condition matches it term by term).
UNFINISHED_SQL: Final = "state IN (" + ", ".join(f"'{s.value}'" for s in sorted(UNFINISHED_STATES)) + ")"

# ------------------------------------------------------------------------------------------ rows


def message_row(message: Message, now: float) -> tuple[Any, ...]:
    """The ``messages`` row a newly stored message is inserted as (:data:`COLUMNS` order)."""
    s = message.sender
    r = message.rejection
    return (
        message.id,
        message.origin,
        message.source_id,
        message.shortcode,
        message.msisdn,
        message.text,
        message.received_at,
        now,
        None if s is None else s.cc,
        None if s is None else s.ndc,
        None if s is None else s.sn,
        "" if s is None else s.operator,
        "" if s is None else s.circle,
        orjson.dumps(list(message.notes)).decode() if message.notes else "",
        None if r is None else r.field,
        None if r is None else r.reason,
        message.whatsapp,
    )


def state_row(message: Message, now: float, owner: int = 0) -> tuple[Any, ...]:
    """The ``message_states`` row of a newly stored message (:data:`STATE_COLUMNS` order), in the state
    its first event leads to."""
    return (message.id, first_state(message).value, now, None, None, owner)


def postgres_types(table: str, columns: Sequence[str]) -> tuple[str, ...]:
    """PostgreSQL's names of the types of ``columns`` of ``table`` (what its arrays of them are made of)."""
    described = {c.name: c.postgres.split(" NOT NULL")[0].split(" DEFAULT")[0] for c in TABLES[table]}
    return tuple(described[name] for name in columns)


def record_from_row(row: Sequence[Any]) -> MessageRecord:
    """A MessageRecord from a row selected with :data:`MESSAGE_COLUMNS` from :data:`MESSAGES_FROM`."""
    (
        mid,
        origin,
        source_id,
        shortcode,
        msisdn,
        text,
        received_at,
        stored_at,
        updated_at,
        state,
        cc,
        ndc,
        sn,
        operator,
        circle,
        client_id,
        reply_text,
        notes,
        rejection_field,
        rejection_reason,
        owner,
        whatsapp,
    ) = row
    message = Message(
        id=mid,
        shortcode=shortcode,
        msisdn=msisdn,
        text=text,
        received_at=received_at,
        origin=origin,
        source_id=source_id,
        sender=None if cc is None else Sender(cc, ndc, sn, operator, circle),
        rejection=None if rejection_field is None else Rejection(rejection_field, rejection_reason or ""),
        notes=tuple(orjson.loads(notes)) if notes else (),
        whatsapp=whatsapp,
    )
    return MessageRecord(message, State(state), stored_at, updated_at, client_id, reply_text, owner)


def _first_kind(message: Message) -> EventKind:
    return EventKind.RECEIVED if message.rejection is None else EventKind.REJECTED


#: Where each first event leads from no state at all, as ``core.timeline.TABLE`` says.
_FIRST_STATES: Final = {
    kind: TABLE[(kind, None)].moves[None] for kind in (EventKind.RECEIVED, EventKind.REJECTED)
}


def first_state(message: Message) -> State:
    """The state a message is stored in: the one its first event (received, or rejected) leads to."""
    return _FIRST_STATES[_first_kind(message)]


def first_event(record: MessageRecord) -> Event:
    """The first entry of a message's timeline, which its row holds: received (or rejected) and stored."""
    m = record.message
    data: dict[str, Any] = {"origin": m.origin, "stored_at": record.stored_at}
    if m.source_id is not None:
        data["source_id"] = m.source_id
    if m.notes:
        data["notes"] = list(m.notes)
    if m.rejection is not None:
        data["reason"] = m.rejection.reason
        data["field"] = m.rejection.field
    return Event(_first_kind(m), m.received_at, data)


def event_json(event: Event) -> str:
    """An event's data as stored (JSON text)."""
    return orjson.dumps(event.data).decode()


# ------------------------------------------------------------------------------------------ states


@immutable
class StateSql:
    """A step of the timeline table as SQL: ``allowed`` is a condition on the current state (the
    compare-and-set), ``after`` the expression of the state it leaves."""

    allowed: str
    after: str


def _quoted(states: Sequence[State]) -> str:
    return ", ".join(f"'{s.value}'" for s in states)


@cache
def state_sql(step: Step, column: str = "state") -> StateSql:
    """The SQL of ``step`` over a state column named ``column`` (derived from ``core.timeline``)."""
    allowed = sorted(s for s in step.allowed if s is not None)
    if not allowed:
        raise ValueError("a step that only applies to new messages is written by store, not apply")
    targets = {to for frm, to in step.moves.items() if frm is not None}
    moved_from = sorted(frm for frm in step.moves if frm is not None)
    if not step.keeps and len(targets) == 1:
        after = f"'{next(iter(targets)).value}'"
    elif not moved_from:
        after = column
    else:
        whens = " ".join(f"WHEN '{frm.value}' THEN '{step.moves[frm].value}'" for frm in moved_from)
        after = f"CASE {column} {whens} ELSE {column} END"
    return StateSql(f"{column} IN ({_quoted(allowed)})", after)


def rounds(items: Sequence[Any], key: Callable[[Any], str]) -> list[list[int]]:
    """Indexes of ``items`` cut into rounds in which no key appears twice, keeping each key's order:
    one UPDATE statement touches a row at most once, and a later change must see an earlier one."""
    out: list[list[int]] = []
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        k = seen.get(key(item), -1) + 1
        seen[key(item)] = k
        if k == len(out):
            out.append([])
        out[k].append(n)
    return out
