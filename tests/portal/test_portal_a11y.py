"""Every portal page (and the console's page of a client's portal people) for keyboard and screen-reader
users, at desktop and phone widths: labels, names, one h1 and ordered headings, contrast (the console's
checks, ``tests/console/a11y.js``), and nothing wider than the screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_harness import ServedGateway, sign_in
from playwright.sync_api import Page, expect

from mogateway.testing.recorder import CallbackRecorder

from .portal_harness import PASSWORD, invite

_A11Y = (Path(__file__).parents[1] / "console" / "a11y.js").read_text()


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_every_portal_page_is_labelled_ordered_readable_and_fits(
    gw: ServedGateway, app: CallbackRecorder, page: Page, viewport: dict[str, int]
) -> None:
    page.set_viewport_size(viewport)
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url, name="Alpha TV")
    message = gw.push("56767", "VOTE 7", msisdn="919810012345")
    gw.wait_state(message["id"])
    link = gw.url + invite(gw, client["id"], "ann@alpha.example")
    page.goto(link)
    assert page.evaluate(_A11Y) == [], "invite"
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    page.get_by_role("heading", level=1, name="Account").wait_for()

    def check(path: str, heading: str) -> None:
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        problems = page.evaluate(_A11Y)
        if problems:  # once more: the Overview's live figures may have been replaced mid-check
            page.wait_for_timeout(500)
            problems = page.evaluate(_A11Y)
        assert problems == [], path
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"{path} is {width} px wide on a {viewport['width']} px screen"

    for path, heading in (
        ("/portal/", "Overview"),
        ("/portal/messages", "Messages"),
        (f"/portal/messages/{message['id']}", "Messages"),
        ("/portal/callback", "Callback"),
        ("/portal/credentials", "Credentials"),
        ("/portal/reports", "Reports"),
        ("/portal/audit", "Audit"),
        ("/portal/account", "Account"),
    ):
        page.goto(gw.url + path)
        check(path, heading)
    page.goto(gw.url + "/portal/callback")
    page.get_by_role("button", name="Send test MO").click()
    expect(page.locator("#test-result [data-outcome]")).to_have_text("reply")
    check("/portal/callback (test result)", "Callback")
    page.goto(gw.url + "/portal/account")
    page.get_by_role("button", name="Turn on two-factor sign-in").click()
    # The heading reads "Account" before and after: wait for the setup page itself, styles loaded (a
    # width measured while its stylesheet loads is the unwrapped otpauth:// link's, 610 px in one run).
    page.get_by_label("Code from the app").wait_for()
    page.wait_for_load_state("load")
    check("/portal/account (two-factor setup)", "Account")
    page.goto(gw.url + "/portal/login")  # signed in: to the overview; signed out below
    page.get_by_role("button", name="Sign out", exact=True).click()
    check("/portal/login", "Sign in")
    sign_in(page, gw)
    page.goto(gw.url + f"/console/clients/{client['id']}/portal")
    check("/console/clients/<id>/portal", f"Portal of {client['name']}")
