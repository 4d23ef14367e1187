"""What the portal's pages share: its state on the app, the signed-in visit (session, person, and the
one :class:`~mogateway.service.client_scope.ClientScope` of their client), the POST guard, rendering.

Rules (every page module keeps them by going through these helpers):

* Every page but sign-in and the invite needs a session of an enabled person; without one a page
  redirects to sign-in.
* A handler receives a :class:`Visit`; its ``scope`` is the only way to the client's data (there is no
  journal on it, and no client id to choose: the scope's is the session's).
* An id in a portal URL must have an id's shape (``core.ids``), else the not-found page
  (:class:`PortalRoute`).
* Every POST needs the session's CSRF token and, when the browser names its site, this gateway.
* Pages carry the console's security headers (strict CSP, no framing, no caching).

The checks it shares with the console (the POST's form, the id's shape, answering a request early) are
``api.browser.routes``'s: :func:`page` and :func:`guard` raise the answer (sign-in, refused), and
:class:`PortalRoute` sends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.responses import HTMLResponse, Response

from mogateway.api.browser.render import Pages
from mogateway.api.browser.routes import (
    Answered,
    BrowserRoute,
    posted_form,
    read_form,
    redirect,
    refused,
    to_signin,
)
from mogateway.api.browser.sessions import PORTAL
from mogateway.api.portal.devices import DeviceCookies
from mogateway.api.portal.sessions import PortalSession, PortalSessions, PortalThrottle
from mogateway.core.portal_accounts import PortalUser, may
from mogateway.core.portal_store import PortalStore
from mogateway.edges.urlguard import check_callback_url
from mogateway.gateway_view import GatewayView
from mogateway.service.client_scope import ClientScope
from mogateway.service.portal_accounts import PortalAccounts

__all__ = [
    "COOKIE",
    "PortalRoute",
    "PortalState",
    "Visit",
    "guard",
    "html",
    "not_found",
    "page",
    "read_form",
    "redirect",
    "render",
    "state_of",
    "visit_of",
]

COOKIE = PORTAL.cookie

portal_pages = Pages(Path(__file__).with_name("templates"))
environment = portal_pages.environment


def render(template: str, context: dict[str, Any]) -> str:
    return portal_pages.render(template, context)


def html(template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A portal page (or fragment) with the security headers."""
    return portal_pages.html(template, context, status)


class PortalState:
    """What the portal keeps on ``app.state.portal``: accounts, sessions, the throttle (all in the
    journal), device cookies and the gateway, from which a visit's scope is made."""

    def __init__(self, gateway: GatewayView) -> None:
        self.gateway = gateway
        store: PortalStore = gateway.journal.portal()
        self.accounts = PortalAccounts(store)
        self.sessions = PortalSessions(store, gateway.settings.portal_session_minutes * 60)
        self.throttle = PortalThrottle(store)
        self.devices = DeviceCookies(store, self._device_secret)
        self._store = store

    def _device_secret(self) -> str:
        """What device cookies are signed under: ``secret_key``, else the admin token (read at each
        request: it is loaded at start); both are every node's."""
        key = self.gateway.settings.secret_key
        return key.get_secret_value() if key is not None else self.gateway.admin_token

    def scope(self, client_id: str) -> ClientScope:
        allow_private = self.gateway.settings.allow_private_callbacks

        async def check(url: str) -> Any:
            return await check_callback_url(url, allow_private)

        return ClientScope(self._store, self.gateway.registry, client_id, check_url=check)


def state_of(request: Request) -> PortalState:
    state: PortalState = request.app.state.portal
    return state


@dataclass(slots=True)
class Visit:
    """One signed-in request: the session, the person, their client's scope."""

    session: PortalSession
    user: PortalUser
    scope: ClientScope

    def may(self, action: str) -> bool:
        return may(self.user.role, action)

    @property
    def actor(self) -> str:
        return f"portal:{self.user.email}"


async def visit_of(request: Request) -> Visit | None:
    state = state_of(request)
    session = await state.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        return None
    user = await state.accounts.store.user(session.user_id)
    if user is None or not user.active or user.client_id != session.client_id:
        return None
    return Visit(session, user, state.scope(session.client_id))


async def page(request: Request) -> Visit:
    """The visit of a page's request; without one the request is answered by sign-in."""
    visit = await visit_of(request)
    if visit is None:
        raise Answered(to_signin(request, PORTAL))
    return visit


async def guard(request: Request, action: str = "read") -> tuple[Visit, dict[str, str]]:
    """The visit and form of a state-changing POST; else the request is answered by sign-in or the
    refused page (another site, no CSRF token, a role that may not)."""
    visit = await page(request)
    form = await posted_form(request, visit.session, portal_pages)
    if not visit.may(action):
        raise Answered(refused(portal_pages, "Your role may not do this: ask an admin of your team."))
    return visit, form


async def context(request: Request, visit: Visit, name: str, **extra: Any) -> dict[str, Any]:
    client = visit.scope.client()
    return {
        "page": name,
        "csrf": visit.session.csrf,
        "user": visit.user,
        "client": client,
        "admin": visit.may("change_callback"),
        "flashes": await state_of(request).sessions.take_flashes(visit.session),
        "error": None,
        **extra,
    }


async def not_found(request: Request, visit: Visit, what: str) -> Response:
    return html("not_found.html", await context(request, visit, "not found", what=what), status=404)


class PortalRoute(BrowserRoute):
    """A portal route: its ``*_id`` path parameters must be ids (``core.ids``), else not found; a
    helper's early answer is its response."""

    async def bad_id(self, request: Request, name: str, value: str) -> Response:
        return await not_found(request, await page(request), "that page")
