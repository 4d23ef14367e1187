"""docs/console.md names what exists: the console's paths and the admin routes it cites, its screenshots,
the pages of its bar, its settings, its CLI commands and its session cookie, each checked against the
code or a real ``mogateway serve`` (with its default workers), so a rename shows up as a failing doc.

One gateway serves the whole module; each test that needs a session signs in over HTTP, through the
sign-in form as a browser sends it (no browser: these are plain pages and headers)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from console_harness import ServedGateway, served_gateway
from gateway_harness import ADMIN_TOKEN, mogateway_command

from markdown_doc import MarkdownDoc
from mogateway.api import admin, cluster, dlt, health, ingest, portal_admin, stats, whatsapp, whatsapp_media
from mogateway.api.admin import ClientIn
from mogateway.api.console import clients, messages, pages, people, signin
from mogateway.api.console.sessions import MAX_SESSIONS, SignInThrottle
from mogateway.config.settings import Settings
from mogateway.config.smpp import BindConfig

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/console.md")
TEXT = DOC.text

CONSOLE_MODULES = (signin, pages, clients, messages, people)
API_MODULES = (ingest, whatsapp, admin, portal_admin, dlt, cluster, stats, health, whatsapp_media)


def routes_of(*modules: object) -> set[tuple[str, str]]:
    """(method, path template) of every route of the modules' routers (and of the routers they include
    without a prefix, as the admin API includes the routes that may be public)."""
    found: set[tuple[str, str]] = set()
    routers = [module.router for module in modules]  # type: ignore[attr-defined]
    while routers:
        for route in routers.pop().routes:
            if hasattr(route, "original_router"):
                routers.append(route.original_router)
            else:
                found |= {(method, str(route.path)) for method in route.methods}  # type: ignore[attr-defined]
    return found


CONSOLE_ROUTES = routes_of(*CONSOLE_MODULES)
ALL_ROUTES = CONSOLE_ROUTES | routes_of(*API_MODULES)


def route_of(method: str | None, path: str, routes: set[tuple[str, str]]) -> bool:
    """Whether ``path`` (``<id>`` or ``{id}`` for a value; a trailing ``…`` for "and the routes under
    it") is a route of ``routes``, with ``method`` when one is given."""
    prefix = path.endswith("…")
    path = re.sub(r"<[^>]+>|\{[^}]+\}", "x", path.removesuffix("…"))
    for known_method, template in routes:
        if method is not None and known_method != method:
            continue
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern + (".*" if prefix else ""), path):
            return True
    return False


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """A real ``mogateway serve`` with the default workers (one per core, at least two)."""
    with served_gateway(tmp_path_factory.mktemp("docs-console") / "gateway") as gateway:
        yield gateway


def signed_in(gw: ServedGateway) -> tuple[httpx.Client, httpx.Response]:
    """A client that fetched the sign-in form and posted the admin token with its form token, as a
    browser does; and the answer to that POST (the one that sets the session's cookie)."""
    browser = httpx.Client(base_url=gw.url, timeout=30)
    form = browser.get("/console/login")
    assert form.status_code == 200, form.text[:300]
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text[:1000]
    answer = browser.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
    assert answer.status_code == 303 and answer.headers["location"] == "/console/", answer.text[:300]
    return browser, answer


