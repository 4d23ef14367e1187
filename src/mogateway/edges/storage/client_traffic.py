"""A client's traffic, read for the client portal, for both engines, as programs (``storage.dialect``).

Every program here takes the client's id as its first argument and puts ``client_id = ?`` (or
``client = ?``) in its SQL: there is no portal read of messages or figures without it.
``service.client_scope.ClientScope`` is the only caller (through ``storage.portal_store``), and it
passes its one client's id every time. The portal's own rows (people, sessions...) are
``storage.portal_store``'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import orjson

from mogateway.core.portal_store import ClientTraffic
from mogateway.core.ports import MessageFilter, MessageRecord
from mogateway.core.timeline import Event, EventKind
from mogateway.edges.storage.dialect import Dialect, Program
from mogateway.edges.storage.schema import MESSAGE_COLUMNS, MESSAGES_FROM, first_event, record_from_row

__all__ = ["client_count", "client_find", "client_history", "client_page", "client_traffic"]

_SELECT_MESSAGES: Final = f"SELECT {MESSAGE_COLUMNS} FROM {MESSAGES_FROM}"
_WHATSAPP: Final = "substr(m.origin, 1, 9) = 'whatsapp:'"


def client_find(d: Dialect, client_id: str, where: MessageFilter) -> Program[list[MessageRecord]]:
    where = replace(where, client_id=client_id)
    clauses = ["s.client_id = ?"]
    params: list[Any] = [client_id]
    for sql, value in (
        ("m.shortcode = ?", where.shortcode),
        ("m.msisdn = ?", where.msisdn),
        ("s.state = ?", where.state.value if where.state else None),
        ("m.received_at >= ?", where.since),
        ("m.received_at < ?", where.until),
    ):
        if value is not None:
            clauses.append(sql)
            params.append(value)
    if where.channel is not None:
        clauses.append(_WHATSAPP if where.channel == "whatsapp" else f"NOT {_WHATSAPP}")
    if where.before is not None:
        # Spelled so that the index range ends at the cursor (a row value does not narrow it on
        # SQLite): a page deep in the past costs what the first one does.
        clauses.append("m.received_at <= ? AND (m.received_at < ? OR m.id < ?)")
        params += [where.before[0], *where.before]
    sql = f"{_SELECT_MESSAGES} WHERE {' AND '.join(clauses)} ORDER BY m.received_at DESC, m.id DESC LIMIT ?"
    rows = yield [(d.sql(sql), [*params, where.limit])]
    return [record_from_row(row) for row in rows]


def client_history(
    d: Dialect, client_id: str, message_id: str
) -> Program[tuple[MessageRecord, list[Event]] | None]:
    rows = yield [(d.sql(f"{_SELECT_MESSAGES} WHERE m.id = ? AND s.client_id = ?"), [message_id, client_id])]
    if not rows:
        return None
    record = record_from_row(rows[0])
    found = yield [
        (d.sql("SELECT kind, at, data FROM events WHERE message_id = ? ORDER BY seq"), [message_id])
    ]
    events = [Event(EventKind(kind), at, orjson.loads(data)) for kind, at, data in found]
    return record, [first_event(record), *events]


def client_traffic(
    d: Dialect, client_id: str, since: float, recent_since: float, until: float
) -> Program[ClientTraffic]:
    # Each window is counted in the same statement, and both statements run in one snapshot (the
    # caller's ``snapshot=True``): a message or a figure written meanwhile is in both windows or in
    # neither, so the recent window never counts more than the whole one.
    rows = yield [
        (
            d.sql(
                f"SELECT m.shortcode, CASE WHEN {_WHATSAPP} THEN 'whatsapp' ELSE 'sms' END, "
                "s.state, count(*), sum(CASE WHEN m.received_at >= ? THEN 1 ELSE 0 END) "
                f"FROM {MESSAGES_FROM} WHERE s.client_id = ? AND m.received_at >= ? AND m.received_at < ? "
                "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            ),
            [recent_since, client_id, since, until],
        )
    ]
    states = [(str(sc), str(ch), str(state), int(n), int(recent)) for sc, ch, state, n, recent in rows]
    # The per-minute figures: a minute counts in a window when it begins in it.
    rows = yield [
        (
            d.sql(
                "SELECT kind, sum(count), sum(CASE WHEN at >= ? THEN count ELSE 0 END) FROM stats "
                "WHERE span = 60 AND client = ? AND at >= ? AND at < ? GROUP BY kind"
            ),
            [int(recent_since // 60 * 60), client_id, int(since // 60 * 60), int(until)],
        )
    ]
    figures = {str(kind): (int(n), int(recent)) for kind, n, recent in rows}
    return ClientTraffic(states, figures)


def client_page(
    d: Dialect, client_id: str, since: float, until: float, after: tuple[float, str] | None, limit: int
) -> Program[list[MessageRecord]]:
    # The index range starts at the cursor (a row value would not narrow it on SQLite: every page would
    # scan from ``since`` again), so each page costs the same however far the export has come.
    sql = f"{_SELECT_MESSAGES} WHERE s.client_id = ? AND m.received_at >= ? AND m.received_at < ?"
    params: list[Any] = [client_id, since if after is None else max(since, after[0]), until]
    if after is not None:
        sql += " AND (m.received_at > ? OR m.id > ?)"
        params += after
    rows = yield [(d.sql(sql + " ORDER BY m.received_at, m.id LIMIT ?"), [*params, limit])]
    return [record_from_row(row) for row in rows]


def client_count(d: Dialect, client_id: str, since: float, until: float) -> Program[int]:
    rows = yield [
        (
            d.sql(
                f"SELECT count(*) FROM {MESSAGES_FROM} "
                "WHERE s.client_id = ? AND m.received_at >= ? AND m.received_at < ?"
            ),
            [client_id, since, until],
        )
    ]
    return int(rows[0][0])
