"""The journal's batch writes — store, apply, receipts — written once for both engines.

Each is a program (``storage.dialect``) over many items at once, run by an engine inside the
transaction of its group commit: the SQLite writer merges the calls of one turn of the event loop
(``sqlite_writer.Coalescer``), the PostgreSQL writers the calls waiting in their queue. How they stay
cheap (measured; see docs/benchmarks.md):

* Rows go in as few multi-row statements (``Dialect.many``: chunked ``VALUES`` or ``unnest`` arrays).
* No read before write: a store is ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` (only duplicates,
  which are rare, are read back), then the state rows of the messages it inserted, in the state their
  first event leads to (``storage.schema.first_state``); a change is ``UPDATE message_states ... WHERE
  id = ? AND <allowed states> RETURNING id``, which rewrites the short row of what changes, not the
  message. The compare-and-set and the new state both come from ``core.timeline`` through
  ``storage.schema``; on PostgreSQL, under READ COMMITTED, the condition is re-checked against the
  newest row version after waiting for a concurrent writer, so of two nodes recording an outcome for
  the same message exactly one succeeds.
* The one read a store makes is for SMPP MOs (those given a repeat window): the earlier MOs of the same
  number with the same SMSC id or content, one seek per MO in the index ``messages_msisdn_source``
  (number, source id; the source ids of one content share the prefix ``c:<digest>:``), to find the
  ones they repeat (``core.repeats.find_repeats``). It runs in the write transaction, after the writers
  of other workers or nodes storing MOs of those numbers are held off (``Dialect.number_locks``), so a
  redelivery over another worker's or node's bind is recognised too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

from mogateway.core.message import Message, Rejection
from mogateway.core.ports import Stored
from mogateway.core.repeats import find_repeats, repeat_lookups
from mogateway.core.timeline import Change, Event, EventKind, State, Step, step_for
from mogateway.edges.storage.dialect import Dialect, Program, Statement
from mogateway.edges.storage.schema import (
    INSERT_COLUMNS,
    MESSAGES_FROM,
    STATE_COLUMNS,
    event_json,
    first_state,
    message_row,
    postgres_types,
    rounds,
    state_row,
    state_sql,
)

__all__ = ["StoreItem", "apply", "deliveries", "store"]

#: What is stored of one MO: the message, the worker that owns it, and the time since which an earlier
#: MO of its source id's family is this one (None: no lookup).
StoreItem = tuple[Message, int, float | None]

_INSERT_MESSAGES: Final = (
    f"INSERT INTO messages ({', '.join(INSERT_COLUMNS)}) {{rows}} ON CONFLICT (id) DO NOTHING RETURNING id"
)
_MESSAGE_TYPES: Final = postgres_types("messages", INSERT_COLUMNS)
_INSERT_STATES: Final = f"INSERT INTO message_states ({', '.join(STATE_COLUMNS)}) {{rows}}"
_STATE_TYPES: Final = postgres_types("message_states", STATE_COLUMNS)
_EVENT_COLUMNS: Final = ("message_id", "at", "kind", "data")
_INSERT_EVENTS: Final = f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) {{rows}}"
_EVENT_TYPES: Final = postgres_types("events", _EVENT_COLUMNS)
_UPSERT_REFS: Final = (
    "INSERT INTO reply_refs (ref, message_id) {rows} "
    "ON CONFLICT (ref) DO UPDATE SET message_id = excluded.message_id"
)
_REF_TYPES: Final = ("text", "text")
_EXISTING: Final = (
    f"SELECT m.id, s.state, m.rejection_field, m.rejection_reason FROM {MESSAGES_FROM} WHERE m.id {{keys}}"
)
_OWNERS_OF: Final = "SELECT ref, message_id FROM reply_refs WHERE ref {keys}"
# (number, lowest source id, source id past the family, since): core.repeats.repeat_lookups
_LOOKUP_TYPES: Final = ("text", "text", "text", "double precision")
# (id, client_id, reply_text) of a change that sets columns besides the state
_CHANGE_TYPES: Final = ("text", "text", "text")


@lru_cache(maxsize=4)
def _earlier_of_families(d: Dialect) -> str:
    source = d.bytewise("m.source_id")
    return (
        "SELECT m.id, m.msisdn, m.source_id, m.received_at FROM {table} "
        f"JOIN messages AS m{d.indexed_by('messages_msisdn_source')} "
        f"ON m.msisdn = v.column1 AND {source} >= v.column2 AND {source} < v.column3 "
        "WHERE m.received_at >= v.column4"
    )


# ------------------------------------------------------------------------------------------ store


def store(d: Dialect, items: Sequence[StoreItem], now: float) -> Program[list[Stored]]:
    """Insert the messages not stored yet; report the others (and repeats within the batch) as
    duplicates with the state they have."""
    messages = [m for m, _, _ in items]
    if any(since is not None for _, _, since in items):
        yield from _name_repeats(d, items, messages)
    first_of: dict[str, int] = {}
    rows: list[tuple[Any, ...]] = []
    for n, m in enumerate(messages):
        if m.id not in first_of:
            first_of[m.id] = n
            rows.append(message_row(m, now))
    inserted = {row[0] for row in (yield d.many(_INSERT_MESSAGES, _MESSAGE_TYPES, rows))}
    states = [state_row(messages[n], now, items[n][1]) for mid, n in first_of.items() if mid in inserted]
    if states:
        yield d.many(_INSERT_STATES, _STATE_TYPES, states)
    results: list[Stored | None] = []
    duplicates: list[int] = []
    for n, m in enumerate(messages):
        if m.id in inserted and first_of[m.id] == n:
            results.append(Stored(m.id, first_state(m), False, m.rejection))
        else:
            results.append(None)
            duplicates.append(n)
    if duplicates:
        found = yield d.keyed(_EXISTING, [messages[n].id for n in duplicates])
        existing = {
            mid: (State(state), None if field is None else Rejection(field, reason or ""))
            for mid, state, field, reason in found
        }
        for n in duplicates:
            state, rejection = existing[messages[n].id]
            results[n] = Stored(messages[n].id, state, True, rejection)
    return [r for r in results if r is not None]


def _name_repeats(d: Dialect, items: Sequence[StoreItem], messages: list[Message]) -> Program[None]:
    """Give each message that repeats an earlier MO (its number, and its SMSC id or content) that MO's
    id, in place (``core.repeats.find_repeats``)."""
    batch = [(m, since) for m, _, since in items]
    lookups = repeat_lookups(batch)
    if not lookups:
        return
    if d.number_locks is not None:
        yield [(d.number_locks, [sorted({msisdn for msisdn, *_ in lookups})])]
    earlier = yield d.many(_earlier_of_families(d), _LOOKUP_TYPES, lookups)
    for n, first_id in find_repeats(batch, [tuple(row) for row in earlier]).items():
        messages[n] = messages[n].with_changes(id=first_id)


# ------------------------------------------------------------------------------------------ apply


@lru_cache(maxsize=256)
def _update_ids(step: Step) -> str:
    sql = state_sql(step)
    return (
        f"UPDATE message_states SET state = {sql.after}, updated_at = ? "
        f"WHERE id {{keys}} AND {sql.allowed} RETURNING id"
    )


@lru_cache(maxsize=256)
def _update_values(step: Step) -> str:
    sql = state_sql(step, "s.state")
    return (
        f"UPDATE message_states AS s SET state = {sql.after}, updated_at = ?, "
        "client_id = coalesce(v.column2, s.client_id), reply_text = coalesce(v.column3, s.reply_text) "
        f"FROM {{table}} WHERE s.id = v.column1 AND {sql.allowed} RETURNING id"
    )


def apply(d: Dialect, changes: Sequence[Change], now: float) -> Program[list[bool]]:
    """Apply changes in the order given; per change, whether the table allowed it in its message's
    state (a change to an unknown message is not applied)."""
    applied = [False] * len(changes)
    for members in rounds(changes, key=lambda ch: ch.message_id):
        groups: dict[tuple[Step, bool], list[int]] = {}
        for n in members:
            ch = changes[n]
            valued = ch.client_id is not None or ch.reply_text is not None
            groups.setdefault((ch.step, valued), []).append(n)
        for (step, valued), indexes in groups.items():
            statements: list[Statement]
            if valued:
                rows = [(ch.message_id, ch.client_id, ch.reply_text) for ch in (changes[n] for n in indexes)]
                statements = d.many(_update_values(step), _CHANGE_TYPES, rows, now)
            else:
                statements = d.keyed(_update_ids(step), [changes[n].message_id for n in indexes], now)
            done = {row[0] for row in (yield statements)}
            for n in indexes:
                applied[n] = changes[n].message_id in done
    events: list[tuple[str, float, str, str]] = []
    refs: dict[str, str] = {}  # one row per ref (the last change naming it wins)
    for ch, ok in zip(changes, applied, strict=True):
        if ok:
            for ev in ch.events:
                events.append((ch.message_id, ev.at, ev.kind.value, event_json(ev)))
            refs.update((ref, ch.message_id) for ref in ch.reply_refs)
    writes = d.many(_INSERT_EVENTS, _EVENT_TYPES, events, ordered=True)
    writes += d.many(_UPSERT_REFS, _REF_TYPES, list(refs.items()))
    if writes:
        yield writes
    return applied


# ------------------------------------------------------------------------------------------ receipts


def deliveries(d: Dialect, receipts: Sequence[tuple[str, str, str]], now: float) -> Program[list[str | None]]:
    """Receipts (ref, status, detail) of many reply parts at once: the message of each (None: unknown
    ref), with a delivery event appended as the table says (an undelivered part makes the reply
    undelivered; a later "delivered" for another part does not hide it)."""
    owners = {row[0]: row[1] for row in (yield d.keyed(_OWNERS_OF, [ref for ref, _, _ in receipts]))}
    found: list[str | None] = []
    changes: list[Change] = []
    for ref, status, detail in receipts:
        message_id = owners.get(ref)
        found.append(message_id)
        if message_id is not None:
            event = Event(EventKind.DELIVERY, now, {"ref": ref, "status": status, "detail": detail})
            step_for(event)  # an unknown status raises here, before anything is written
            changes.append(Change(message_id, event))
    if changes:
        yield from apply(d, changes, now)
    return found
