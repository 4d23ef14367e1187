"""Portal sessions, CSRF tokens and the sign-in throttle: the console's rules (``api.console.sessions``)
for the client portal's people, in tables of their own.

* A session is opened by signing in with an e-mail address, a password and (when it is on) a TOTP or
  recovery code. Its id is 256 random bits, in an HttpOnly, SameSite=Strict cookie scoped to
  ``/portal/`` (Secure over HTTPS); the journal keeps its SHA-256 only, with the person and the client
  it belongs to. Every worker and node reads the same rows.
* A session is live only while its person is enabled: disabling a person (or all of a client's) ends
  their sessions at once, everywhere. "Sign out everywhere" ends every session of the person.
* The CSRF token is an HMAC of the session id; flashes (a new token, shown once) are sealed under a key
  derived from the id, as the console's.
* Failed sign-ins are throttled over every worker and node per address (5 per 5 minutes) and per
  account, the e-mail address typed (10 per 5 minutes, from any addresses): an attacker who rotates
  addresses against one person is slowed as much as one who does not. An account's failures are
  counted whether or not the address belongs to anyone, so the throttle tells nothing about who has
  an account; the journal keeps a SHA-256 of the typed address, not the address. The price is that
  anyone can make one person wait up to 5 minutes, which is why the account's limit is the higher.
  Each throttle, when it starts refusing, says so in one log line of its own kind.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mogateway.api.console.sessions import session_key
from mogateway.core.portal_accounts import PortalUser, normalize_email
from mogateway.core.portal_store import PortalStore

__all__ = ["MAX_SESSIONS", "PortalSession", "PortalSessions", "PortalThrottle"]

MAX_SESSIONS = 10_000
_MAX_FAILURE_ROWS = 10_000
#: An account's failures share the address's table; an address never starts with this.
_ACCOUNT = "account:"

log = logging.getLogger("mogateway.portal")


def _derived(session_id: str, purpose: bytes) -> bytes:
    return hmac.new(session_id.encode("utf-8"), b"mogateway portal " + purpose, hashlib.sha256).digest()


@dataclass(slots=True)
class PortalSession:
    """One signed-in person's browser, as read for one request."""

    id: str
    user_id: str
    client_id: str
    expires_at: float
    flashes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return session_key(self.id)

    @property
    def csrf(self) -> str:
        return base64.urlsafe_b64encode(_derived(self.id, b"csrf")).decode("ascii").rstrip("=")


class PortalSessions:
    """The portal's sessions, in the journal (module docstring)."""

    def __init__(self, store: PortalStore, lifetime_s: float, clock: Callable[[], float] = time.time) -> None:
        self.lifetime_s = lifetime_s
        self._store = store
        self._clock = clock

    async def create(self, user: PortalUser) -> PortalSession:
        now = self._clock()
        session = PortalSession(secrets.token_urlsafe(32), user.id, user.client_id, now + self.lifetime_s)
        await self._store.add_session(
            session.key, user.id, user.client_id, session.expires_at, now, MAX_SESSIONS
        )
        return session

    async def get(self, session_id: str | None) -> PortalSession | None:
        if not session_id or len(session_id) > 100:
            return None
        found = await self._store.session(session_key(session_id), self._clock())
        if found is None:
            return None
        user_id, client_id, expires_at, sealed = found
        return PortalSession(session_id, user_id, client_id, expires_at, _open(session_id, sealed))

    async def end(self, session_id: str | None) -> None:
        if session_id:
            await self._store.end_session(session_key(session_id))

    async def end_everywhere(self, user_id: str) -> int:
        """Every session of the person ends, on every worker and node."""
        return await self._store.end_user_sessions(user_id)

    async def flash(self, session: PortalSession, kind: str, text: str, **extra: Any) -> None:
        session.flashes.append({"kind": kind, "text": text, **extra})
        await self._store.set_flashes(session.key, _seal(session.id, session.flashes))

    async def take_flashes(self, session: PortalSession) -> list[dict[str, Any]]:
        out, session.flashes = session.flashes, []
        if out:
            await self._store.set_flashes(session.key, "")
        return out


def _box(session_id: str) -> AESGCM:
    return AESGCM(_derived(session_id, b"flashes"))


def _seal(session_id: str, flashes: list[dict[str, Any]]) -> str:
    if not flashes:
        return ""
    nonce = os.urandom(12)
    sealed = _box(session_id).encrypt(nonce, orjson.dumps(flashes), session_key(session_id).encode())
    return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")


def _open(session_id: str, stored: str) -> list[dict[str, Any]]:
    if not stored:
        return []
    try:
        raw = base64.urlsafe_b64decode(stored)
        plain = _box(session_id).decrypt(raw[:12], raw[12:], session_key(session_id).encode())
    except (InvalidTag, ValueError):
        return []
    flashes: list[dict[str, Any]] = orjson.loads(plain)
    return flashes


def account_key(email: str) -> str:
    """The throttle's key of the account an e-mail address names (whether or not it exists)."""
    try:
        email = normalize_email(email)
    except ValueError:
        email = email.strip().lower()
    return _ACCOUNT + hashlib.sha256(email.encode("utf-8", "replace")).hexdigest()


class PortalThrottle:
    """At most ``per_address`` failed portal sign-ins per address, and ``per_account`` per account (the
    e-mail address typed), per ``window_s``, over every worker (module docstring)."""

    def __init__(
        self,
        store: PortalStore,
        per_address: int = 5,
        window_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        per_account: int = 10,
    ) -> None:
        self.per_address = per_address
        self.per_account = per_account
        self.window_s = window_s
        self._store = store
        self._clock = clock

    async def wait_s(self, address: str, email: str) -> float:
        """How long a sign-in from ``address`` as ``email`` must wait (0: it may try now)."""
        now = self._clock()
        by_address = await self._wait(address, self.per_address, now)
        by_account = await self._wait(account_key(email), self.per_account, now)
        return max(by_address, by_account)

    async def _wait(self, key: str, limit: int, now: float) -> float:
        count, oldest = await self._store.signin_failures(key, now - self.window_s)
        if count < limit or oldest is None:
            return 0.0
        return max(oldest + self.window_s - now, 0.001)

    async def failed(self, address: str, email: str) -> None:
        """Count a failed sign-in against both; log when one of them starts refusing."""
        now = self._clock()
        since = now - self.window_s
        account = account_key(email)
        for key in (address, account):
            await self._store.add_signin_failure(key, now, since, _MAX_FAILURE_ROWS)
        if (await self._store.signin_failures(address, since))[0] == self.per_address:
            log.warning(
                "portal sign-in throttled by address: %d failed sign-ins from %s within %d s; "
                "its sign-ins wait",
                self.per_address,
                address,
                self.window_s,
            )
        if (await self._store.signin_failures(account, since))[0] == self.per_account:
            log.warning(
                "portal sign-in throttled by account: %d failed sign-ins as %r within %d s, from any "
                "address; its sign-ins wait",
                self.per_account,
                email.strip()[:100],
                self.window_s,
            )
