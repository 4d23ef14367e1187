"""Portal sessions, CSRF tokens and the sign-in throttle: the console's rules (``api.browser.sessions``,
which both use, in the portal's scope: its cookies, paths and key label) for the client portal's
people, in tables of their own.

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
  an account; the journal keeps a SHA-256 of the typed address, not the address. So that anyone cannot
  make one person wait by failing as them, a browser that shows a live device cookie of that very
  person (``api.portal.devices``: set by an earlier successful sign-in) is not refused by the account's
  throttle: its own failures count against that cookie instead (5 per 5 minutes, then it is refused as
  any other browser), and against its address as always. Each throttle, when it starts refusing, says
  so in one log line of its own kind (never with a cookie).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from mogateway.api.browser.sessions import (
    PORTAL,
    BrowserSession,
    BrowserSessions,
    SignInThrottle,
    open_flashes,
)
from mogateway.core.portal_accounts import PortalUser, normalize_email
from mogateway.core.portal_store import PortalStore

__all__ = ["MAX_SESSIONS", "PortalSession", "PortalSessions", "PortalThrottle", "account_key"]

MAX_SESSIONS = 10_000
#: An account's failures share the address's table; an address never starts with this.
_ACCOUNT = "account:"

log = logging.getLogger("mogateway.portal")


@dataclass(slots=True, kw_only=True)
class PortalSession(BrowserSession):
    """One signed-in person's browser, as read for one request: the shared session, and whose it is."""

    user_id: str
    client_id: str


class PortalSessions(BrowserSessions[tuple[str, str, float, str]]):
    """The portal's sessions, in the journal (module docstring)."""

    def __init__(self, store: PortalStore, lifetime_s: float, clock: Callable[[], float] = time.time) -> None:
        super().__init__(PORTAL, store, lifetime_s, clock)
        self._store = store

    async def create(self, user: PortalUser) -> PortalSession:
        now = self._clock()
        session = PortalSession(
            PORTAL,
            secrets.token_urlsafe(32),
            now + self.lifetime_s,
            user_id=user.id,
            client_id=user.client_id,
        )
        await self._store.add_session(
            session.key, user.id, user.client_id, session.expires_at, now, MAX_SESSIONS
        )
        return session

    async def get(self, session_id: str | None) -> PortalSession | None:
        found = await self._row(session_id)
        if session_id is None or found is None:
            return None
        user_id, client_id, expires_at, sealed = found
        flashes = open_flashes(PORTAL, session_id, sealed)
        return PortalSession(PORTAL, session_id, expires_at, flashes, user_id=user_id, client_id=client_id)

    async def end_everywhere(self, user_id: str) -> int:
        """Every session of the person ends, on every worker and node."""
        return await self._store.end_user_sessions(user_id)


def account_key(email: str) -> str:
    """The throttle's key of the account an e-mail address names (whether or not it exists)."""
    try:
        email = normalize_email(email)
    except ValueError:
        email = email.strip().lower()
    return _ACCOUNT + hashlib.sha256(email.encode("utf-8", "replace")).hexdigest()


class PortalThrottle:
    """At most ``per_address`` failed portal sign-ins per address, and ``per_account`` per account (the
    e-mail address typed) unless the browser shows a device cookie of that account, then ``per_device``
    for that cookie, per ``window_s``, over every worker (module docstring). ``device`` is a recognised
    device cookie's throttle key (``api.portal.devices.DeviceCookies.recognised``), or None."""

    def __init__(
        self,
        store: PortalStore,
        per_address: int = 5,
        window_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        per_account: int = 10,
        per_device: int = 5,
    ) -> None:
        self.per_address = per_address
        self.per_account = per_account
        self.per_device = per_device
        self.window_s = window_s
        self._by_address = SignInThrottle(store, per_address, window_s, clock)
        self._by_account = SignInThrottle(store, per_account, window_s, clock)
        self._by_device = SignInThrottle(store, per_device, window_s, clock)

    async def wait_s(self, address: str, email: str, device: str | None = None) -> float:
        """How long a sign-in from ``address`` as ``email`` (with ``device``) must wait (0: now)."""
        by_address = await self._by_address.wait_s(address)
        by_account = await self._by_account.wait_s(account_key(email))
        if by_account > 0 and device is not None and await self._by_device.wait_s(device) == 0:
            by_account = 0.0  # the person's own browser: its cookie's limit, not the account's
        return max(by_address, by_account)

    async def failed(self, address: str, email: str, device: str | None = None) -> None:
        """Count a failed sign-in against each that applies; log when one of them starts refusing."""
        if await self._by_address.failed(address):
            log.warning(
                "portal sign-in throttled by address: %d failed sign-ins from %r within %d s; "
                "its sign-ins wait",
                self.per_address,
                address,
                self.window_s,
            )
        if await self._by_account.failed(account_key(email)):
            log.warning(
                "portal sign-in throttled by account: %d failed sign-ins as %r within %d s, from any "
                "address; its sign-ins wait",
                self.per_account,
                email.strip()[:100],
                self.window_s,
            )
        if device is not None and await self._by_device.failed(device):
            log.warning(
                "portal sign-in throttled by device cookie: %d failed sign-ins as %r with one device "
                "cookie within %d s; it no longer passes the account's throttle",
                self.per_device,
                email.strip()[:100],
                self.window_s,
            )
