"""The console in a real browser (Debian's Chromium through Playwright) against a real gateway on loopback:
``mogateway serve`` with several worker processes (the default), so the browser's connections reach
either worker, as they do for an operator.

Each test drives the pages as a support engineer would: sign in, watch figures move, find a message,
replay it, manage a client, watch a bind drop and come back. Nothing may be fetched from another host.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from console_harness import Outside, ServedGateway, SmscThread, served_gateway, sign_in
from gateway_harness import ADMIN_TOKEN, free_port
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect

from mogateway.testing.recorder import CallbackRecorder

pytestmark = pytest.mark.browser

MSISDN = "919810012345"


def test_sign_in_refuses_a_wrong_token_and_the_session_is_a_strict_httponly_cookie(
    gw: ServedGateway, page: Page
) -> None:
    page.goto(gw.url + "/console/")
    expect(page).to_have_url(re.compile(r"/console/login\?next="))  # not signed in: to the sign-in page
    page.get_by_label("Admin token").fill("not-the-token-at-all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("That is not the admin token.")
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    assert [c for c in page.context.cookies() if c["name"] == "mogateway_console"] == []

    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "mogateway_console"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/console"
    assert time.time() < cookie["expires"] <= time.time() + 8 * 3600 + 60  # expires, after 8 h by default
    assert page.evaluate("document.cookie") == ""  # scripts cannot read it

    page.get_by_role("button", name="Sign out", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    page.goto(gw.url + "/console/clients")
    expect(page).to_have_url(re.compile(r"/console/login"))


def test_overview_counts_a_pushed_mo_live_without_reload(
    gw: ServedGateway, app: CallbackRecorder, page: Page
) -> None:
    gw.add_client(name="vote", shortcodes=["56767"], callback_url=app.url)
    sign_in(page, gw)
    expect(page.locator("#outcome-reply")).to_have_text("0")
    page.evaluate("window.notReloaded = true")

    gw.wait_state(gw.push("56767", "VOTE 7", MSISDN)["id"])

    expect(page.locator("#outcome-reply")).to_have_text("1", timeout=10_000)
    expect(page.locator("#today-mo-in")).to_have_text("1")
    expect(page.locator("#today-replies")).to_have_text("1")
    assert page.evaluate("window.notReloaded") is True  # it changed in place: the page never reloaded
    chart = page.get_by_role("img", name=re.compile("MO in and replies out per second"))
    expect(chart).to_be_visible()
    assert page.locator("#traffic polyline.in").get_attribute("points")


def test_messages_search_timeline_and_replay(gw: ServedGateway, app: CallbackRecorder, page: Page) -> None:
    client = gw.add_client(name="vote", shortcodes=["56767"], callback_url=app.url)
    pushed = gw.push("56767", "VOTE 7", MSISDN)
    gw.wait_state(pushed["id"])
    gw.push("56767", "VOTE 8", "919812345678")
    sign_in(page, gw)

    page.get_by_role("link", name="Messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Messages")
    page.get_by_label("Sender (msisdn)").fill(MSISDN)
    page.get_by_label("Client").select_option(client["id"])
    page.get_by_role("button", name="Search").click()
    rows = page.locator("table.messages tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("VOTE 7")

    rows.first.get_by_role("link").click()
    expect(page.get_by_role("heading", level=2, name=re.compile("Message"))).to_contain_text(pushed["id"])
    timeline = page.locator("ol.timeline")
    for kind in ("received", "stored", "routed", "attempt", "outcome", "reply submitted"):
        expect(timeline).to_contain_text(kind)
    callback = page.locator("section", has=page.get_by_role("heading", name="Callback"))
    expect(callback).to_contain_text("200")
    expect(callback).to_contain_text("vote")
    expect(page.locator("section", has=page.get_by_role("heading", name="Reply"))).to_contain_text(
        "Thanks for your vote"
    )

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Replay").click()
    expect(page.get_by_role("status")).to_contain_text("Replayed")
    expect(timeline).to_contain_text("replay")
    deadline = time.monotonic() + 10
    while page.locator("ol.timeline li.outcome").count() < 2:  # the callback ran again
        assert time.monotonic() < deadline
        page.reload()
    assert [c.json()["message"] for c in app.calls].count("VOTE 7") == 2


def test_keyset_paging_walks_every_message_once(gw: ServedGateway, page: Page) -> None:
    ids = [gw.push("51111", f"NOBODY {n}", MSISDN)["id"] for n in range(53)]
    sign_in(page, gw)
    page.goto(gw.url + "/console/messages?shortcode=51111")
    seen: list[str] = []
    for _ in range(3):
        links = page.locator("table.messages tbody a")
        seen.extend(href.rsplit("/", 1)[1] for href in links.evaluate_all("els => els.map(e => e.href)"))
        older = page.get_by_role("link", name="Older messages")
        if older.count() == 0:
            break
        assert "before=" in (older.get_attribute("href") or "")
        with page.expect_navigation():  # read the next page only once it is the one shown
            older.click()
    assert sorted(seen) == sorted(ids) and len(seen) == 53


def test_clients_token_shown_once_rotate_test_mo_change_and_remove(
    gw: ServedGateway, app: CallbackRecorder, page: Page
) -> None:
    sign_in(page, gw)
    page.get_by_role("link", name="Clients").click()
    page.get_by_label("Name").fill("tv vote")
    page.get_by_label("Shortcodes").fill("56767")
    page.get_by_label("Callback URL").fill(app.url)
    page.get_by_label("Keywords").fill("VOTE")
    page.get_by_role("button", name="Add client").click()

    shown = page.get_by_label("Token of tv vote", exact=True)
    expect(shown).to_be_visible()
    token = shown.input_value()
    assert len(token) >= 32
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == token
    page.reload()
    expect(page.get_by_label("Token of tv vote", exact=True)).to_have_count(0)  # once only
    assert token not in page.content()

    row = page.locator("tr", has_text="tv vote")
    row.get_by_text("Send test MO").click()
    row.get_by_label("Sender (msisdn)").fill(MSISDN)
    expect(row.get_by_label("Text")).to_have_value("VOTE TEST")
    page.evaluate("window.notReloaded = true")
    row.get_by_role("button", name="Send test MO to tv vote").click()
    expect(row.locator(".test-result")).to_contain_text("replied", timeout=15_000)
    expect(row.locator(".test-result")).to_contain_text("Thanks for your vote")
    assert page.evaluate("window.notReloaded") is True  # the outcome came inline
    assert app.calls[-1].headers["authorization"] == f"Bearer {token}"  # the token shown is the real one

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Rotate the token of tv vote").click()
    rotated = page.get_by_label("Token of tv vote", exact=True).input_value()
    assert rotated != token and len(rotated) >= 32
    row = page.locator("tr", has_text="tv vote")
    row.get_by_text("Send test MO").click()
    row.get_by_label("Sender (msisdn)").fill(MSISDN)
    row.get_by_role("button", name="Send test MO to tv vote").click()
    expect(row.locator(".test-result")).to_contain_text("replied", timeout=15_000)
    assert app.calls[-1].headers["authorization"] == f"Bearer {rotated}"

    row.get_by_role("link", name="Change tv vote").click()
    page.get_by_label("Name").fill("tv vote 2")
    page.get_by_label("Shortcodes").fill("not-a-shortcode")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("shortcode")  # the API's own refusal, shown
    page.get_by_label("Shortcodes").fill("56767, 56768")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Client tv vote 2 saved.")
    expect(page.locator("tr", has_text="tv vote 2")).to_contain_text("56767, 56768")

    page.get_by_role("link", name="Remove tv vote 2").click()
    expect(page.get_by_role("heading", name="Remove tv vote 2?")).to_be_visible()
    page.get_by_role("button", name="Remove tv vote 2").click()
    expect(page.get_by_role("status")).to_have_text("Client tv vote 2 removed.")
    assert gw.admin("GET", "/v1/clients").json()["clients"] == []


def test_binds_page_shows_a_bind_go_up_down_and_up(page: Page, tmp_path: Path) -> None:
    port = free_port()
    config = f"""
