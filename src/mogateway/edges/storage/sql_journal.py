"""The Journal on SQL, written once for both engines: every operation as a program (``storage.dialect``).

An engine — :mod:`~mogateway.edges.storage.sqlite`, :mod:`~mogateway.edges.storage.postgres` —
subclasses :class:`SqlJournal`, names its :class:`~mogateway.edges.storage.dialect.Dialect` and says
how a program runs there, in three ways:

* :meth:`SqlJournal._batch` — store, apply, receipts (``storage.batches``): merged with the other
  calls of the same kind into the next group commit;
* :meth:`SqlJournal._writing` — any other write, in a transaction;
* :meth:`SqlJournal._reading` — a read, off the writer's path; ``snapshot``: its statements see one
  state of the journal.

A new journal query is a program here (or in ``storage.batches`` when it is a batch write), written
with ``?`` placeholders and the dialect's few helpers; both engines then run it as they run the others.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeVar

import orjson

from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message
from mogateway.core.portal_store import PortalStore
from mogateway.core.ports import FinishedMessage, MessageFilter, MessageRecord, StatsRow, Stored
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage import batches
from mogateway.edges.storage.client_documents import client_document, client_from_document
from mogateway.edges.storage.dialect import Dialect, Program
from mogateway.edges.storage.portal_store import SqlPortalStore
from mogateway.edges.storage.schema import (
    MESSAGE_COLUMNS,
    MESSAGES_FROM,
    UNFINISHED_SQL,
    first_event,
    record_from_row,
)
from mogateway.edges.storage.sealing import Sealer

__all__ = ["Batch", "SqlJournal", "write_client"]

T = TypeVar("T")

#: A batch write of ``storage.batches``: many items at once, at one time.
Batch = Callable[[Dialect, Sequence[Any], float], Program[list[Any]]]

_SELECT: Final = f"SELECT {MESSAGE_COLUMNS} FROM {MESSAGES_FROM}"
_SET_SETTING: Final = (
    "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_STATS_KEY: Final = "span, at, node, client, kind"
_STATS_TYPES: Final = ("integer", "bigint", "text", "text", "text", "bigint")


class SqlJournal(abc.ABC):
    """Every Journal operation, for an engine that runs programs (module docstring)."""

    dialect: ClassVar[Dialect]
    #: Seals client secrets on write and opens them on read (storage/sealing.py).
    sealer: Sealer

    @abc.abstractmethod
    async def _batch(self, batch: Batch, items: Sequence[Any]) -> list[Any]:
        """Run ``batch`` over ``items`` with the other calls of that batch in the next group commit;
        the results of ``items``."""

    @abc.abstractmethod
    async def _writing(self, program: Callable[..., Program[T]], *args: Any) -> T:
        """Run ``program(dialect, *args)`` in a write transaction (again, from the start, if it is
        retried)."""

    @abc.abstractmethod
    async def _reading(self, program: Callable[..., Program[T]], *args: Any, snapshot: bool = False) -> T:
        """Run ``program(dialect, *args)`` as a read."""

    # ------------------------------------------------------------------ messages

    async def store(
        self,
        messages: Sequence[Message],
        owners: Sequence[int] | None = None,
        repeat_since: Sequence[float | None] | None = None,
    ) -> list[Stored]:
        if not messages:
            return []
        count = len(messages)
        items = list(
            zip(
                messages,
                owners if owners is not None else [0] * count,
                repeat_since if repeat_since is not None else [None] * count,
                strict=True,
            )
        )
        return await self._batch(batches.store, items)

    async def apply(self, changes: Sequence[Change]) -> list[bool]:
        if not changes:
            return []
        return await self._batch(batches.apply, changes)

    async def record_deliveries(self, receipts: Sequence[tuple[str, str, str]]) -> list[str | None]:
        if not receipts:
            return []
        return await self._batch(batches.deliveries, receipts)

    async def reply_origins(self, refs: Sequence[str]) -> dict[str, str]:
        if not refs:
            return {}
        return await self._reading(_reply_origins, list(refs))

    async def touch(self, message_ids: Sequence[str]) -> None:
        if message_ids:
            await self._writing(_touch, list(message_ids), time.time())

    async def reassign(self, owners: Mapping[str, int]) -> None:
        if owners:
            await self._writing(_reassign, list(owners.items()))

    async def get(self, message_id: str) -> MessageRecord | None:
        return await self._reading(_get, message_id)

    async def timeline(self, message_id: str) -> list[Event]:
        found = await self.history(message_id)
        return [] if found is None else found[1]

    async def history(self, message_id: str) -> tuple[MessageRecord, list[Event]] | None:
        return await self._reading(_history, message_id, snapshot=True)

    async def find(self, where: MessageFilter) -> list[MessageRecord]:
        return await self._reading(_find, where)

    async def unfinished(
        self, limit: int, *, after: str = "", older_than: float | None = None, owner: int | None = None
    ) -> list[MessageRecord]:
        return await self._reading(_unfinished, limit, after, older_than, owner)

    async def counts_by_state(self) -> dict[str, int]:
        return await self._reading(_counts_by_state)

    # ------------------------------------------------------------------ clients

    async def put_client(self, client: ClientRecord) -> None:
        await self._writing(write_client, client.id, client_document(client, self.sealer), client.updated_at)

    async def get_client(self, client_id: str) -> ClientRecord | None:
        doc = await self._reading(_get_client, client_id)
        return None if doc is None else client_from_document(doc, self.sealer)

    async def list_clients(self) -> list[ClientRecord]:
        docs = await self._reading(_list_clients)
        return [client_from_document(doc, self.sealer) for doc in docs]

    async def delete_client(self, client_id: str) -> bool:
        return await self._writing(_delete_client, client_id, time.time())

    async def clients_version(self) -> float:
        return await self._reading(_clients_version)

    # ------------------------------------------------------------------ the client portal

    def portal(self) -> PortalStore:
        """The client portal's rows and client-scoped reads, run by this journal (storage/portal_store.py)."""
        return SqlPortalStore(self._writing, self._reading, self.sealer)

    # ------------------------------------------------------------------ settings

    async def get_setting(self, key: str) -> str | None:
        return await self._reading(_get_setting, key)

    async def set_setting_if_absent(self, key: str, value: str) -> str:
        return await self._writing(_set_setting_if_absent, key, value)

    # ------------------------------------------------------------------ stats

    async def write_stats(
        self, rows: Sequence[StatsRow], forget_before: Mapping[int, int] | None = None
    ) -> None:
        values = [(r.span, r.at, r.node, r.client, r.kind, r.count) for r in rows]
        await self._writing(_write_stats, values, dict(forget_before or {}))

    async def read_stats(
        self,
        span: int,
        since: int,
        until: int,
        *,
        node: str | None = None,
        exclude_node: str | None = None,
        by_time: bool = False,
    ) -> list[StatsRow]:
        return await self._reading(_read_stats, span, since, until, node, exclude_node, by_time)

    # ------------------------------------------------------------------ retention

    async def finished_page(
        self,
        received_since: float,
        received_before: float,
        *,
        after: tuple[float, str] | None = None,
        limit: int = 1000,
    ) -> list[FinishedMessage]:
        return await self._reading(
            _finished_page, received_since, received_before, after, limit, snapshot=True
        )

    async def delete_finished(
        self, received_before: float, *, received_since: float = 0.0, limit: int = 1000
    ) -> int:
        return await self._writing(_delete_finished, received_since, received_before, limit)

    async def delete_finished_ids(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        return await self._writing(_delete_finished_ids, list(message_ids))

    async def seen_whatsapp(self, message_ids: Sequence[str]) -> set[str]:
        """Those of ``message_ids`` that retention deleted within the replay window (``whatsapp_seen``)."""
        if not message_ids:
            return set()
        return await self._reading(_seen_whatsapp, list(message_ids))

    async def forget_seen_whatsapp(self, received_before: float) -> int:
        """Forget the deleted WhatsApp messages received before ``received_before``; how many."""
        return await self._writing(_forget_seen_whatsapp, received_before)

    async def reclaim_space(self, max_pages: int) -> int:
        if self.dialect.reclaim_page is None or max_pages <= 0:
            return 0
        return await self._writing(_reclaim, max_pages)

    @contextlib.asynccontextmanager
    async def sweeping(self) -> AsyncIterator[bool]:
        yield True


# ------------------------------------------------------------------------------------------ messages


def _touch(d: Dialect, ids: list[str], now: float) -> Program[None]:
    yield d.keyed(
        f"UPDATE message_states SET updated_at = ? WHERE {UNFINISHED_SQL} AND id {{keys}}", ids, now
    )


def _reassign(d: Dialect, owners: list[tuple[str, int]]) -> Program[None]:
    yield d.many(
        "UPDATE message_states AS s SET owner = v.column2 FROM {table} "
        f"WHERE s.id = v.column1 AND s.{UNFINISHED_SQL}",
        ("text", "integer"),
        owners,
    )


def _get(d: Dialect, message_id: str) -> Program[MessageRecord | None]:
    rows = yield [(d.sql(f"{_SELECT} WHERE m.id = ?"), [message_id])]
    return record_from_row(rows[0]) if rows else None


def _history(d: Dialect, message_id: str) -> Program[tuple[MessageRecord, list[Event]] | None]:
    record = yield from _get(d, message_id)
    if record is None:
        return None
    rows = yield [
        (d.sql("SELECT kind, at, data FROM events WHERE message_id = ? ORDER BY seq"), [message_id])
    ]
    events = [Event(EventKind(kind), at, orjson.loads(data)) for kind, at, data in rows]
    return record, [first_event(record), *events]


def _conditions(*terms: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """Of ``terms`` (a condition with one ``?``, its value), those whose value is not None."""
    kept = [(sql, value) for sql, value in terms if value is not None]
    return [sql for sql, _ in kept], [value for _, value in kept]


def _find(d: Dialect, where: MessageFilter) -> Program[list[MessageRecord]]:
    clauses, params = _conditions(
        ("m.shortcode = ?", where.shortcode),
        ("m.msisdn = ?", where.msisdn),
        ("s.state = ?", where.state.value if where.state else None),
        ("s.client_id = ?", where.client_id),
        ("m.received_at >= ?", where.since),
        ("m.received_at < ?", where.until),
    )
    if where.channel is not None:  # core.message.channel_of exactly (SQLite's LIKE would fold case)
        whatsapp = "substr(m.origin, 1, 9) = 'whatsapp:'"
        clauses.append(whatsapp if where.channel == "whatsapp" else f"NOT {whatsapp}")
    if where.before is not None:
        clauses.append("(m.received_at, m.id) < (?, ?)")  # one index range on both engines
        params += where.before
    sql = _SELECT + (" WHERE " + " AND ".join(clauses) if clauses else "")
    rows = yield [(d.sql(sql + " ORDER BY m.received_at DESC, m.id DESC LIMIT ?"), [*params, where.limit])]
    return [record_from_row(row) for row in rows]


def _unfinished(
    d: Dialect, limit: int, after: str, older_than: float | None, owner: int | None
) -> Program[list[MessageRecord]]:
    clauses, params = _conditions(
        ("s.id > ?", after), ("s.owner = ?", owner), ("s.updated_at < ?", older_than)
    )
    # UNFINISHED_SQL spelled as the partial index spells it, so that SQLite uses the index
    sql = f"{_SELECT} WHERE {UNFINISHED_SQL} AND " + " AND ".join(clauses) + " ORDER BY s.id LIMIT ?"
    rows = yield [(d.sql(sql), [*params, limit])]
    return [record_from_row(row) for row in rows]


def _counts_by_state(d: Dialect) -> Program[dict[str, int]]:
    rows = yield [("SELECT state, count(*) FROM message_states GROUP BY state", [])]
    return {state: int(n) for state, n in rows}


# ------------------------------------------------------------------------------------------ clients


def write_client(d: Dialect, client_id: str, doc: str, updated_at: float) -> Program[None]:
    """Insert or replace a client's document (sealed: ``client_documents``)."""
    yield [
        (
            d.sql(
                "INSERT INTO clients (id, doc, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at"
            ),
            [client_id, doc, updated_at],
        )
    ]


def _get_client(d: Dialect, client_id: str) -> Program[Any]:
    rows = yield [(d.sql("SELECT doc FROM clients WHERE id = ?"), [client_id])]
    return rows[0][0] if rows else None


def _list_clients(d: Dialect) -> Program[list[Any]]:
    rows = yield [("SELECT doc FROM clients ORDER BY id", [])]
    return [row[0] for row in rows]


def _delete_client(d: Dialect, client_id: str, now: float) -> Program[bool]:
    deleted = yield [(d.sql("DELETE FROM clients WHERE id = ? RETURNING id"), [client_id])]
    if not deleted:
        return False
    yield [(d.sql(_SET_SETTING), ["clients_deleted_at", repr(now)])]
    return True


def _clients_version(d: Dialect) -> Program[float]:
    ((updated, deleted),) = yield [
        (
            "SELECT (SELECT max(updated_at) FROM clients), "
            "(SELECT value FROM settings WHERE key = 'clients_deleted_at')",
            [],
        )
    ]
    return max(float(updated or 0.0), float(deleted or 0.0))


# ------------------------------------------------------------------------------------------ settings


def _get_setting(d: Dialect, key: str) -> Program[str | None]:
    rows = yield [(d.sql("SELECT value FROM settings WHERE key = ?"), [key])]
    return str(rows[0][0]) if rows else None


def _set_setting_if_absent(d: Dialect, key: str, value: str) -> Program[str]:
    # Two statements, not one: on PostgreSQL the SELECT must see a row another node committed while the
    # INSERT waited on it, which a single statement's snapshot would not.
    yield [
        (d.sql("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"), [key, value])
    ]
    rows = yield [(d.sql("SELECT value FROM settings WHERE key = ?"), [key])]
    return str(rows[0][0])


# ------------------------------------------------------------------------------------------ stats


def _write_stats(
    d: Dialect, values: list[tuple[int, int, str, str, str, int]], forget_before: dict[int, int]
) -> Program[None]:
    statements = d.many(
        f"INSERT INTO stats ({_STATS_KEY}, count) {{rows}} "
        f"ON CONFLICT ({_STATS_KEY}) DO UPDATE SET count = excluded.count",
        _STATS_TYPES,
        values,
    )
    statements += [
        (d.sql("DELETE FROM stats WHERE span = ? AND at < ?"), [span, before])
        for span, before in forget_before.items()
    ]
    if statements:
        yield statements


def _read_stats(
    d: Dialect, span: int, since: int, until: int, node: str | None, exclude_node: str | None, by_time: bool
) -> Program[list[StatsRow]]:
    # Summed over the interval, a row is dated at its start (``since``).
    clauses, params = _conditions(
        ("span = ?", span),
        ("at >= ?", since),
        ("at < ?", until),
        ("node = ?", node),
        ("node <> ?", exclude_node),
    )
    sql = "SELECT " + ("at" if by_time else "CAST(? AS bigint)") + ", client, kind, sum(count) FROM stats "
    sql += "WHERE " + " AND ".join(clauses)
    sql += " GROUP BY at, client, kind" if by_time else " GROUP BY client, kind"
    params = params if by_time else [since, *params]
    rows = yield [(d.sql(sql), params)]
    return [StatsRow(span, int(at), "", client, kind, int(n)) for at, client, kind, n in rows]


# ------------------------------------------------------------------------------------------ retention

#: A finished message: the state row is in none of the unfinished states (spelled as schema's).
_FINISHED: Final = f"NOT s.{UNFINISHED_SQL}"
#: The finished messages received in a range (two parameters), over :data:`MESSAGES_FROM`.
_OLD_FINISHED: Final = f"m.received_at >= ? AND m.received_at < ? AND {_FINISHED}"


def _finished_page(
    d: Dialect, since: float, before: float, after: tuple[float, str] | None, limit: int
) -> Program[list[FinishedMessage]]:
    key = d.bytewise("m.id")
    sql = f"{_SELECT} WHERE {_OLD_FINISHED}"
    params: list[Any] = [since, before]
    if after is not None:
        sql += f" AND (m.received_at, {key}) > (?, ?)"
        params += after
    rows = yield [(d.sql(f"{sql} ORDER BY m.received_at, {key} LIMIT ?"), [*params, limit])]
    records = [record_from_row(row) for row in rows]
    if not records:
        return []
    ids = [r.message.id for r in records]
    events: dict[str, list[Event]] = {}
    for mid, kind, at, data in (
        yield d.keyed(
            "SELECT message_id, kind, at, data FROM events WHERE message_id {keys} ORDER BY seq", ids
        )
    ):
        events.setdefault(mid, []).append(Event(EventKind(kind), at, orjson.loads(data)))
    refs: dict[str, list[str]] = {}
    for mid, ref in (yield d.keyed("SELECT message_id, ref FROM reply_refs WHERE message_id {keys}", ids)):
        refs.setdefault(mid, []).append(ref)
    return [
        FinishedMessage(
            r, (first_event(r), *events.get(r.message.id, ())), tuple(sorted(refs.get(r.message.id, ())))
        )
        for r in records
    ]


def _delete_finished(d: Dialect, since: float, before: float, limit: int) -> Program[int]:
    # The state row goes first, on a condition checked again as it is deleted (on PostgreSQL, against
    # the newest version of a row another transaction changed meanwhile): a message replayed since
    # the SELECT is unfinished again, and kept.
    gone = yield [
        (
            d.sql(
                f"DELETE FROM message_states WHERE id IN (SELECT m.id FROM {MESSAGES_FROM} "
                f"WHERE {_OLD_FINISHED} ORDER BY m.received_at LIMIT ?) AND NOT {UNFINISHED_SQL} RETURNING id"
            ),
            [since, before, limit],
        )
    ]
    return (yield from _delete_the_rest(d, [row[0] for row in gone]))


def _delete_finished_ids(d: Dialect, ids: list[str]) -> Program[int]:
    gone = yield d.keyed(
        f"DELETE FROM message_states WHERE id {{keys}} AND NOT {UNFINISHED_SQL} RETURNING id", ids
    )
    return (yield from _delete_the_rest(d, [row[0] for row in gone]))


def _delete_the_rest(d: Dialect, ids: list[str]) -> Program[int]:
    """Everything else kept under the ids of messages whose state rows were just deleted."""
    if ids:
        # A WhatsApp message is remembered by id for the webhook's replay window (migration 0012).
        statements = d.keyed(
            "INSERT INTO whatsapp_seen (id, received_at) SELECT id, received_at FROM messages "
            "WHERE id {keys} AND origin LIKE 'whatsapp:%' ON CONFLICT (id) DO NOTHING",
            ids,
        )
        statements += d.keyed("DELETE FROM events WHERE message_id {keys}", ids)
        statements += d.keyed("DELETE FROM reply_refs WHERE message_id {keys}", ids)
        statements += d.keyed("DELETE FROM messages WHERE id {keys}", ids)
        yield statements
    return len(ids)


def _reply_origins(d: Dialect, refs: list[str]) -> Program[dict[str, str]]:
    rows = yield d.keyed(
        "SELECT r.ref, m.origin FROM reply_refs AS r JOIN messages AS m ON m.id = r.message_id "
        "WHERE r.ref {keys}",
        refs,
    )
    return {ref: origin for ref, origin in rows}


def _seen_whatsapp(d: Dialect, ids: list[str]) -> Program[set[str]]:
    rows = yield d.keyed("SELECT id FROM whatsapp_seen WHERE id {keys}", ids)
    return {row[0] for row in rows}


def _forget_seen_whatsapp(d: Dialect, before: float) -> Program[int]:
    gone = yield [(d.sql("DELETE FROM whatsapp_seen WHERE received_at < ? RETURNING id"), [before])]
    return len(gone)


def _reclaim(d: Dialect, max_pages: int) -> Program[int]:
    ((free,),) = yield [("PRAGMA freelist_count", [])]
    pages = min(int(free), max_pages)
    if pages and d.reclaim_page is not None:
        yield [(d.reclaim_page, [])] * pages
    return pages
