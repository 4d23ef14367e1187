"""What the console's and the portal's sessions and sign-ins share, once, for two scopes.

The two web UIs sign in different people (the operator with the admin token; a client's people with a
password and TOTP) into different tables, but keep one set of rules, written here; each scope
(:data:`CONSOLE`, :data:`PORTAL`) names only its cookies, paths and the label of its derived keys:

* A session id is 256 random bits; the journal keeps its SHA-256 (:func:`session_key`), never the id.
  A cookie value too long to be an id is not looked up (:func:`lookup_key`).
* The session cookie is HttpOnly, SameSite=Strict, Secure over HTTPS, scoped to the UI's path and
  expires with the session (:func:`set_session_cookie`).
* A session's CSRF token is an HMAC of its id under the scope's label (:func:`csrf_token`): every worker
  knows it without storing it, it cannot be computed from the journal, and a console session's token
  is no portal session's. The sign-in form, which has no session yet, carries a token matching a
  cookie of its own, on the sign-in path only, for an hour (:func:`signin_token`,
  :func:`set_signin_cookie`, :func:`signin_form_ok`). A POST whose browser says it comes from
  another site is refused (:func:`same_origin`).
* What a page has to say on the next page only (a new token, shown once) is kept on the session row,
  sealed (AES-256-GCM) under a key derived from the session id (:class:`BrowserSessions`):
  only the browser holding the cookie can have it read.
* Failed sign-ins are counted per key in the journal, so a limit holds over every worker and node
  (:class:`SignInThrottle`): past it every attempt is refused, right or wrong, until the oldest failure
  ages out. Two attempts in flight at the same moment may both be judged before either is counted;
  the throttle bounds guessing, it is not an exact count.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

__all__ = [
    "CONSOLE",
    "PORTAL",
    "BrowserSession",
    "BrowserSessions",
    "SessionScope",
    "SignInThrottle",
    "clear_session_cookie",
    "clear_signin_cookie",
    "csrf_token",
    "derived",
    "lookup_key",
    "safe_next",
    "same_origin",
    "same_secret",
    "session_key",
    "set_session_cookie",
    "set_signin_cookie",
    "signed_in",
    "signed_out",
    "signin_form_ok",
    "signin_token",
    "throttled",
]

#: The longest cookie value looked up as a session id (an id is 43 characters).
_MAX_ID = 100
_SIGNIN_COOKIE_S = 3600
_MAX_FAILURE_ROWS = 10_000

_Row = TypeVar("_Row")
_RowOut = TypeVar("_RowOut", covariant=True)


@dataclass(frozen=True, slots=True)
class SessionScope:
    """Where one web UI keeps its sessions: its cookies and paths, and the label of its derived keys."""

    label: bytes
    cookie: str
    path: str
    signin_cookie: str
    signin_path: str
    #: Where a sign-in leads when it was given nowhere (or somewhere outside the UI).
    home: str


CONSOLE = SessionScope(
    b"console", "mogateway_console", "/console", "mogateway_console_signin", "/console/login", "/console/"
)
PORTAL = SessionScope(
    b"portal", "mogateway_portal", "/portal/", "mogateway_portal_signin", "/portal/login", "/portal/"
)


# ------------------------------------------------------------------------------------------ secrets


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison that does not reveal the expected value's length either."""
    return hmac.compare_digest(
        hashlib.sha256(given.encode("utf-8")).digest(), hashlib.sha256(expected.encode("utf-8")).digest()
    )


def session_key(session_id: str) -> str:
    """What the journal keeps a session under: the SHA-256 of its id (hex)."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def lookup_key(session_id: str | None) -> str | None:
    """The journal key of a cookie's session id; None when the cookie cannot hold one."""
    if not session_id or len(session_id) > _MAX_ID:
        return None
    return session_key(session_id)


