"""What the console's pages share: its state on the app, sessions from cookies, the POST guard (session,
CSRF token, origin), redirects and the page context. The checks it shares with the portal (the POST's
form, the id's shape, answering a request early) are ``api.browser.routes``'s: a helper that finds a
request must be answered otherwise (sign-in, refused) raises, and :class:`ConsoleRoute` sends that.

Rules (every page module keeps them by going through these helpers):

* Every page but sign-in needs a session; without one a page redirects to sign-in and a live stream
  answers 401.
* An id in a console URL must have an id's shape (``core.ids``): anything else (``.``, ``..``) is the
  not-found page, before any handler runs (:class:`ConsoleRoute`), and :func:`path` never lets an id
  become a dot segment of an API path.
* Every POST needs the session's CSRF token and, when the browser names the site it came from, this
  gateway as that site; anything else is refused with 403 and changes nothing.
* Changes and message lookups go through the gateway's own HTTP API, called in process with the admin
  token (:meth:`ConsoleState.api`), so the console accepts and refuses exactly what the API does and
  shows the API's own words. Figures come from the stats service behind ``GET /v1/stats``.
* A successful POST redirects (POST/redirect/GET), so reloading never repeats it; what it has to say
  is kept in the session for the next page only: a new token is shown once.
* A form marked ``data-inline`` may be sent by console.js, which then receives an HTML fragment to put
  in the page instead of a redirect (header ``x-console-fetch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Request
from starlette.responses import Response

from mogateway.api.browser.routes import Answered, BrowserRoute, posted_form, read_form, redirect, to_signin
from mogateway.api.browser.sessions import CONSOLE
from mogateway.api.console.render import console_pages, html
from mogateway.api.console.sessions import Session, SessionStore, SignInThrottle
from mogateway.core.ids import what_id
from mogateway.gateway_view import GatewayView
from mogateway.service.stats import StatsService

if TYPE_CHECKING:
    import httpx

__all__ = [
    "COOKIE",
    "ConsoleRoute",
    "ConsoleState",
    "guard",
    "inline",
    "not_found",
    "page_context",
    "page_session",
    "path",
    "read_form",
    "redirect",
    "session_of",
    "split_words",
    "state_of",
]

COOKIE = CONSOLE.cookie


class ConsoleState:
    """What the console keeps on ``app.state.console``: sessions and the throttle (both in the journal,
    shared by every worker and node), the in-process API."""

    def __init__(self, app: Any, gateway: GatewayView) -> None:
        self.gateway = gateway
        store = gateway.journal.console_sessions()
        self.sessions = SessionStore(
            store, gateway.settings.console_session_minutes * 60, lambda: gateway.admin_token
        )
        self.throttle = SignInThrottle(store)
        self._app = app
        self._client: httpx.AsyncClient | None = None

    @property
    def _api(self) -> httpx.AsyncClient:
        """The in-process client, made (and httpx imported) at the console's first call: a gateway
        nobody opens the console of does not carry httpx (docs/benchmarks.md §7.2)."""
        if self._client is None:
            import httpx

            # httpx logs each request's URL at INFO, query string and all (numbers searched for): the
            # gateway's logging keeps httpx to warnings (mogateway.logs).
            transport = httpx.ASGITransport(app=self._app)
            self._client = httpx.AsyncClient(transport=transport, base_url="http://gateway")
        return self._client

    @property
    def stats(self) -> StatsService:
        """The traffic figures (set once the gateway has started, which is before it serves)."""
        stats = self.gateway.stats
        if stats is None:
            raise RuntimeError("the gateway is not started")
        return stats

    async def live(self) -> dict[str, Any]:
        """What is true now (StatsService.live), with every bind of this gateway in detail: with
        workers, a page is served by any of them, and each holds only some of the binds."""
        live = await self.stats.live()
        held = await self.gateway.live_binds()
        names = {b["name"] for b in held}
        order = {b["name"]: n for n, b in enumerate(live["binds"])}
        others = [b for b in live["binds"] if b["name"] not in names]  # other nodes' (a cluster)
        live["binds"] = sorted(held, key=lambda b: order.get(b["name"], len(order))) + others
        return live

    async def api(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ingest: bool = False,
    ) -> tuple[int, Any]:
        """Call the gateway's own API; (status, JSON body or None). Build ``path`` with :func:`path`."""
        token = self.gateway.ingest_token if ingest else self.gateway.admin_token
        resp = await self._api.request(
            method,
            path,
            json=json,
            params={k: v for k, v in (params or {}).items() if v not in (None, "")},
            headers={"authorization": f"Bearer {token}"},
        )
        return resp.status_code, (resp.json() if resp.content else None)


def state_of(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


async def session_of(request: Request) -> Session | None:
    return await state_of(request).sessions.get(request.cookies.get(COOKIE))


def path(template: str, *ids: str) -> str:
    """``template`` (``"/v1/clients/{}/token"``) with ids taken from a console URL, each quoted whole: an
    id ``x?y=1`` stays one path segment (``x%3Fy%3D1``), never a query or another path, and a dot is
    sent as ``%2E``, so ``.`` or ``..`` never becomes a dot segment that names another path."""
    return template.format(*(quote(value, safe="").replace(".", "%2E") for value in ids))


async def page_session(request: Request) -> Session:
    """The session of a page's request; without one the request is answered by sign-in."""
    session = await session_of(request)
    if session is None:
        raise Answered(to_signin(request, CONSOLE))
    return session


async def guard(request: Request) -> tuple[Session, dict[str, str]]:
    """The session and form of a state-changing POST; else the request is answered by sign-in or the
    refused page."""
    session = await page_session(request)
    return session, await posted_form(request, session, console_pages)


async def page_context(request: Request, session: Session, page: str, **extra: Any) -> dict[str, Any]:
    state = state_of(request)
    gateway = state.gateway
    return {
        "page": page,
        "csrf": session.csrf,
        "node": gateway.stats.node if gateway.stats is not None else "",
        "flashes": await state.sessions.take_flashes(session),
        "error": None,
        **extra,
    }


def inline(request: Request) -> bool:
    return request.headers.get("x-console-fetch") == "1"


async def not_found(request: Request, session: Session, page: str, what: str) -> Response:
    return html("not_found.html", await page_context(request, session, page, what=what), status=404)


#: The console page an id's not-found page belongs to.
_PAGE_OF_ID = {"client_id": "clients", "message_id": "messages"}


class ConsoleRoute(BrowserRoute):
    """A console route: its ``*_id`` path parameters are ids (``core.ids``), else sign-in without a
    session and the not-found page with one; a helper's early answer is its response."""

    async def bad_id(self, request: Request, name: str, value: str) -> Response:
        session = await page_session(request)
        return await not_found(
            request, session, _PAGE_OF_ID.get(name, "overview"), f"{what_id(name)} {value}"
        )


def split_words(text: str) -> list[str]:
    return [part for part in text.replace(",", " ").split() if part]
