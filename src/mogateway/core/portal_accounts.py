"""The client portal's people: who may sign in for a client application, and what each may do.

Rules stated here, before the code:

* A portal user belongs to exactly one client (``client_id``), for good: nothing moves a person to
  another client, and every portal query is scoped by that id (``service.client_scope``).
* Two roles. A ``viewer`` reads the client's pages (overview, messages, callback, audit) and exports
  reports; an ``admin`` may also change the callback URL, test the endpoint and rotate credentials.
  :func:`may` is the only place that says which role may do what.
* A person is known by an e-mail address, unique over the gateway (so that signing in needs nothing
  else, and names one client), compared in lower case. The
  address is a name, never a channel: the gateway sends no mail (the invite link is given by hand).
* A person is invited: the invite is a random token (256 bits) kept only as its SHA-256, valid once
  and until it expires; opening it sets the password. Disabled people (one, or all of a client's) can
  no longer sign in, and their sessions end.
"""

from __future__ import annotations

import enum
import hashlib
import re
from typing import Final

from mogateway.core.immutable import immutable

__all__ = [
    "ACTIONS",
    "EMAIL_PATTERN",
    "MAX_PASSWORD",
    "MIN_PASSWORD",
    "AuditEntry",
    "PortalUser",
    "Role",
    "invite_key",
    "may",
    "normalize_email",
    "password_problem",
]

MIN_PASSWORD: Final = 12
MAX_PASSWORD: Final = 256
#: What an e-mail address looks like here, ASCII only (the admin API's schema says the same).
EMAIL_PATTERN: Final = r"^[A-Za-z0-9._%+'-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$"
_EMAIL: Final = re.compile(EMAIL_PATTERN.replace("^", "\\A", 1).removesuffix("$") + "\\Z")


class Role(enum.StrEnum):
    VIEWER = "viewer"
    ADMIN = "admin"


#: What each action needs: the roles allowed to do it.
ACTIONS: Final[dict[str, frozenset[Role]]] = {
    "read": frozenset({Role.VIEWER, Role.ADMIN}),
    "export": frozenset({Role.VIEWER, Role.ADMIN}),
    "change_callback": frozenset({Role.ADMIN}),
    "test_endpoint": frozenset({Role.ADMIN}),
    "rotate_credentials": frozenset({Role.ADMIN}),
}


def may(role: str, action: str) -> bool:
    """Whether a person of ``role`` may do ``action`` (an unknown action: nobody may)."""
    allowed = ACTIONS.get(action)
    return allowed is not None and role in {r.value for r in allowed}


def normalize_email(text: str) -> str:
    """``text`` as the e-mail address a person is known by (trimmed, lower case); ValueError if it
    does not look like one."""
    email = text.strip().lower()
    if not _EMAIL.match(email):
        raise ValueError(f"{text.strip()[:80]!r} is not an e-mail address")
    return email


def password_problem(password: str) -> str | None:
    """Why ``password`` cannot be a portal password, or None."""
    if len(password) < MIN_PASSWORD:
        return f"a password has at least {MIN_PASSWORD} characters"
    if len(password) > MAX_PASSWORD:
        return f"a password has at most {MAX_PASSWORD} characters"
    return None


def invite_key(token: str) -> str:
    """What the journal keeps of an invite token: its SHA-256 (hex)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@immutable
class PortalUser:
    """One person of a client's portal, as the journal keeps them (secrets stay out of the repr)."""

    id: str
    client_id: str
    email: str
    role: str
    created_at: float
    #: argon2id hash ("" until the invite is accepted).
    password_hash: str = ""
    #: The TOTP secret, base32 ("" when TOTP is off). Sealed at rest like client secrets.
    totp_secret: str = ""
    #: The last TOTP step accepted (a code is never accepted twice).
    totp_step: int = 0
    disabled_at: float = 0.0
    #: What the person's device cookies are signed over (``api.portal.devices``): one more each time
    #: they are disabled, sign out everywhere or set a password, which ends every cookie signed before.
    device_generation: int = 0

    def __repr__(self) -> str:
        return f"PortalUser({self.id}, {self.client_id}, {self.email}, {self.role})"

    @property
    def active(self) -> bool:
        return not self.disabled_at and bool(self.password_hash)

    @property
    def totp_on(self) -> bool:
        return bool(self.totp_secret)


@immutable
class AuditEntry:
    """One change to a client, as its admins and the operators read it."""

    at: float
    client_id: str
    #: Who: ``portal:<email>``, ``operator`` (console or admin API), ``cli``.
    actor: str
    action: str
    detail: str