class Bar(HTMLParser):
    """The links of the page's ``<nav>`` (href, label) and the sign-out form of its bar: its action,
    hidden inputs and buttons (label, formaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self.signout_action: str | None = None
        self.signout_inputs: dict[str, str] = {}
        self.buttons: list[tuple[str, str | None]] = []
        self._in_nav = self._in_form = False
        self._href: str | None = None
        self._button: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "nav":
            self._in_nav = True
        elif tag == "a" and self._in_nav:
            self._href, self._text = found.get("href") or "", ""
        elif tag == "form" and "signout" in (found.get("class") or "").split():
            self._in_form, self.signout_action = True, found.get("action")
        elif tag == "input" and self._in_form:
            self.signout_inputs[found.get("name") or ""] = found.get("value") or ""
        elif tag == "button" and self._in_form:
            self._button, self._text = found.get("formaction") or "", ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav = False
        elif tag == "a" and self._href is not None:
            self.links.append((self._href, " ".join(self._text.split())))
            self._href = None
        elif tag == "form":
            self._in_form = False
        elif tag == "button" and self._button is not None:
            self.buttons.append((" ".join(self._text.split()), self._button or None))
            self._button = None

    def handle_data(self, data: str) -> None:
        self._text += data


def bar_of(html: str) -> Bar:
    bar = Bar()
    bar.feed(html)
    return bar


def test_every_console_path_and_admin_route_the_page_names_is_a_route() -> None:
    """Every ``/console/...`` path of the page is a route of the console's routers (GET: the page names
    pages), every ``/v1/...`` route with its method a route of the API, and those without one too."""
    console_paths = set(re.findall(r"(?<![a-z_/])(?<!/v1)(/console/[\w<>{}/.-]*)", TEXT))
    assert {"/console/", "/console/clients/<id>", "/console/messages/<id>"} <= console_paths, console_paths
    for path in console_paths:
        assert route_of("GET", path, CONSOLE_ROUTES), path
    assert route_of("GET", "/console", CONSOLE_ROUTES)  # the cookie's path is a page too (it redirects)
    with_method = re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/v1/[^`\s]+)`", TEXT)
    assert ("POST", "/v1/console/sessions/revoke") in with_method, with_method
    for method, path in with_method:
        assert route_of(method, path, ALL_ROUTES), f"{method} {path}"
    bare = set(re.findall(r"`(/v1/[^`\s]+)`", TEXT))
    assert {"/v1/whatsapp/media/{id}", "/v1/clients/<id>…", "/v1/messages/<id>…"} <= bare, bare
    for path in bare:
        assert route_of(None, path, ALL_ROUTES), path


def test_every_image_linked_exists_and_every_screenshot_is_linked() -> None:
    """Each image of the page is a file, and each png of docs/console/ is on the page (no orphan)."""
    linked = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", TEXT)
    assert len(linked) >= 6, linked
    for image in linked:
        assert (DOC.path.parent / image).is_file(), image
    shown = {(DOC.path.parent / image).resolve() for image in linked}
    for png in sorted((DOC.path.parent / "console").glob("*.png")):
        assert png.resolve() in shown, f"{png.name} is in docs/console/ but not on the page"


def test_every_file_the_page_cites_exists() -> None:
    """The source files, directories and docs named in backquotes are in the repository (the package's
    own paths, ``core/ids.py``, are under src/mogateway/)."""
    cited = re.findall(r"`(?:python )?((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|js))?)`", TEXT)
    assert {"core/ids.py", "api/static/console/console.js", "scripts/console_screenshots.py"} <= set(cited)
    for name in cited:
        assert (ROOT / name).exists() or (ROOT / "src/mogateway" / name).exists(), name


def test_the_pages_of_the_bar_are_the_nav_of_a_signed_in_operator(gw: ServedGateway) -> None:
    """ "Four pages, each reachable from the bar at the top": exactly those are the links of the nav an
    operator sees once signed in, each leading to a page whose heading is its name; *Sign out* and
    *Sign out everywhere* are buttons of one form of the bar, which carries the CSRF token."""
    said = re.search(r"Four pages, each reachable from the bar at the top: (.*?)\. The same", TEXT, re.S)
    assert said, "the sentence that lists the pages is gone: adapt the test to the doc"
    named = re.findall(r"\*\*(\w+)\*\*", said[1])
    assert len(named) == 4, named
    browser, _ = signed_in(gw)
    try:
        home = browser.get("/console/")
        assert home.status_code == 200, home.text[:300]
        bar = bar_of(home.text)
        assert [label for _, label in bar.links] == named, bar.links
        for href, label in bar.links:
            page = browser.get(href)
            assert page.status_code == 200, (href, page.status_code)
            heading = re.search(r"<h1[^>]*>\s*(.*?)\s*</h1>", page.text, re.S)
            assert heading and heading[1] == label, (href, heading and heading[1])
        assert "next to *Sign out*, in its form, with the CSRF token" in " ".join(TEXT.split())
        assert bar.signout_action == "/console/logout"
        assert bar.signout_inputs.get("csrf"), bar.signout_inputs
        assert ("Sign out", None) in bar.buttons, bar.buttons
        assert ("Sign out everywhere", "/console/logout/everywhere") in bar.buttons, bar.buttons
        for action in ("/console/logout", "/console/logout/everywhere"):
            assert route_of("POST", action, CONSOLE_ROUTES), action
    finally:
        browser.close()


def test_every_setting_the_page_names_exists_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``admin_token`` (none: printed at the first start), ``trusted_proxies`` (none, not even
    127.0.0.1), ``console_session_minutes`` (8 hours), ``console`` (on, off with
    ``MOGATEWAY_CONSOLE=false``); and the client's ``timeout_s`` and the bind's ``window`` it cites."""
    for variable in ("MOGATEWAY_ADMIN_TOKEN", "MOGATEWAY_TRUSTED_PROXIES", "MOGATEWAY_CONSOLE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("MOGATEWAY_CONSOLE_SESSION_MINUTES", raising=False)
    fields = Settings.model_fields
    named = {"admin_token", "trusted_proxies", "console_session_minutes"}
    for name in named:
        assert f"`{name}`" in TEXT and name in fields, name
    assert fields["admin_token"].default is None
    assert "`console_session_minutes` (8 hours by default)" in TEXT
    assert fields["console_session_minutes"].default == 8 * 60
    assert "(none by default, not even 127.0.0.1" in TEXT
    defaults = Settings()
    assert defaults.trusted_proxies == [] and defaults.console is True
    # The variables the page gives set those settings.
    assert "`console = false` (`MOGATEWAY_CONSOLE=false`)" in TEXT
    monkeypatch.setenv("MOGATEWAY_CONSOLE", "false")
    monkeypatch.setenv("MOGATEWAY_ADMIN_TOKEN", "a-token-of-the-doc-test-0123456789")
    monkeypatch.setenv("MOGATEWAY_TRUSTED_PROXIES", "127.0.0.1")
    changed = Settings()
    assert changed.console is False and changed.trusted_proxies == ["127.0.0.1"]
    assert changed.admin_token is not None
    assert changed.admin_token.get_secret_value() == "a-token-of-the-doc-test-0123456789"
    # Not gateway settings: a client's callback timeout and a bind's window.
    assert "`timeout_s`" in TEXT and "timeout_s" in ClientIn.model_fields
    assert "`window`" in TEXT and "window" in BindConfig.model_fields


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mogateway_command(), *args], capture_output=True, text=True, timeout=60)


