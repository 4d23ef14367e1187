"""The request handling both browser UIs share (``api.browser.routes``, ``api.browser.render``), on a small
app of its own: an early answer is the response, an id that is none never reaches the handler, a POST
from another site or without the session's token is refused and changes nothing, and both UIs read the
shared partials and their own templates first."""

from __future__ import annotations

from pathlib import Path

import httpx
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import PlainTextResponse, Response

from mogateway.api.browser.render import SECURITY_HEADERS, Pages
from mogateway.api.browser.routes import Answered, BrowserRoute, posted_form, redirect, to_signin
from mogateway.api.browser.sessions import CONSOLE, PORTAL, BrowserSession
from mogateway.api.console.render import console_pages
from mogateway.api.portal.web import portal_pages

SESSION = BrowserSession(CONSOLE, "s" * 43, 0.0)


def _pages(tmp_path: Path) -> Pages:
    (tmp_path / "refused.html").write_text("refused: {{ reason }}")
    return Pages(tmp_path)


def _app(tmp_path: Path) -> tuple[FastAPI, list[str]]:
    """A UI of three routes; ``ran`` lists the handlers that ran (and what they changed)."""
    pages = _pages(tmp_path)
    ran: list[str] = []

    class Route(BrowserRoute):
        async def bad_id(self, request: Request, name: str, value: str) -> Response:
            return PlainTextResponse(f"no {name} {value}", status_code=404)

    router = APIRouter(route_class=Route)

    @router.get("/things/{thing_id}")
    async def thing(request: Request, thing_id: str) -> Response:
        ran.append(thing_id)
        if thing_id == "private":
            raise Answered(to_signin(request, CONSOLE))
        return PlainTextResponse(thing_id)

    @router.post("/change")
    async def change(request: Request) -> Response:
        form = await posted_form(request, SESSION, pages)
        ran.append(form["what"])
        return redirect("/done")

    app = FastAPI()
    app.include_router(router)
    return app, ran


async def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://ui.test")


async def test_an_early_answer_is_the_response_and_a_bad_id_never_runs_the_handler(tmp_path: Path) -> None:
    app, ran = _app(tmp_path)
    async with await _client(app) as client:
        assert (await client.get("/things/t1")).text == "t1"
        answered = await client.get("/things/private?x=1")
        assert answered.status_code == 303
        assert answered.headers["location"] == "/console/login?next=%2Fthings%2Fprivate%3Fx%3D1"
        bad = await client.get("/things/..%2E")
        assert bad.status_code == 404 and bad.text.startswith("no thing_id")
    assert ran == ["t1", "private"]


async def test_a_post_needs_this_site_and_the_session_token(tmp_path: Path) -> None:
    app, ran = _app(tmp_path)
    form = {"csrf": SESSION.csrf, "what": "ok"}
    async with await _client(app) as client:
        cross = await client.post("/change", data=form, headers={"sec-fetch-site": "cross-site"})
        assert cross.status_code == 403 and cross.text == "refused: The request came from another site."
        assert cross.headers["content-security-policy"] == SECURITY_HEADERS["content-security-policy"]
        portal_token = BrowserSession(PORTAL, SESSION.id, 0).csrf  # the same id's, in the other scope
        stale = await client.post("/change", data={**form, "csrf": portal_token})
        assert stale.status_code == 403 and "security token" in stale.text
        assert ran == []
        done = await client.post("/change", data=form, headers={"origin": "http://ui.test"})
        assert done.status_code == 303 and done.headers["location"] == "/done"
    assert ran == ["ok"]


def test_each_ui_reads_its_own_templates_first_and_the_shared_ones_as_browser() -> None:
    for pages in (console_pages, portal_pages):
        names = pages.environment.list_templates()
        assert "base.html" in names and "browser/base.html" in names and "browser/message.html" in names
        assert pages.environment.get_template("base.html").filename != (
            pages.environment.get_template("browser/base.html").filename
        )
    console = console_pages.render("refused.html", {"reason": "r"})
    portal = portal_pages.render("refused.html", {"reason": "r"})
    assert "mogateway console" in console and "mogateway portal" in portal


def test_every_console_and_portal_route_sends_the_early_answers() -> None:
    """A route outside BrowserRoute would turn a guard's Answered into a server error."""
    from mogateway.api.console import clients, messages, pages, people, signin
    from mogateway.api.portal import account, callback, credentials, reports
    from mogateway.api.portal import pages as portal_page_routes
    from mogateway.api.portal import signin as portal_signin

    modules = (clients, messages, pages, people, signin, account, callback, credentials, reports)
    routes = [r for m in (*modules, portal_page_routes, portal_signin) for r in m.router.routes]
    assert len(routes) > 30
    assert all(isinstance(r, BrowserRoute) for r in routes)
