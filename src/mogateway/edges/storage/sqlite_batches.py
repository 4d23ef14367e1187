"""The SQLite journal's batch writes: store, apply, receipts — each a function of a connection and many
items, run by the writer thread inside its group transaction.

How they stay cheap (measured; see docs/benchmarks.md):

* Rows go in as multi-row statements (one sqlite3 step, so one GIL hand-off, for many rows; executemany
  releases and re-takes the GIL at every row). Chunks have fixed sizes so that each statement text is
  prepared once and then comes from the connection's statement cache.
* No read before write: a store is ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` (only duplicates,
  which are rare, are read back), then the state rows of the messages it inserted; a change is ``UPDATE
  message_states ... WHERE id = ? AND <allowed states> RETURNING id``, which rewrites the short row of
  what changes, not the message (``storage.schema``). The compare-and-set and the new state both come
  from ``core.timeline`` through ``storage.schema``. The one read a store makes is for SMPP MOs (those
  given a repeat window): the earlier MOs of the same number with the same SMSC id or content, one seek
  per MO in the index ``messages_msisdn_source`` (number, source id; the source ids of one content
  share the prefix ``c:<digest>:``), to find the ones they repeat (``core.repeats.find_repeats``). It
  runs in the write transaction, which several workers' writers take in turn, so a redelivery over
  another worker's bind is recognised too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from mogateway.core.message import Message, Rejection
from mogateway.core.ports import Stored
from mogateway.core.repeats import find_repeats, repeat_lookups
from mogateway.core.timeline import Change, Event, EventKind, State, Step, step_for
from mogateway.edges.storage.schema import (
    INSERT_COLUMNS,
    MESSAGES_FROM,
    STATE_COLUMNS,
    event_json,
    message_row,
    rounds,
    state_row,
    state_sql,
)

__all__ = ["apply_batch", "delivery_batch", "store_batch"]

_CHUNK_SIZES = (256, 64, 16, 4, 1)
_INSERT_MESSAGES = (
    f"INSERT INTO messages ({', '.join(INSERT_COLUMNS)}) VALUES {{rows}} "
    "ON CONFLICT (id) DO NOTHING RETURNING id"
)
_INSERT_STATES = f"INSERT INTO message_states ({', '.join(STATE_COLUMNS)}) VALUES {{rows}}"
_INSERT_EVENTS = "INSERT INTO events (message_id, at, kind, data) VALUES {rows}"
_INSERT_REFS = "INSERT OR REPLACE INTO reply_refs (ref, message_id) VALUES {rows}"
_EXISTING = (
    f"SELECT m.id, s.state, m.rejection_field, m.rejection_reason FROM {MESSAGES_FROM} "
    "WHERE m.id IN ({marks})"
)
_OWNERS_OF = "SELECT ref, message_id FROM reply_refs WHERE ref IN ({marks})"
_EARLIER_OF_FAMILIES = (
    "SELECT m.id, m.msisdn, m.source_id, m.received_at FROM (VALUES {rows}) AS k "
    "JOIN messages AS m INDEXED BY messages_msisdn_source "
    "ON m.msisdn=k.column1 AND m.source_id>=k.column2 AND m.source_id<k.column3 "
    "WHERE m.received_at>=k.column4"
)


def sized_chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``items`` cut greedily into chunks whose sizes are all in _CHUNK_SIZES."""
    start = 0
    while start < len(items):
        left = len(items) - start
        size = next(n for n in _CHUNK_SIZES if n <= left)
        yield items[start : start + size]
        start += size


@lru_cache(maxsize=64)
def _values_list(width: int, count: int) -> str:
    return ",".join(["(" + ",".join("?" * width) + ")"] * count)