def derived(scope: SessionScope, session_id: str, purpose: bytes) -> bytes:
    """A key for ``purpose`` derived from the session id (or from another secret: the portal's device
    cookies derive theirs from the gateway's), in the scope's name."""
    message = b"mogateway " + scope.label + b" " + purpose
    return hmac.new(session_id.encode("utf-8"), message, hashlib.sha256).digest()


def csrf_token(scope: SessionScope, session_id: str) -> str:
    """The CSRF token of a session: every worker computes it; the journal cannot."""
    return base64.urlsafe_b64encode(derived(scope, session_id, b"csrf")).decode("ascii").rstrip("=")


# ------------------------------------------------------------------------------------------ flashes


def _box(scope: SessionScope, session_id: str) -> AESGCM:
    return AESGCM(derived(scope, session_id, b"flashes"))


def seal_flashes(scope: SessionScope, session_id: str, flashes: list[dict[str, Any]]) -> str:
    if not flashes:
        return ""
    nonce = os.urandom(12)
    sealed = _box(scope, session_id).encrypt(nonce, orjson.dumps(flashes), session_key(session_id).encode())
    return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")


def open_flashes(scope: SessionScope, session_id: str, stored: str) -> list[dict[str, Any]]:
    if not stored:
        return []
    try:
        raw = base64.urlsafe_b64decode(stored)
        plain = _box(scope, session_id).decrypt(raw[:12], raw[12:], session_key(session_id).encode())
    except (InvalidTag, ValueError):
        return []  # altered, or written by something else: nothing to show
    flashes: list[dict[str, Any]] = orjson.loads(plain)
    return flashes


@dataclass(slots=True)
class BrowserSession:
    """One signed-in browser, as read for one request, in its UI's scope (the portal's adds its person)."""

    scope: SessionScope
    id: str
    expires_at: float
    #: Messages for the next page only, as read with the session (:meth:`BrowserSessions.flash`).
    flashes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return session_key(self.id)

    @property
    def csrf(self) -> str:
        return csrf_token(self.scope, self.id)


class SessionRows(Protocol[_RowOut]):
    """What both UIs' session tables do alike (the console's and the portal's, in the journal): a live
    session's row (each table's own), its flashes, its end."""

    async def session(self, key: str, now: float) -> _RowOut | None: ...

    async def set_flashes(self, key: str, flashes: str) -> None: ...

    async def end_session(self, key: str) -> None: ...


class BrowserSessions(Generic[_Row]):
    """What the console's and the portal's session stores do alike: find a cookie's live session row,
    end one session, keep a flash for the next page, take the flashes of this one. Each store opens and
    reads its own kind of session from its row."""

    def __init__(
        self, scope: SessionScope, rows: SessionRows[_Row], lifetime_s: float, clock: Callable[[], float]
    ) -> None:
        self.scope = scope
        self.lifetime_s = lifetime_s
        self._rows = rows
        self._clock = clock

    async def _row(self, session_id: str | None) -> _Row | None:
        """The journal's row of a cookie's session, unless it cannot be an id, is unknown or expired."""
        key = lookup_key(session_id)
        if key is None:
            return None
        return await self._rows.session(key, self._clock())

    async def end(self, session_id: str | None) -> None:
        if session_id:
            await self._rows.end_session(session_key(session_id))

    async def flash(self, session: BrowserSession, kind: str, text: str, **extra: Any) -> None:
        """Keep a message for the session's next page (whichever worker serves it)."""
        session.flashes.append({"kind": kind, "text": text, **extra})
        await self._rows.set_flashes(session.key, seal_flashes(self.scope, session.id, session.flashes))

    async def take_flashes(self, session: BrowserSession) -> list[dict[str, Any]]:
        """The messages kept for this page, forgotten as they are shown."""
        out, session.flashes = session.flashes, []
        if out:
            await self._rows.set_flashes(session.key, "")
        return out


# ------------------------------------------------------------------------------------------ cookies


