"""Console sessions, CSRF tokens and the sign-in throttle. What the portal's sessions share with these
(ids, cookies, CSRF tokens, flashes, the throttle) is written once, in ``api.browser.sessions``; here is what
is the console's own.

Rules:

* A session is created only by signing in with the admin token, compared in constant time (both sides
  hashed first, so not even the token's length leaks). Its id is 256 random bits, sent in an HttpOnly,
  SameSite=Strict cookie scoped to ``/console`` that expires with the session.
* Sessions live in the journal (``edges.storage.console_sessions``), so every worker process and every
  node of a cluster honours the same ones, and a restart signs nobody out. Sign-out deletes the row:
  the session ends everywhere at once. The journal holds a SHA-256 of the id, never the id: reading
  the journal (or a backup of it) gives no session. Expired sessions are deleted at each sign-in, and
  at most :data:`MAX_SESSIONS` are kept (past it, those expiring soonest go).
* A session is bound to the admin token it was opened with: its row keeps an HMAC of the token under a
  key derived from the session id (:func:`token_tag`), never the token, and without the id (which
  the journal does not hold) the tag says nothing of the token. A session whose tag does not match
  the gateway's admin token of the moment is refused and deleted: restarting with a new
  ``MOGATEWAY_ADMIN_TOKEN`` signs every browser out. "Sign out everywhere" (the console's button,
  ``mogateway console sessions revoke --all``) deletes every session at once.
* The CSRF token of a session is derived from its id (an HMAC), so every worker knows it without
  storing it, and it cannot be computed from the journal. Every state-changing form carries it,
  checked in constant time; the sign-in form, which has no session yet, carries a token matching a
  short-lived cookie of its own.
* What a page has to say on the next page only (a client's new token, shown once) is kept on the
  session row, encrypted (AES-256-GCM) under a key derived from the session id: only the browser
  holding the cookie can have it read. It is deleted once shown.
* Failed sign-ins are throttled per client address, counted in the journal, so five failures are five
  over all workers and nodes: past the limit every attempt from that address is refused, right or
  wrong, until its oldest failure ages out. The address is the peer's, or what a trusted proxy says
  (the ``trusted_proxies`` setting; none by default). There is no limit over all addresses: it would
  let anyone lock the operators out, and would not slow a guesser who can try tokens on the API itself
  (a token of 16 characters or more is out of reach of guessing either way). Two attempts in flight at
  the same moment may both be judged before either is counted; the throttle bounds guessing, it is not
  an exact count.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

from mogateway.api.browser.sessions import (
    CONSOLE,
    BrowserSession,
    BrowserSessions,
    SignInThrottle,
    derived,
    open_flashes,
    same_secret,
    session_key,
)
from mogateway.core.ports import ConsoleSessionStore

__all__ = [
    "MAX_SESSIONS",
    "Session",
    "SessionStore",
    "SignInThrottle",
    "same_secret",
    "session_key",
    "token_tag",
]

MAX_SESSIONS = 10_000


def token_tag(session_id: str, admin_token: str) -> str:
    """What binds a session to the admin token it was opened with: an HMAC of the token under a key
    derived from the session id (hex)."""
    key = derived(CONSOLE, session_id, b"admin token")
    return hmac.new(key, admin_token.encode("utf-8"), hashlib.sha256).hexdigest()


#: One signed-in operator's browser, as read for one request (the console's scope of the shared type).
Session = BrowserSession


class SessionStore(BrowserSessions[tuple[float, str, str]]):
    """The console's sessions, in the journal (see the module's rules)."""

    def __init__(
        self,
        store: ConsoleSessionStore,
        lifetime_s: float,
        admin_token: Callable[[], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(CONSOLE, store, lifetime_s, clock)
        self._store = store
        #: The gateway's admin token of the moment (read at each request: it is loaded at start).
        self._admin_token = admin_token

    async def create(self) -> Session:
        now = self._clock()
        session = Session(CONSOLE, secrets.token_urlsafe(32), now + self.lifetime_s)
        tag = token_tag(session.id, self._admin_token())
        await self._store.add_session(session.key, tag, session.expires_at, now, MAX_SESSIONS)
        return session

    async def get(self, session_id: str | None) -> Session | None:
        found = await self._row(session_id)
        if session_id is None or found is None:
            return None
        expires_at, sealed, tag = found
        if not hmac.compare_digest(tag, token_tag(session_id, self._admin_token())):
            await self.end(session_id)  # opened with another admin token: gone for good
            return None
        return Session(CONSOLE, session_id, expires_at, open_flashes(CONSOLE, session_id, sealed))

    async def end_all(self) -> int:
        """Sign out everywhere: every session ends, on every worker and node; how many there were."""
        return await self._store.end_all_sessions()
