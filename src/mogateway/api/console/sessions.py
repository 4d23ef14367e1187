"""Console sessions, CSRF tokens and the sign-in throttle.

Rules:

* A session is created only by signing in with the admin token, compared in constant time (both sides
  hashed first, so not even the token's length leaks). Its id is 256 random bits, sent in an HttpOnly,
  SameSite=Strict cookie scoped to ``/console`` that expires with the session; sign-out ends it here.
* Sessions live in this node's memory: a restart signs everyone out, and behind a load balancer a
  cluster needs sticky sessions (or one sign-in per node).
* Every state-changing form carries the session's CSRF token, checked in constant time; the sign-in
  form, which has no session yet, carries a token matching a short-lived cookie of its own.
* Failed sign-ins are throttled per client address: past the limit every attempt from that address is
  refused, right or wrong, until its oldest failure ages out. There is no limit over all addresses: it
  would let anyone lock the operators out, and would not slow a guesser who can try tokens on the API
  itself (a token of 16 characters or more is out of reach of guessing either way).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Session", "SessionStore", "SignInThrottle", "same_secret"]

_MAX_SESSIONS = 10_000


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison that does not reveal the expected value's length either."""
    return hmac.compare_digest(
        hashlib.sha256(given.encode("utf-8")).digest(), hashlib.sha256(expected.encode("utf-8")).digest()
    )


@dataclass(slots=True)
class Session:
    """One signed-in browser."""

    id: str
    csrf: str
    expires_at: float
    #: Messages for the next page only (e.g. a client's new token, shown once), then forgotten.
    flashes: list[dict[str, Any]] = field(default_factory=list)

    def flash(self, kind: str, text: str, **extra: Any) -> None:
        self.flashes.append({"kind": kind, "text": text, **extra})

    def take_flashes(self) -> list[dict[str, Any]]:
        out, self.flashes = self.flashes, []
        return out


class SessionStore:
    """The signed-in sessions of this node."""

    def __init__(self, lifetime_s: float, clock: Callable[[], float] = time.time) -> None:
        self.lifetime_s = lifetime_s
        self._clock = clock
        self._sessions: dict[str, Session] = {}

    def create(self) -> Session:
        now = self._clock()
        self._purge(now)
        if len(self._sessions) >= _MAX_SESSIONS:  # never grow without bound: the oldest goes
            oldest = min(self._sessions.values(), key=lambda s: s.expires_at)
            del self._sessions[oldest.id]
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now + self.lifetime_s)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires_at <= self._clock():
            del self._sessions[session_id]
            return None
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def _purge(self, now: float) -> None:
        for sid in [sid for sid, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[sid]


class SignInThrottle:
    """At most ``per_address`` failed sign-ins per client address per ``window_s``."""

    def __init__(
        self, per_address: int = 5, window_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_address = per_address
        self.window_s = window_s
        self._clock = clock
        self._by_address: dict[str, deque[float]] = {}

    def wait_s(self, address: str) -> float:
        """0 when ``address`` may try now, else the seconds until it may."""
        now = self._clock()
        failures = self._by_address.get(address)
        if failures is None:
            return 0.0
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if not failures:
            del self._by_address[address]
            return 0.0
        return failures[0] + self.window_s - now if len(failures) >= self.per_address else 0.0

    def failed(self, address: str) -> None:
        now = self._clock()
        if len(self._by_address) > 10_000:  # under a flood of addresses, forget the quiet ones
            for key in [k for k, v in self._by_address.items() if not v or v[-1] <= now - self.window_s]:
                del self._by_address[key]
        self._by_address.setdefault(address, deque()).append(now)
