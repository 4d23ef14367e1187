"""The journal port of the client portal: its people, sessions and audit, and one client's traffic as
the portal reads it (``edges.storage.portal_store`` implements it for both engines; ``core.ports.Journal``
gives it with ``portal()``)."""

from __future__ import annotations

from typing import Protocol

from mogateway.core.immutable import immutable
from mogateway.core.portal_accounts import AuditEntry, PortalUser
from mogateway.core.ports import MessageFilter, MessageRecord
from mogateway.core.timeline import Event

__all__ = ["ClientTraffic", "PortalStore"]


@immutable
class ClientTraffic:
    """One client's traffic in two nested windows, read at one moment: [since, until) and the recent
    part of it, [recent_since, until) (the Overview's "today" and "last hour").

    Both windows come from one snapshot of the journal, so every recent count is at most its whole
    one: read at two moments, a message arriving in between was in the last hour but not in today."""

    #: (shortcode or WhatsApp number, channel, state, count in the window, count in the recent part)
    states: list[tuple[str, str, str, int, int]]
    #: per-minute figure kind (outcomes, latency bins) -> (count in the window, in the recent part)
    figures: dict[str, tuple[int, int]]


class PortalStore(Protocol):
    """The client portal's rows and one client's traffic as the portal reads it, in the journal
    (``edges.storage.portal_store``). Every read of messages or figures takes the client's id first and
    filters by it in SQL; ``service.client_scope.ClientScope`` is its only user for those."""

    async def invite(
        self, user: PortalUser, invite_key: str, expires_at: float
    ) -> tuple[PortalUser | None, str]:
        """Invite ``user`` (a person new to the portal, or one of the same client again: their role is
        updated and they are enabled); (the user as kept, "") or (None, why not)."""
        ...

    async def invite_user(self, invite_key: str, now: float) -> PortalUser | None:
        """The person an invite is for, while it is unused and unexpired (nothing changes)."""
        ...

    async def accept_invite(self, invite_key: str, now: float, password_hash: str) -> PortalUser | None:
        """Use the invite (once): the person's password becomes ``password_hash``, their TOTP, recovery
        codes, sessions and device cookies (a new device generation) are forgotten. None when the invite
        is unknown, used or expired."""
        ...

    async def user(self, user_id: str) -> PortalUser | None: ...

    async def user_by_email(self, email: str) -> PortalUser | None: ...

    async def users_of(self, client_id: str) -> list[PortalUser]: ...

    async def set_totp(self, user_id: str, secret: str, step: int, recovery_hashes: list[str]) -> None:
        """Turn TOTP on (``secret``: base32) with ``step`` accepted already and new recovery codes."""
        ...

    async def clear_totp(self, user_id: str) -> None: ...

    async def accept_totp_step(self, user_id: str, step: int) -> bool:
        """Record ``step`` as used, unless a later or equal one was (another worker, a replay)."""
        ...

    async def use_recovery_code(self, user_id: str, code_hash: str) -> bool: ...

    async def recovery_codes_left(self, user_id: str) -> int: ...

    async def disable_user(self, client_id: str, user_id: str, now: float) -> bool:
        """Disable one person of ``client_id`` and end their sessions and device cookies (a new device
        generation); False: no such person there."""
        ...

    async def disable_client(self, client_id: str, now: float) -> int:
        """Disable every person of ``client_id`` and end their sessions and device cookies; how many
        were enabled."""
        ...

    async def add_session(
        self, key: str, user_id: str, client_id: str, expires_at: float, now: float, keep: int
    ) -> None: ...

    async def session(self, key: str, now: float) -> tuple[str, str, float, str] | None:
        """(user id, client id, expires_at, flashes) of a live session of an enabled person."""
        ...

    async def set_flashes(self, key: str, flashes: str) -> None: ...

    async def end_session(self, key: str) -> None: ...

    async def end_user_sessions(self, user_id: str) -> int:
        """End every session of the person, and their device cookies (a new device generation); how
        many sessions there were."""
        ...

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]: ...

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None: ...

    async def add_audit(self, entry_id: str, entry: AuditEntry) -> None: ...

    async def audit(self, client_id: str, limit: int) -> list[AuditEntry]: ...

    async def client_find(self, client_id: str, where: MessageFilter) -> list[MessageRecord]:
        """Messages of ``client_id`` only, newest first (``where.client_id`` is replaced by it)."""
        ...

    async def client_history(
        self, client_id: str, message_id: str
    ) -> tuple[MessageRecord, list[Event]] | None:
        """A message and its timeline, only when it was routed to ``client_id``."""
        ...

    async def client_traffic(
        self, client_id: str, since: float, recent_since: float, until: float
    ) -> ClientTraffic:
        """``client_id``'s messages (received in the window) and per-minute figures in [since, until)
        and in [max(since, recent_since), until), from one snapshot of the journal."""
        ...

    async def client_page(
        self, client_id: str, since: float, until: float, after: tuple[float, str] | None, limit: int
    ) -> list[MessageRecord]:
        """One page of ``client_id``'s messages received in [since, until), oldest first, after
        ``after`` (received_at, id): what an export reads, a page at a time."""
        ...

    async def client_count(self, client_id: str, since: float, until: float) -> int: ...
