"""What the console's pages share: its state on the app, sessions from cookies, the POST guard (session,
CSRF token, origin), redirects and the page context.

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

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import RedirectResponse, Response

from mogateway.api.browser.sessions import CONSOLE, same_origin
from mogateway.api.console.render import html
from mogateway.api.console.sessions import Session, SessionStore, SignInThrottle, same_secret
from mogateway.core.ids import not_an_id, what_id
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
    "path",
    "page_context",
    "read_form",
    "redirect",
    "refused",
    "session_of",
    "split_words",
    "state_of",
    "to_signin",
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


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def to_signin(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return redirect("/console/login?" + urlencode({"next": target}))


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (the only kind the console sends); the first value of each field."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def refused(request: Request, reason: str) -> Response:
    return html("refused.html", {"reason": reason}, status=403)


async def guard(request: Request) -> tuple[Session, dict[str, str]] | Response:
    """The session and form of a state-changing POST, or the response refusing it."""
    session = await session_of(request)
    if session is None:
        return to_signin(request)
    form = await read_form(request)
    if not same_origin(request):
        return refused(request, "The request came from another site.")
    if not same_secret(form.get("csrf", ""), session.csrf):
        return refused(request, "The form was missing its security token or it was stale.")
    return session, form


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


class ConsoleRoute(APIRoute):
    """A console route whose ``*_id`` path parameters are ids (``core.ids``): otherwise sign-in without a
    session, the not-found page with one, and the handler never runs."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            bad = not_an_id(request.path_params)
            if bad is None:
                return await handler(request)
            session = await session_of(request)
            if session is None:
                return to_signin(request)
            name, value = bad
            return await not_found(
                request, session, _PAGE_OF_ID.get(name, "overview"), f"{what_id(name)} {value}"
            )

        return checked


def split_words(text: str) -> list[str]:
    return [part for part in text.replace(",", " ").split() if part]
