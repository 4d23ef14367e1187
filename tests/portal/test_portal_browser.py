"""The portal in Chromium against ``mogateway serve`` with workers: accept an invite, turn TOTP on, sign
in with it, every page, test my endpoint, rotate the token, export a month with its progress bar, sign
out everywhere. With MOGATEWAY_PORTAL_SCREENSHOTS=<dir> it photographs each page there (docs/portal/)."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

from console_harness import ServedGateway
from playwright.sync_api import Browser, Page, expect

from mogateway.core import totp
from mogateway.testing.recorder import CallbackRecorder

from .portal_harness import PASSWORD, invite

SHOTS = os.environ.get("MOGATEWAY_PORTAL_SCREENSHOTS", "")


def shot(page: Page, name: str, phone: bool = False) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)
        if phone:
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(Path(SHOTS) / f"{name}-phone.png"), full_page=True)
            page.set_viewport_size({"width": 1280, "height": 800})


def sign_in(page: Page, url: str, email: str, code: str = "") -> None:
    page.goto(url + "/portal/login")
    page.get_by_label("E-mail address").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    if code:
        page.get_by_label("Authenticator code").fill(code)
    page.get_by_role("button", name="Sign in").click()


def test_the_portal_in_chromium(
    gw: ServedGateway, app: CallbackRecorder, page: Page, browser: Browser, tmp_path: Path
) -> None:
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url, name="Alpha TV", keywords=["VOTE"])
    other = gw.add_client(shortcodes=["56999"], callback_url=app.url, name="Bravo Bank")
    for n in range(3):
        gw.wait_state(gw.push("56767", f"VOTE {n + 1}", msisdn=f"9198100123{n}4")["id"])
    gw.wait_state(gw.push("56999", "BALANCE", msisdn="919810099999")["id"])
    email = "ann@alpha.example"
    link = gw.url + invite(gw, client["id"], email, "admin")

    # The invite: set a password, land on Account; turn two-factor sign-in on.
    page.goto(link)
    shot(page, "invite")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    page.get_by_role("heading", level=1, name="Account").wait_for()
    page.get_by_role("button", name="Turn on two-factor sign-in").click()
    secret = page.get_by_label("Key").input_value()
    raw = totp.from_base32(secret)
    shot(page, "totp-setup")
    page.get_by_label("Code from the app").fill(totp.totp(raw, time.time()))
    page.get_by_role("button", name="Turn on").click()
    expect(page.get_by_role("heading", name="Two-factor sign-in is on.")).to_be_visible()
    recovery = page.locator("ul.recovery li").all_inner_texts()
    assert len(recovery) == 10
    shot(page, "account")

    # Sign out, then in again with the TOTP code of the next step (the first was spent turning it on).
    page.get_by_role("button", name="Sign out", exact=True).click()
    page.get_by_role("heading", level=1, name="Sign in").wait_for()
    shot(page, "signin")
    sign_in(page, gw.url, email)
    expect(page.get_by_role("alert")).to_have_text("Wrong e-mail address, password or code.")
    sign_in(page, gw.url, email, totp.totp(raw, time.time() + 30))
    page.get_by_role("heading", level=1, name="Overview").wait_for()
    expect(page.locator('[data-figure="today-mo-in"]')).to_have_text("3")
    gw.wait_state(gw.push("56767", "VOTE 4", msisdn="919810012399")["id"])
    expect(page.locator('[data-figure="today-mo-in"]')).to_have_text("4", timeout=20_000)  # live, no reload
    assert "Bravo" not in page.content() and "56999" not in page.content()
    shot(page, "overview", phone=True)

    # Messages: the list (own messages only), one timeline.
    page.get_by_role("link", name="Messages").click()
    rows = page.locator("table.messages tbody tr")
    expect(rows).to_have_count(4)
    assert "919810099999" not in page.content()
    shot(page, "messages", phone=True)
    rows.first.get_by_role("link").click()
    page.get_by_role("heading", name="Timeline").wait_for()
    expect(page.locator(".status-line .state")).to_have_text("replied")
    shot(page, "message")

    # Callback: test my endpoint.
    page.get_by_role("link", name="Callback").click()
    page.get_by_role("button", name="Send test MO").click()
    result = page.locator("#test-result")
    expect(result.locator("[data-outcome]")).to_have_text("reply")
    expect(result.locator('[data-figure="would-reply"]')).to_contain_text("yes")
    expect(result.locator('[data-figure="reply"]')).to_have_text("Thanks for your vote")
    expect(result.locator("#answer-headers")).to_contain_text("content-type: text/plain; charset=utf-8")
    assert app.calls[-1].headers["authorization"] == f"Bearer {client['token']}"
    shot(page, "callback")

    # Credentials: rotate the bearer token with the default overlap; shown once.
    page.get_by_role("link", name="Credentials").click()
    page.get_by_role("button", name="Rotate token").click()
    new_token = page.get_by_role("textbox", name="New bearer token").input_value()
    assert len(new_token) >= 40 and new_token != client["token"]
    shot(page, "credentials")
    page.reload()
    assert new_token not in page.content()
    expect(page.get_by_text("A rotation is under way")).to_be_visible()

    # Reports: export the month, with the progress bar; the file has this client's rows only.
    page.get_by_role("link", name="Reports").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export the month").click()
    saved = tmp_path / "export.csv"
    download.value.save_as(saved)
    expect(page.locator("#export-status")).to_have_text("Done: 4 messages.")
    lines = saved.read_text().splitlines()
    assert lines[0].startswith("id,received_at,channel") and len(lines) == 5
    assert all(",56767," in line for line in lines[1:])
    assert download.value.suggested_filename == f"messages-{datetime.now().astimezone():%Y-%m}.csv"
    shot(page, "reports")

    # Audit: what this person changed.
    page.get_by_role("link", name="Audit").click()
    for what in ("bearer token rotated", "endpoint tested", "two-factor on", "password set", "invite"):
        expect(page.get_by_role("cell", name=what, exact=True).first).to_be_visible()
    shot(page, "audit")

    # Sign out everywhere: another browser of the same person is signed out too.
    second = browser.new_context().new_page()
    second.set_default_timeout(15_000)
    sign_in(second, gw.url, email, recovery[0])  # a recovery code instead of the app's
    second.get_by_role("heading", level=1, name="Overview").wait_for()
    page.get_by_role("button", name="Sign out everywhere").click()
    page.get_by_role("heading", level=1, name="Sign in").wait_for()
    second.reload()
    second.get_by_role("heading", level=1, name="Sign in").wait_for()
    second.context.close()
    assert other["id"] not in saved.read_text()