def _rows(conn: Any, template: str, rows: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Run ``template`` (with ``{rows}``) over ``rows`` in fixed-size chunks; what they return."""
    found: list[Any] = []
    if not rows:
        return found
    width = len(rows[0])
    for chunk in sized_chunks(rows):
        sql = template.format(rows=_values_list(width, len(chunk)))
        found.extend(conn.execute(sql, [v for row in chunk for v in row]).fetchall())
    return found


def _where_in(conn: Any, template: str, keys: Sequence[str], *first: Any) -> list[Any]:
    """Run ``template`` (with ``{marks}``) over ``keys`` in fixed-size chunks; ``first`` precede them."""
    found: list[Any] = []
    for chunk in sized_chunks(list(dict.fromkeys(keys))):
        sql = template.format(marks=",".join("?" * len(chunk)))
        found.extend(conn.execute(sql, [*first, *chunk]).fetchall())
    return found


# ------------------------------------------------------------------------------------------ store


def store_batch(conn: Any, items: Sequence[tuple[Message, int, float | None]]) -> list[Stored]:
    """Insert the messages (each with the worker that owns it and the time since which an earlier MO
    of its source id's family is this one, or None) not stored yet; report the others (and repeats
    within the batch) as duplicates with the state they have."""
    now = time.time()
    messages = [m for m, _, _ in items]
    if any(since is not None for _, _, since in items):
        _name_repeats(conn, items, messages)
    first_of: dict[str, int] = {}
    rows: list[tuple[Any, ...]] = []
    for n, m in enumerate(messages):
        if m.id not in first_of:
            first_of[m.id] = n
            rows.append(message_row(m, now))
    inserted = {row[0] for row in _rows(conn, _INSERT_MESSAGES, rows)}
    states = [
        state_row(mid, State.QUEUED if messages[n].accepted else State.REJECTED, now, items[n][1])
        for mid, n in first_of.items()
        if mid in inserted
    ]
    _rows(conn, _INSERT_STATES, states)
    results: list[Stored | None] = []
    duplicates: list[int] = []
    for n, m in enumerate(messages):
        if m.id in inserted and first_of[m.id] == n:
            results.append(Stored(m.id, State.QUEUED if m.accepted else State.REJECTED, False, m.rejection))
        else:
            results.append(None)
            duplicates.append(n)
    if duplicates:
        existing = {
            mid: (State(state), None if field is None else Rejection(field, reason or ""))
            for mid, state, field, reason in _where_in(conn, _EXISTING, [messages[n].id for n in duplicates])
        }
        for n in duplicates:
            state, rejection = existing[messages[n].id]
            results[n] = Stored(messages[n].id, state, True, rejection)
    return [r for r in results if r is not None]


def _name_repeats(
    conn: Any, items: Sequence[tuple[Message, int, float | None]], messages: list[Message]
) -> None:
    """Give each message that repeats an earlier MO (its number, and its SMSC id or content) that MO's
    id, in place (``core.repeats.find_repeats``)."""
    batch = [(m, since) for m, _, since in items]
    lookups = repeat_lookups(batch)
    if lookups:
        for n, first_id in find_repeats(batch, _rows(conn, _EARLIER_OF_FAMILIES, lookups)).items():
            messages[n] = messages[n].with_changes(id=first_id)


# ------------------------------------------------------------------------------------------ apply


@lru_cache(maxsize=256)
def _update_ids(step: Step, count: int) -> str:
    sql = state_sql(step)
    marks = ",".join("?" * count)
    return (
        f"UPDATE message_states SET state={sql.after}, updated_at=? "
        f"WHERE id IN ({marks}) AND {sql.allowed} RETURNING id"
    )


@lru_cache(maxsize=256)
def _update_values(step: Step, count: int) -> str:
    sql = state_sql(step, "s.state")
    return (
        f"UPDATE message_states AS s SET state={sql.after}, updated_at=v.column2, "
        "client_id=coalesce(v.column3, s.client_id), reply_text=coalesce(v.column4, s.reply_text) "
        f"FROM (VALUES {_values_list(4, count)}) AS v "
        f"WHERE s.id=v.column1 AND {sql.allowed} RETURNING id"
    )


def apply_batch(conn: Any, changes: Sequence[Change]) -> list[bool]:
    """Apply changes in the order given; per change, whether the table allowed it in its message's
    state (a change to an unknown message is not applied)."""
    now = time.time()
    applied = [False] * len(changes)
    for members in rounds(changes, key=lambda ch: ch.message_id):
        groups: dict[tuple[Step, bool], list[int]] = {}
        for n in members:
            ch = changes[n]
            valued = ch.client_id is not None or ch.reply_text is not None
            groups.setdefault((ch.step, valued), []).append(n)
        for (step, valued), indexes in groups.items():
            done: set[str] = set()
            for chunk in sized_chunks(indexes):
                if valued:
                    params: list[Any] = []
                    for n in chunk:
                        ch = changes[n]
                        params += (ch.message_id, now, ch.client_id, ch.reply_text)
                    found = conn.execute(_update_values(step, len(chunk)), params).fetchall()
                else:
                    ids = [changes[n].message_id for n in chunk]
                    found = conn.execute(_update_ids(step, len(chunk)), [now, *ids]).fetchall()
                done.update(row[0] for row in found)
            for n in indexes:
                applied[n] = changes[n].message_id in done
    events: list[tuple[str, float, str, str]] = []
    refs: list[tuple[str, str]] = []
    for ch, ok in zip(changes, applied, strict=True):
        if ok:
            for ev in ch.events:
                events.append((ch.message_id, ev.at, ev.kind.value, event_json(ev)))
            refs.extend((ref, ch.message_id) for ref in ch.reply_refs)
    _rows(conn, _INSERT_EVENTS, events)
    _rows(conn, _INSERT_REFS, refs)
    return applied


# ------------------------------------------------------------------------------------------ receipts


def delivery_batch(conn: Any, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
    """Receipts (ref, status, detail) of many reply parts at once: the message of each (None: unknown
    ref), with a delivery event appended as the table says (an undelivered part makes the reply
    undelivered; a later "delivered" for another part does not hide it)."""
    now = time.time()
    owners = dict(_where_in(conn, _OWNERS_OF, [ref for ref, _, _ in receipts]))
    found: list[str | None] = []
    changes: list[Change] = []
    for ref, status, detail in receipts:
        message_id = owners.get(ref)
        found.append(message_id)
        if message_id is not None:
            event = Event(EventKind.DELIVERY, now, {"ref": ref, "status": status, "detail": detail})
            step_for(event)  # an unknown status would raise here, before anything is written
            changes.append(Change(message_id, event))
    apply_batch(conn, changes)
    return found
