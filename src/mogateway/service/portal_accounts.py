"""The portal's people, as use cases: invite, accept an invite (set a password), sign in with a password
and a second factor, turn TOTP on, disable (the rules are ``core.portal_accounts`` and ``core.totp``).

Passwords are hashed with argon2id (argon2-cffi's defaults, RFC 9106's second recommended choice: 64
MiB, 3 passes, 4 lanes), off the event loop: a hash takes tens of milliseconds of CPU. An unknown
e-mail address is checked against a dummy hash, so the time of a refusal does not say whether the
address exists.

argon2 and the dummy hash are made at the first use, not at import: the server imports this module at
start, and one hash holds its 64 MiB for a moment, which was every worker's peak RSS (docs/benchmarks.md
§7.2). Every check makes sure the dummy exists before it verifies, so that only the first check of a
process is slower, whether or not the address exists.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import time
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from mogateway.core import totp
from mogateway.core.portal_accounts import (
    AuditEntry,
    PortalUser,
    Role,
    invite_key,
    normalize_email,
    password_problem,
)
from mogateway.core.portal_store import PortalStore

if TYPE_CHECKING:
    from argon2 import PasswordHasher

__all__ = ["InviteRefused", "PortalAccounts", "RECOVERY_CODES"]

RECOVERY_CODES = 10


@cache
def _hasher() -> PasswordHasher:
    from argon2 import PasswordHasher

    return PasswordHasher()


@cache
def _dummy() -> str:
    """The hash an unknown address is checked against (made once, at the first check)."""
    return _hasher().hash(secrets.token_urlsafe(16))


class InviteRefused(ValueError):
    """An invite that cannot be made or used (the message says why); ``conflict``: the address is a
    portal user of another client."""

    def __init__(self, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


def _new_id(prefix: str) -> str:
    return prefix + base64.b32encode(os.urandom(10)).decode("ascii").lower()


def _hash(password: str) -> str:
    return _hasher().hash(password)


def _verify(stored: str, password: str) -> bool:
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    dummy = _dummy()
    try:
        return _hasher().verify(stored or dummy, password) and bool(stored)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


class PortalAccounts:
    """The portal's people over the journal (:class:`~mogateway.core.ports.PortalStore`)."""

    def __init__(self, store: PortalStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock

    async def invite(
        self, client_id: str, email: str, role: str, hours: float, actor: str
    ) -> tuple[PortalUser, str]:
        """Invite a person to ``client_id``'s portal: (the user, the invite token, shown once)."""
        try:
            address = normalize_email(email)
            kind = Role(role)
        except ValueError as exc:
            raise InviteRefused(
                str(exc) if "e-mail" in str(exc) else "role must be viewer or admin"
            ) from None
        now = self._clock()
        token = secrets.token_urlsafe(32)
        user, why = await self.store.invite(
            PortalUser(_new_id("pu_"), client_id, address, kind.value, now),
            invite_key(token),
            now + hours * 3600,
        )
        if user is None:
            raise InviteRefused(why, conflict=True)
        await self.audit(client_id, actor, "invite", f"{address} as {kind.value}")
        return user, token

    async def invite_user(self, token: str) -> PortalUser | None:
        return await self.store.invite_user(invite_key(token), self._clock())

    async def accept(self, token: str, password: str) -> PortalUser:
        """Use an invite: the person's password is set; InviteRefused when it cannot be."""
        why = password_problem(password)
        if why is not None:
            raise InviteRefused(why)
        hashed = await asyncio.to_thread(_hash, password)
        user = await self.store.accept_invite(invite_key(token), self._clock(), hashed)
        if user is None:
            raise InviteRefused("this invite link is used, expired or unknown: ask for a new one")
        await self.audit(user.client_id, f"portal:{user.email}", "password set", "")
        return user

    async def check_password(self, email: str, password: str) -> PortalUser | None:
        """The enabled person with this address and password, or None (same work either way)."""
        try:
            address = normalize_email(email)
        except ValueError:
            address = ""
        user = await self.store.user_by_email(address) if address else None
        stored = user.password_hash if user is not None and user.active else ""
        ok = await asyncio.to_thread(_verify, stored, password[:512])
        return user if ok else None

    async def second_factor(self, user: PortalUser, code: str) -> bool:
        """Whether ``code`` is the person's TOTP code of the moment (not used before) or one of their
        recovery codes (used up by this)."""
        if not user.totp_on:
            return True
        step = totp.matching_step(totp.from_base32(user.totp_secret), code, self._clock(), user.totp_step)
        if step is not None:
            return await self.store.accept_totp_step(user.id, step)
        if len(code.strip()) >= 10:
            return await self.store.use_recovery_code(user.id, totp.recovery_hash(code))
        return False

    @staticmethod
    def new_totp_secret() -> str:
        return totp.to_base32(os.urandom(totp.SECRET_BYTES))

    async def turn_totp_on(self, user: PortalUser, secret: str, code: str) -> list[str] | None:
        """Turn TOTP on with ``secret`` once ``code`` proves the app has it: the recovery codes (shown
        once), or None when the code is wrong."""
        try:
            raw = totp.from_base32(secret)
        except ValueError:
            return None
        step = totp.matching_step(raw, code, self._clock(), 0)
        if step is None or len(raw) != totp.SECRET_BYTES:
            return None
        codes = [totp.recovery_code(os.urandom(10)) for _ in range(RECOVERY_CODES)]
        await self.store.set_totp(user.id, secret, step, [totp.recovery_hash(c) for c in codes])
        await self.audit(user.client_id, f"portal:{user.email}", "two-factor on", "")
        return codes

    async def turn_totp_off(self, user: PortalUser) -> None:
        await self.store.clear_totp(user.id)
        await self.audit(user.client_id, f"portal:{user.email}", "two-factor off", "")

    async def disable(self, client_id: str, user_id: str | None, actor: str) -> int:
        """Disable one person of ``client_id`` (or, with None, all of them); their sessions end."""
        now = self._clock()
        if user_id is None:
            count = await self.store.disable_client(client_id, now)
            await self.audit(client_id, actor, "disable all", f"{count} people")
            return count
        user = await self.store.user(user_id)
        done = await self.store.disable_user(client_id, user_id, now)
        if done and user is not None:
            await self.audit(client_id, actor, "disable", user.email)
        return int(done)

    async def audit(self, client_id: str, actor: str, action: str, detail: str) -> None:
        await self.store.add_audit(
            _new_id("au_"), AuditEntry(self._clock(), client_id, actor, action, detail)
        )