def test_every_cli_command_shown_parses() -> None:
    """Each ``mogateway`` command of the page (its sh block and its inline code): its command path
    answers ``--help`` with exit 0 and lists every option the page gives it."""
    commands = [
        line.strip()
        for block in re.findall(r"```sh\n(.*?)```", TEXT, re.S)
        for line in block.splitlines()
        if line.startswith("mogateway ")
    ]
    commands += re.findall(r"`(mogateway [^`]+)`", TEXT)
    assert "mogateway console sessions revoke --all" in commands, commands
    assert {"mogateway top", "mogateway send", "mogateway serve"} <= set(commands), commands
    for command in dict.fromkeys(commands):
        words = command.split()[1:]
        path = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            path.append(word)
        shown = cli(*path, "--help")
        assert shown.returncode == 0, (command, shown.stderr)
        assert "Usage:" in shown.stdout and " ".join(path) in shown.stdout, (command, shown.stdout[:300])
        for option in re.findall(r"(--[a-z][a-z-]*)", command):
            assert option in shown.stdout, (command, option)


def test_the_session_cookie_and_the_page_headers_are_as_the_page_says(gw: ServedGateway) -> None:
    """A real sign-in sets ``mogateway_console``: HttpOnly, SameSite=Strict, Path=/console, lasting
    ``console_session_minutes`` (480 by default), not Secure over plain HTTP. Pages may not be framed
    and load from the gateway only; a POST that says it comes from another site is refused and changes
    nothing; *Sign out* ends the session at once."""
    said = " ".join(TEXT.split())
    assert "a cookie, `mogateway_console`, that scripts cannot read (`HttpOnly`)" in said
    assert (
        "(`SameSite=Strict`, path `/console`), marked `Secure` when the console is reached over HTTPS" in said
    )
    browser, answer = signed_in(gw)
    try:
        cookies = {h.split("=", 1)[0]: h for h in answer.headers.get_list("set-cookie")}
        assert "mogateway_console" in cookies, cookies
        value = cookies["mogateway_console"].split(";", 1)[0].split("=", 1)[1]
        attributes = {a.strip().lower() for a in cookies["mogateway_console"].split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/console", f"max-age={480 * 60}"} <= attributes, (
            attributes
        )
        assert "secure" not in attributes, attributes

        home = browser.get("/console/")
        assert home.status_code == 200
        policy = home.headers["content-security-policy"]
        for directive in (
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ):
            assert directive in policy, policy
        assert "`script-src 'self'`" in TEXT and home.headers["x-frame-options"] == "DENY"
        csrf = bar_of(home.text).signout_inputs["csrf"]

        # Another site's form, with the right token even: refused, and the session still opens pages.
        foreign = browser.post(
            "/console/logout", data={"csrf": csrf}, headers={"origin": "http://evil.example"}
        )
        assert foreign.status_code == 403, foreign.status_code
        assert browser.get("/console/").status_code == 200

        out = browser.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"].startswith("/console/login"), (
            out.status_code
        )
        # The old cookie, sent again on a new connection (any worker), opens nothing any more.
        with httpx.Client(base_url=gw.url, cookies={"mogateway_console": value}, timeout=30) as again:
            page = again.get("/console/")
            assert page.status_code == 303 and page.headers["location"].startswith("/console/login")
    finally:
        browser.close()


def test_the_numbers_of_the_sign_in_section_are_the_codes() -> None:
    """5 failed sign-ins per address within 5 minutes, at most 10,000 sessions kept, and the binding to
    the admin token from journal migration 0011: the page's figures are the code's."""
    said = " ".join(DOC.section("## Signing in").split())
    assert "After 5 failed sign-ins from one address within 5 minutes" in said
    throttle = SignInThrottle(store=None)  # type: ignore[arg-type]
    assert (throttle.per_address, throttle.window_s) == (5, 5 * 60)
    assert "at most 10,000 are kept" in said and MAX_SESSIONS == 10_000
    assert "(journal migration 0011)" in said
    assert "admin token it was opened with by a keyed hash of that token (migration 0011)" in " ".join(
        (ROOT / "src/mogateway/edges/storage/schema.py").read_text().replace("#", " ").split()
    )