[[smpp.binds]]
name = "airtel-dl"
host = "127.0.0.1"
port = {port}
system_id = "gw"
password = "pw"
operator = "airtel"
window = 7
"""
    smsc = SmscThread(port)
    try:
        with served_gateway(tmp_path / "gateway", config=config) as gw:
            sign_in(page, gw)
            expect(page.locator("#binds-down")).to_have_text("1")
            page.get_by_role("link", name="Binds").click()
            expect(page.get_by_role("heading", level=1)).to_have_text("Binds")
            row = page.locator("#bind-airtel-dl")
            expect(row.locator("[data-state]")).not_to_have_text("bound")
            page.evaluate("window.notReloaded = true")

            simulator = smsc.start()
            expect(row.locator("[data-state]")).to_have_text("bound", timeout=20_000)
            expect(row).to_contain_text("0 of 7")
            smsc.run(simulator.inject_mo(MSISDN, "56767", "HELLO"))
            expect(row.locator("td[data-label='MOs, 1 min']")).to_have_text("1")

            smsc.stop()
            expect(row.locator("[data-state]")).not_to_have_text("bound", timeout=10_000)
            expect(row.locator("td[data-label='Last error']")).not_to_have_text("none")
            smsc.start()
            expect(row.locator("[data-state]")).to_have_text("bound", timeout=20_000)
            expect(row.locator("td[data-label='Connects']")).to_have_text("2")
            assert page.evaluate("window.notReloaded") is True
            page.close()  # ends the live stream before the gateway stops
    finally:
        smsc.close()


def test_a_state_changing_post_without_the_csrf_token_is_refused(gw: ServedGateway, page: Page) -> None:
    sign_in(page, gw)
    request = page.context.request  # the signed-in browser's cookies
    body = {"name": "x", "shortcodes": "56767", "callback_url": "http://127.0.0.1:9/"}
    for form in (body, {**body, "csrf": "forged"}):
        refused = request.post(gw.url + "/console/clients", form=form, max_redirects=0)
        assert refused.status == 403
        assert "Nothing was changed" in refused.text()
    page.goto(gw.url + "/console/clients")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    forged = request.post(
        gw.url + "/console/clients",
        form={**body, "csrf": csrf},
        headers={"origin": "http://evil.example"},
        max_redirects=0,
    )
    assert forged.status == 403  # right token, but the browser says it came from another site
    assert gw.admin("GET", "/v1/clients").json()["clients"] == []
    accepted = request.post(gw.url + "/console/clients", form={**body, "csrf": csrf}, max_redirects=0)
    assert accepted.status == 303  # the same form with its token goes through
    assert len(gw.admin("GET", "/v1/clients").json()["clients"]) == 1


_A11Y = (Path(__file__).parent / "a11y.js").read_text()


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_every_page_has_labels_ordered_headings_contrast_focus_and_fits_a_phone(
    gw: ServedGateway, app: CallbackRecorder, viewport: dict[str, int], page: Page
) -> None:
    client = gw.add_client(name="vote", shortcodes=["56767"], callback_url=app.url)
    message = gw.push("56767", "VOTE 7", MSISDN)
    gw.wait_state(message["id"])
    page.goto(gw.url + "/console/login")
    assert page.evaluate(_A11Y) == []
    sign_in(page, gw)
    for path, heading in (
        ("/console/", "Overview"),
        ("/console/clients", "Clients"),
        (f"/console/clients/{client['id']}", "Clients"),
        (f"/console/clients/{client['id']}/remove", "Clients"),
        ("/console/messages", "Messages"),
        (f"/console/messages/{message['id']}", "Messages"),
        ("/console/binds", "Binds"),
    ):
        page.goto(gw.url + path)
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        page.locator("details").evaluate_all("els => els.forEach(d => d.open = true)")
        assert page.evaluate(_A11Y) == [], path
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"{path} is {width} px wide on a {viewport['width']} px screen"
        nav = page.get_by_role("navigation", name="Console")
        for name in ("Overview", "Clients", "Messages", "Binds"):
            expect(nav.get_by_role("link", name=name)).to_be_visible()
    page.goto(gw.url + "/console/clients")
    page.keyboard.press("Tab")  # the first stop is the skip link, then the navigation
    page.keyboard.press("Tab")
    focused = page.evaluate(
        "() => [getComputedStyle(document.activeElement).outlineStyle,"
        " getComputedStyle(document.activeElement).outlineWidth]"
    )
    assert focused[0] != "none" and float(focused[1].removesuffix("px")) >= 2  # focus is visible


def test_api_docs_and_reference_load_with_no_internet(gw: ServedGateway, page: Page) -> None:
    refused: list[str] = []  # what the pages' Content-Security-Policy stopped: nothing of their own
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(gw.url + "/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("mogateway")
    expect(page.get_by_text("/v1/stats").first).to_be_visible()
    page.goto(gw.url + "/redoc")
    expect(page.get_by_role("heading", name=re.compile("mogateway"))).to_be_visible(timeout=20_000)
    page.get_by_placeholder("Search...").fill("stats")  # Redoc's search runs in a worker
    expect(page.get_by_role("search").get_by_role("menuitem").first).to_be_visible()
    assert refused == []
    # the guard of the page fixture fails the test if either asked a CDN or a font service


def test_the_guard_catches_a_request_to_another_host(gw: ServedGateway, outside: Outside, page: Page) -> None:
    page.goto(gw.url + "/console/login")
    # The console's Content-Security-Policy already stops a script's fetch to another host...
    page.evaluate("fetch('http://cdn.example.invalid/lib.js').catch(() => null)")
    page.wait_for_timeout(200)
    assert outside.urls == []
    # ...so to see the guard at work, navigate there: the request is aborted before it leaves.
    with pytest.raises(PlaywrightError):
        page.goto("http://cdn.example.invalid/lib.js")
    assert outside.urls == ["http://cdn.example.invalid/lib.js"]
    outside.urls.clear()  # seen; the fixture's own check would fail the test otherwise


def test_the_accessibility_check_finds_what_it_looks_for(page: Page) -> None:
    page.set_content(
        "<h2>first</h2><h4>skipped</h4><input name=q><button></button>"
        "<p style='color:#aaa;background:#fff'>pale</p>"
    )
    problems = " | ".join(page.evaluate(_A11Y))
    for expected in ("no label", "no name", "one h1 first", "heading skips", "contrast"):
        assert expected in problems
