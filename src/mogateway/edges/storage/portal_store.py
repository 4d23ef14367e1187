"""The client portal's rows in the journal, for both engines, as programs (``storage.dialect``).

Two kinds of query live here, kept apart:

* the portal's own rows (``portal_*`` tables, migration 0015): people, invites, sessions, failed
  sign-ins, recovery codes, the audit;
* a client's traffic, read for the portal: the programs are ``storage.client_traffic``'s (each takes
  the client's id first and filters by it); the methods here only run them.

What the rows mean is ``core.portal_accounts``'s and ``api.portal``'s to say; here is only their SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

import orjson

from mogateway.core.portal_accounts import AuditEntry, PortalUser
from mogateway.core.portal_store import ClientTraffic
from mogateway.core.ports import MessageFilter, MessageRecord
from mogateway.core.timeline import Event
from mogateway.edges.storage import client_traffic as one_client
from mogateway.edges.storage.dialect import Dialect, Program
from mogateway.edges.storage.sealing import Sealer

__all__ = ["SqlPortalStore"]

T = TypeVar("T")

Run = Callable[..., Coroutine[Any, Any, Any]]

_USER_COLUMNS: Final = (
    "id, client_id, email, role, password_hash, totp_secret, totp_step, created_at, disabled_at, "
    "device_generation"
)


class SqlPortalStore:
    """The portal's journal operations, run by a journal's writer and readers (``SqlJournal.portal``)."""

    def __init__(self, writing: Run, reading: Run, sealer: Sealer) -> None:
        self._writing = writing
        self._reading = reading
        self._sealer = sealer

    # ------------------------------------------------------------------ people

    def _user(self, row: Any) -> PortalUser:
        uid, client_id, email, role, password_hash, totp, step, created, disabled, generation = row
        return PortalUser(
            str(uid),
            str(client_id),
            str(email),
            str(role),
            float(created),
            str(password_hash),
            self._open_totp(str(uid), str(totp)),
            int(step),
            float(disabled),
            int(generation),
        )

    def _seal_totp(self, user_id: str, secret: str) -> str:
        sealed = self._sealer.seal(secret, f"portal/{user_id}/totp")
        return sealed if isinstance(sealed, str) else orjson.dumps(sealed).decode()

    def _open_totp(self, user_id: str, stored: str) -> str:
        value: object = orjson.loads(stored) if stored.startswith("{") else stored
        return self._sealer.open(value, f"portal/{user_id}/totp")

    async def invite(
        self, user: PortalUser, invite_key: str, expires_at: float
    ) -> tuple[PortalUser | None, str]:
        """Invite ``user`` (a person new to the portal, or one of the same client again: their role is
        updated and they are enabled; one who was disabled has no password until they accept the new
        invite); (the user as kept, "") or (None, why not)."""
        found = await self._writing(_invite, user, invite_key, expires_at)
        if isinstance(found, str):
            return None, found
        return self._user(found), ""

    async def invite_user(self, invite_key: str, now: float) -> PortalUser | None:
        """The person an invite is for, while it is unused and unexpired (nothing changes)."""
        row = await self._reading(_invite_user, invite_key, now)
        return None if row is None else self._user(row)

    async def accept_invite(self, invite_key: str, now: float, password_hash: str) -> PortalUser | None:
        """Use the invite (once): the person's password becomes ``password_hash``, their TOTP, recovery
        codes and sessions are forgotten. None when the invite is unknown, used or expired."""
        row = await self._writing(_accept_invite, invite_key, now, password_hash)
        return None if row is None else self._user(row)

    async def user(self, user_id: str) -> PortalUser | None:
        row = await self._reading(_one_user, "id", user_id)
        return None if row is None else self._user(row)

    async def user_by_email(self, email: str) -> PortalUser | None:
        row = await self._reading(_one_user, "email", email)
        return None if row is None else self._user(row)

    async def users_of(self, client_id: str) -> list[PortalUser]:
        rows = await self._reading(_users_of, client_id)
        return [self._user(row) for row in rows]

    async def set_totp(self, user_id: str, secret: str, step: int, recovery_hashes: list[str]) -> None:
        """Turn TOTP on (``secret``: base32) with ``step`` accepted already and new recovery codes."""
        await self._writing(_set_totp, user_id, self._seal_totp(user_id, secret), step, recovery_hashes)

    async def clear_totp(self, user_id: str) -> None:
        await self._writing(_set_totp, user_id, "", 0, [])

    async def accept_totp_step(self, user_id: str, step: int) -> bool:
        """Record ``step`` as used, unless a later or equal one was (another worker, a replay)."""
        return bool(await self._writing(_accept_step, user_id, step))

    async def use_recovery_code(self, user_id: str, code_hash: str) -> bool:
        return bool(await self._writing(_use_recovery, user_id, code_hash))

    async def recovery_codes_left(self, user_id: str) -> int:
        return int(await self._reading(_recovery_left, user_id))

    async def disable_user(self, client_id: str, user_id: str, now: float) -> bool:
        """Disable one person of ``client_id`` and end their sessions (False: no such person there)."""
        return bool(await self._writing(_disable, client_id, user_id, now))

    async def disable_client(self, client_id: str, now: float) -> int:
        """Disable every person of ``client_id`` and end their sessions; how many were enabled."""
        return int(await self._writing(_disable, client_id, None, now))

    # ------------------------------------------------------------------ sessions and throttle

    async def add_session(
        self, key: str, user_id: str, client_id: str, expires_at: float, now: float, keep: int
    ) -> None:
        await self._writing(_add_session, key, user_id, client_id, expires_at, now, keep)

    async def session(self, key: str, now: float) -> tuple[str, str, float, str] | None:
        """(user id, client id, expires_at, flashes) of a live session of an enabled person."""
        found: tuple[str, str, float, str] | None = await self._reading(_session, key, now)
        return found

    async def set_flashes(self, key: str, flashes: str) -> None:
        await self._writing(_set_flashes, key, flashes)

    async def end_session(self, key: str) -> None:
        await self._writing(_end_sessions, "id_hash", key)

    async def end_user_sessions(self, user_id: str) -> int:
        """End every session of the person, and their device cookies (a new device generation)."""
        return int(await self._writing(_end_user_sessions, user_id))

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]:
        found: tuple[int, float | None] = await self._reading(_failures, address, since)
        return found

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None:
        await self._writing(_add_failure, address, at, forget_before, keep)

    # ------------------------------------------------------------------ audit

    async def add_audit(self, entry_id: str, entry: AuditEntry) -> None:
        await self._writing(_add_audit, entry_id, entry)

    async def audit(self, client_id: str, limit: int) -> list[AuditEntry]:
        rows = await self._reading(_audit, client_id, limit)
        return [AuditEntry(float(at), str(c), str(actor), str(a), str(d)) for at, c, actor, a, d in rows]

    # ------------------------------------------------------------------ one client's traffic

    async def client_find(self, client_id: str, where: MessageFilter) -> list[MessageRecord]:
        """Messages of ``client_id`` only, newest first (``where.client_id`` is replaced by it)."""
        found: list[MessageRecord] = await self._reading(one_client.client_find, client_id, where)
        return found

    async def client_history(
        self, client_id: str, message_id: str
    ) -> tuple[MessageRecord, list[Event]] | None:
        """A message and its timeline, only when it was routed to ``client_id``."""
        found: tuple[MessageRecord, list[Event]] | None = await self._reading(
            one_client.client_history, client_id, message_id, snapshot=True
        )
        return found

    async def client_traffic(
        self, client_id: str, since: float, recent_since: float, until: float
    ) -> ClientTraffic:
        """``client_id``'s messages and per-minute figures in [since, until) and in [recent_since,
        until), both counted from one snapshot of the journal (``core.portal_store.ClientTraffic``)."""
        found: ClientTraffic = await self._reading(
            one_client.client_traffic, client_id, since, max(since, recent_since), until, snapshot=True
        )
        return found

    async def client_page(
        self, client_id: str, since: float, until: float, after: tuple[float, str] | None, limit: int
    ) -> list[MessageRecord]:
        """One page of ``client_id``'s messages received in [since, until), oldest first, after
        ``after`` (received_at, id): what an export reads, a page at a time."""
        found: list[MessageRecord] = await self._reading(
            one_client.client_page, client_id, since, until, after, limit
        )
        return found

    async def client_count(self, client_id: str, since: float, until: float) -> int:
        return int(await self._reading(one_client.client_count, client_id, since, until))


# ------------------------------------------------------------------------------------------ people


def _invite(d: Dialect, user: PortalUser, key: str, expires_at: float) -> Program[Any]:
    rows = yield [(d.sql(f"SELECT {_USER_COLUMNS} FROM portal_users WHERE email = ?"), [user.email])]
    if rows:
        if str(rows[0][1]) != user.client_id:
            return f"{user.email} is a portal user of another client already"
        user_id = str(rows[0][0])
        # A person disabled and invited again signs in only once they accept the new invite: their old
        # password (maybe why they were disabled) is forgotten, and an unset one matches nothing.
        yield [
            (
                d.sql(
                    "UPDATE portal_users SET role = ?, password_hash = CASE WHEN disabled_at > 0 THEN '' "
                    "ELSE password_hash END, disabled_at = 0 WHERE id = ?"
                ),
                [user.role, user_id],
            )
        ]
    else:
        user_id = user.id
        yield [
            (
                d.sql(
                    "INSERT INTO portal_users (id, client_id, email, role, created_at) VALUES (?, ?, ?, ?, ?)"
                ),
                [user.id, user.client_id, user.email, user.role, user.created_at],
            )
        ]
    yield [
        # Expired and used invites go, and so does an open one of this person: the newest link only.
        (
            d.sql("DELETE FROM portal_invites WHERE expires_at <= ? OR used_at > 0 OR user_id = ?"),
            [user.created_at, user_id],
        ),
        (
            d.sql("INSERT INTO portal_invites (id_hash, client_id, user_id, expires_at) VALUES (?, ?, ?, ?)"),
            [key, user.client_id, user_id, expires_at],
        ),
    ]
    found = yield [(d.sql(f"SELECT {_USER_COLUMNS} FROM portal_users WHERE id = ?"), [user_id])]
    return found[0]


def _invite_user(d: Dialect, key: str, now: float) -> Program[Any]:
    rows = yield [
        (
            d.sql(
                f"SELECT {', '.join('u.' + c.strip() for c in _USER_COLUMNS.split(','))} "
                "FROM portal_invites AS i "
                "JOIN portal_users AS u ON u.id = i.user_id AND u.client_id = i.client_id "
                "WHERE i.id_hash = ? AND i.used_at = 0 AND i.expires_at > ?"
            ),
            [key, now],
        )
    ]
    return rows[0] if rows else None


def _accept_invite(d: Dialect, key: str, now: float, password_hash: str) -> Program[Any]:
    used = yield [
        (
            d.sql(
                "UPDATE portal_invites SET used_at = ? WHERE id_hash = ? AND used_at = 0 AND expires_at > ? "
                "RETURNING user_id"
            ),
            [now, key, now],
        )
    ]
    if not used:
        return None
    user_id = str(used[0][0])
    yield [
        (
            d.sql(
                "UPDATE portal_users SET password_hash = ?, totp_secret = '', totp_step = 0, "
                "device_generation = device_generation + 1 WHERE id = ? AND disabled_at = 0"
            ),
            [password_hash, user_id],
        ),
        (d.sql("DELETE FROM portal_recovery_codes WHERE user_id = ?"), [user_id]),
        (d.sql("DELETE FROM portal_sessions WHERE user_id = ?"), [user_id]),
    ]
    rows = yield [
        (d.sql(f"SELECT {_USER_COLUMNS} FROM portal_users WHERE id = ? AND disabled_at = 0"), [user_id])
    ]
    return rows[0] if rows else None


def _one_user(d: Dialect, column: str, value: str) -> Program[Any]:
    assert column in ("id", "email")
    rows = yield [(d.sql(f"SELECT {_USER_COLUMNS} FROM portal_users WHERE {column} = ?"), [value])]
    return rows[0] if rows else None


def _users_of(d: Dialect, client_id: str) -> Program[list[Any]]:
    rows = yield [
        (d.sql(f"SELECT {_USER_COLUMNS} FROM portal_users WHERE client_id = ? ORDER BY email"), [client_id])
    ]
    return list(rows)


def _set_totp(d: Dialect, user_id: str, sealed: str, step: int, hashes: list[str]) -> Program[None]:
    statements: list[Any] = [
        (
            d.sql("UPDATE portal_users SET totp_secret = ?, totp_step = ? WHERE id = ?"),
            [sealed, step, user_id],
        ),
        (d.sql("DELETE FROM portal_recovery_codes WHERE user_id = ?"), [user_id]),
    ]
    statements += [
        (d.sql("INSERT INTO portal_recovery_codes (user_id, code_hash) VALUES (?, ?)"), [user_id, h])
        for h in hashes
    ]
    yield statements


def _accept_step(d: Dialect, user_id: str, step: int) -> Program[bool]:
    rows = yield [
        (
            d.sql("UPDATE portal_users SET totp_step = ? WHERE id = ? AND totp_step < ? RETURNING id"),
            [step, user_id, step],
        )
    ]
    return bool(rows)


def _use_recovery(d: Dialect, user_id: str, code_hash: str) -> Program[bool]:
    rows = yield [
        (
            d.sql("DELETE FROM portal_recovery_codes WHERE user_id = ? AND code_hash = ? RETURNING user_id"),
            [user_id, code_hash],
        )
    ]
    return bool(rows)


def _recovery_left(d: Dialect, user_id: str) -> Program[int]:
    rows = yield [(d.sql("SELECT count(*) FROM portal_recovery_codes WHERE user_id = ?"), [user_id])]
    return int(rows[0][0])


def _disable(d: Dialect, client_id: str, user_id: str | None, now: float) -> Program[int]:
    if user_id is None:
        gone = yield [
            (
                d.sql(
                    "UPDATE portal_users SET disabled_at = ?, device_generation = device_generation + 1 "
                    "WHERE client_id = ? AND disabled_at = 0 RETURNING id"
                ),
                [now, client_id],
            ),
            (d.sql("DELETE FROM portal_sessions WHERE client_id = ?"), [client_id]),
        ]
        return len(gone)
    found = yield [
        (
            d.sql(
                "UPDATE portal_users SET disabled_at = ?, device_generation = device_generation + 1 "
                "WHERE id = ? AND client_id = ? RETURNING id"
            ),
            [now, user_id, client_id],
        )
    ]
    if found:
        yield [
            (d.sql("DELETE FROM portal_sessions WHERE user_id = ? AND client_id = ?"), [user_id, client_id])
        ]
    return len(found)


# ------------------------------------------------------------------------------------------ sessions


def _add_session(
    d: Dialect, key: str, user_id: str, client_id: str, expires_at: float, now: float, keep: int
) -> Program[None]:
    offset = "OFFSET ?" if d.arrays else "LIMIT -1 OFFSET ?"
    yield [
        (d.sql("DELETE FROM portal_sessions WHERE expires_at <= ?"), [now]),
        (
            d.sql(
                "INSERT INTO portal_sessions (id_hash, user_id, client_id, expires_at) VALUES (?, ?, ?, ?)"
            ),
            [key, user_id, client_id, expires_at],
        ),
        (
            d.sql(
                "DELETE FROM portal_sessions WHERE id_hash IN "
                f"(SELECT id_hash FROM portal_sessions ORDER BY expires_at DESC {offset})"
            ),
            [keep],
        ),
    ]


def _session(d: Dialect, key: str, now: float) -> Program[tuple[str, str, float, str] | None]:
    rows = yield [
        (
            d.sql(
                "SELECT s.user_id, s.client_id, s.expires_at, s.flashes FROM portal_sessions AS s "
                "JOIN portal_users AS u ON u.id = s.user_id AND u.client_id = s.client_id "
                "WHERE s.id_hash = ? AND s.expires_at > ? AND u.disabled_at = 0 AND u.password_hash <> ''"
            ),
            [key, now],
        )
    ]
    if not rows:
        return None
    user_id, client_id, expires_at, flashes = rows[0]
    return str(user_id), str(client_id), float(expires_at), str(flashes)


def _set_flashes(d: Dialect, key: str, flashes: str) -> Program[None]:
    yield [(d.sql("UPDATE portal_sessions SET flashes = ? WHERE id_hash = ?"), [flashes, key])]


def _end_sessions(d: Dialect, column: str, value: str) -> Program[int]:
    assert column == "id_hash"
    gone = yield [(d.sql(f"DELETE FROM portal_sessions WHERE {column} = ? RETURNING id_hash"), [value])]
    return len(gone)


def _end_user_sessions(d: Dialect, user_id: str) -> Program[int]:
    gone = yield [
        (
            d.sql("UPDATE portal_users SET device_generation = device_generation + 1 WHERE id = ?"),
            [user_id],
        ),
        (d.sql("DELETE FROM portal_sessions WHERE user_id = ? RETURNING id_hash"), [user_id]),
    ]
    return len(gone)


def _failures(d: Dialect, address: str, since: float) -> Program[tuple[int, float | None]]:
    rows = yield [
        (
            d.sql(
                "SELECT coalesce(sum(failures), 0), min(at) FROM portal_signin_failures "
                "WHERE address = ? AND at > ?"
            ),
            [address, since],
        )
    ]
    count, oldest = rows[0]
    return int(count), None if oldest is None else float(oldest)


def _add_failure(d: Dialect, address: str, at: float, forget_before: float, keep: int) -> Program[None]:
    offset = "OFFSET ?" if d.arrays else "LIMIT -1 OFFSET ?"
    yield [
        (d.sql("DELETE FROM portal_signin_failures WHERE at <= ?"), [forget_before]),
        (
            d.sql(
                "INSERT INTO portal_signin_failures (address, at, failures) VALUES (?, ?, 1) "
                "ON CONFLICT (address, at) DO UPDATE SET failures = portal_signin_failures.failures + 1"
            ),
            [address, at],
        ),
        (
            d.sql(
                "DELETE FROM portal_signin_failures WHERE (address, at) IN "
                f"(SELECT address, at FROM portal_signin_failures ORDER BY at DESC {offset})"
            ),
            [keep],
        ),
    ]


# ------------------------------------------------------------------------------------------ audit


def _add_audit(d: Dialect, entry_id: str, e: AuditEntry) -> Program[None]:
    yield [
        (
            d.sql(
                "INSERT INTO portal_audit (id, client_id, at, actor, action, detail) "
                "VALUES (?, ?, ?, ?, ?, ?)"
            ),
            [entry_id, e.client_id, e.at, e.actor, e.action, e.detail],
        )
    ]


def _audit(d: Dialect, client_id: str, limit: int) -> Program[list[Any]]:
    rows = yield [
        (
            d.sql(
                "SELECT at, client_id, actor, action, detail FROM portal_audit WHERE client_id = ? "
                "ORDER BY at DESC, id DESC LIMIT ?"
            ),
            [client_id, limit],
        )
    ]
    return list(rows)