def set_session_cookie(
    response: Response, request: Request, scope: SessionScope, session_id: str, lifetime_s: float
) -> None:
    response.set_cookie(
        scope.cookie,
        session_id,
        max_age=int(lifetime_s),
        path=scope.path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session_cookie(response: Response, scope: SessionScope) -> None:
    response.delete_cookie(scope.cookie, path=scope.path, httponly=True, samesite="strict")


def safe_next(scope: SessionScope, value: str | None) -> str:
    """Only a path of the UI may be where sign-in leads (no open redirect)."""
    if value and value.startswith(scope.home) and not value.startswith("//") and "\\" not in value:
        return value
    return scope.home


def signin_token(request: Request, scope: SessionScope) -> str:
    """The sign-in form's CSRF token: the browser's (its cookie) or a new one."""
    return request.cookies.get(scope.signin_cookie) or secrets.token_urlsafe(32)


def set_signin_cookie(response: Response, request: Request, scope: SessionScope, token: str) -> None:
    """The cookie that holds the sign-in form's token, sent back to the sign-in path only."""
    response.set_cookie(
        scope.signin_cookie,
        token,
        max_age=_SIGNIN_COOKIE_S,
        path=scope.signin_path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def signin_form_ok(request: Request, scope: SessionScope, form: dict[str, str]) -> bool:
    """Whether a sign-in form comes from this gateway's own sign-in page (its token and site)."""
    expected = request.cookies.get(scope.signin_cookie, "")
    return same_origin(request) and bool(expected) and same_secret(form.get("csrf", ""), expected)


def clear_signin_cookie(response: Response, scope: SessionScope) -> None:
    response.delete_cookie(scope.signin_cookie, path=scope.signin_path, httponly=True, samesite="strict")


def signed_in(
    request: Request, scope: SessionScope, session_id: str, lifetime_s: float, next_: str | None
) -> RedirectResponse:
    """Where a sign-in leads, with the session's cookie set and the sign-in form's cookie gone."""
    response = RedirectResponse(safe_next(scope, next_), status_code=303)
    set_session_cookie(response, request, scope, session_id, lifetime_s)
    clear_signin_cookie(response, scope)
    return response


def signed_out(scope: SessionScope) -> RedirectResponse:
    """Back to the sign-in page, the session's cookie gone (the session was ended by the caller)."""
    response = RedirectResponse(scope.signin_path, status_code=303)
    clear_session_cookie(response, scope)
    return response


def throttled(wait_s: float) -> str:
    """What a sign-in refused by the throttle is told."""
    return f"Too many failed sign-ins. Try again in {int(wait_s) + 1} seconds."


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site (Sec-Fetch-Site, Origin).

    Browsers that send neither (old ones, scripts) are left to the CSRF token alone."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


# ------------------------------------------------------------------------------------------ throttle


class SignInFailures(Protocol):
    """Failed sign-ins counted in the journal, per key (the console's and the portal's tables)."""

    async def signin_failures(self, address: str, since: float) -> tuple[int, float | None]: ...

    async def add_signin_failure(self, address: str, at: float, forget_before: float, keep: int) -> None: ...


class SignInThrottle:
    """At most ``per_address`` failed sign-ins per key (a client address, or the portal's account key)
    per ``window_s``, over every worker and node (the failures are counted in the journal)."""

    def __init__(
        self,
        store: SignInFailures,
        per_address: int = 5,
        window_s: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_address = per_address
        self.window_s = window_s
        self._store = store
        self._clock = clock

    async def wait_s(self, address: str) -> float:
        """0 when ``address`` may try now, else the seconds until it may."""
        now = self._clock()
        count, oldest = await self._store.signin_failures(address, now - self.window_s)
        if count < self.per_address or oldest is None:
            return 0.0
        return max(oldest + self.window_s - now, 0.001)

    async def failed(self, address: str) -> bool:
        """Count a failure; True when it is the one that makes the throttle refuse (say so, once)."""
        now = self._clock()
        since = now - self.window_s
        await self._store.add_signin_failure(address, now, since, _MAX_FAILURE_ROWS)
        return (await self._store.signin_failures(address, since))[0] == self.per_address
