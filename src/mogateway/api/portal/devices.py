"""Device cookies: a person's own browser is not locked out by someone else's failed sign-ins (OWASP's
"device cookies" against account lockout; what a recognised one is worth is ``PortalThrottle``'s).

Rules, before the code:

* After a successful sign-in (password, and the second factor when it is on) the portal sets
  :data:`COOKIE` for that person: ``<nonce>.<expiry>.<mac>``, 128 random bits, the Unix second it ends
  (:data:`LIFETIME_S` on) and an HMAC-SHA256 over the person's id, their device generation, the nonce
  and the expiry. Nothing in it names the person or is a secret; only the gateway can make one. It is
  HttpOnly, SameSite=Strict, scoped to ``/portal/`` and Secure over HTTPS, as the session's cookie.
* The MAC's key is derived as the sessions' keys are (``api.browser.sessions.derived``) from a secret
  every worker and node shares: ``secret_key`` when it is set, else the admin token. Rotating it ends
  every device cookie (``old_secret_key`` does not verify them: a device cookie is a convenience, the
  person signs in once more and has a new one).
* A cookie is recognised for the e-mail address typed only when its MAC, compared in constant time, is
  the one of that address's enabled person at their device generation of the moment, and it has not
  expired. Anything else (no cookie, another person's, altered, expired, signed before a rotation, or
  before the person was disabled, signed out everywhere or set a password: each of those adds one to
  the generation, ``core.portal_accounts``) is no device cookie, and the sign-in goes on exactly as
  without one: no error, no other text.
* A value not shaped like a device cookie costs nothing; one that is costs the lookup of the address's
  person and one HMAC whether that person exists or not, so the time of the answer says nothing about
  who has an account. The journal never keeps a cookie; a recognised one's failures are counted under
  the SHA-256 of its nonce (:func:`throttle_key`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from mogateway.api.browser.sessions import PORTAL, derived
from mogateway.core.portal_accounts import PortalUser, normalize_email
from mogateway.core.portal_store import PortalStore

__all__ = ["COOKIE", "LIFETIME_S", "DeviceCookies", "device_cookie", "device_key", "throttle_key"]

COOKIE: Final = "mogateway_portal_device"
LIFETIME_S: Final = 30 * 24 * 3600
_PREFIX: Final = "mogateway portal device v1"
#: A nonce (16 random bytes, url-safe base64), an expiry (Unix seconds), a MAC (32 bytes, base64).
_SHAPE: Final = re.compile(r"\A([A-Za-z0-9_-]{22})\.([1-9][0-9]{0,11})\.([A-Za-z0-9_-]{43})\Z")
#: The throttle's keys of devices; an address or an account key never starts with this.
_DEVICE: Final = "device:"


def device_key(secret: str) -> bytes:
    """The key device cookies are signed with, derived from the gateway's shared ``secret``."""
    return derived(PORTAL, secret, b"device cookie")


def _mac(key: bytes, user_id: str, generation: int, nonce: str, exp: int) -> str:
    text = f"{_PREFIX}\n{user_id}\n{generation}\n{nonce}\n{exp}"
    digest = hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def device_cookie(key: bytes, user_id: str, generation: int, expires_at: int) -> str:
    """A new device cookie's value for the person ``user_id`` at ``generation``, until ``expires_at``."""
    nonce = secrets.token_urlsafe(16)
    return f"{nonce}.{expires_at}.{_mac(key, user_id, generation, nonce, expires_at)}"


def throttle_key(nonce: str) -> str:
    """The key a recognised device cookie's failed sign-ins are counted under (not the cookie)."""
    return _DEVICE + hashlib.sha256(nonce.encode("ascii")).hexdigest()


class DeviceCookies:
    """Signs a person's device cookie and recognises it on a later sign-in (module docstring).
    ``secret`` gives the shared secret of the moment ("" until the gateway has one: no cookies)."""

    def __init__(
        self, store: PortalStore, secret: Callable[[], str], clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._secret = secret
        self._clock = clock

    async def recognised(self, value: str | None, email: str) -> str | None:
        """The throttle key of ``value`` when it is a live device cookie of the person ``email`` names,
        else None."""
        shaped = _SHAPE.match(value or "")
        secret = self._secret()
        if shaped is None or not secret:
            return None
        nonce, exp_text, given = shaped.groups()
        try:
            address = normalize_email(email)
        except ValueError:
            return None
        user = await self._store.user_by_email(address)
        live = user is not None and user.active
        user_id, generation = (user.id, user.device_generation) if user is not None and live else ("", -1)
        expected = _mac(device_key(secret), user_id, generation, nonce, int(exp_text))
        if not hmac.compare_digest(given.encode("ascii"), expected.encode("ascii")) or not live:
            return None
        if int(exp_text) <= self._clock():
            return None
        return throttle_key(nonce)

    def set_cookie(self, response: Response, request: Request, user: PortalUser) -> None:
        """Give the browser that just signed in as ``user`` a new device cookie."""
        secret = self._secret()
        if not secret:
            return
        expires_at = int(self._clock()) + LIFETIME_S
        response.set_cookie(
            COOKIE,
            device_cookie(device_key(secret), user.id, user.device_generation, expires_at),
            max_age=LIFETIME_S,
            path=PORTAL.path,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
