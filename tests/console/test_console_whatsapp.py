"""WhatsApp in the console, in a real browser against ``mogateway serve`` with several workers: the
messages' channel column and filter, a WhatsApp message's page (channel, wamid, media notes), and the
client form's WhatsApp numbers. The WhatsApp messages come in through the real webhook, signed as Meta
signs them with the app secret of the gateway's ``[whatsapp]`` settings; the fake Graph API takes
the replies."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_harness import ServedGateway, served_gateway, sign_in
from playwright.sync_api import Page, expect

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import CallbackRecorder
from whatsapp.whatsapp_harness import APP_SECRET, BUSINESS, whatsapp_config

pytestmark = pytest.mark.browser

WA_SENDER = "919812345678"
SMS_SENDER = "919810012345"
SC = "56767"
_A11Y = (Path(__file__).parent / "a11y.js").read_text()


@pytest.fixture
def graph() -> Iterator[FakeGraphServer]:
    with FakeGraphServer() as fake:
        yield fake


@pytest.fixture
def gw(tmp_path: Path, graph: FakeGraphServer) -> Iterator[ServedGateway]:
    with served_gateway(tmp_path / "gateway", config=whatsapp_config(graph.url)) as gateway:
        yield gateway


def _whatsapp(gw: ServedGateway, *messages: dict[str, object]) -> list[str]:
    with wh.WebhookSender(gw.url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
        delivery = meta.send(*messages)
    assert delivery.status == 200, delivery.text
    ids: list[str] = json.loads(delivery.text)["ids"]
    for message_id in ids:
        gw.wait_state(message_id)
    return ids


def test_messages_show_and_filter_the_channel_and_a_whatsapp_message_its_wamid_and_media(
    gw: ServedGateway, app: CallbackRecorder, page: Page
) -> None:
    gw.add_client(name="shop", shortcodes=[SC], whatsapp_numbers=[BUSINESS], callback_url=app.url)
    sms = gw.push(SC, "VOTE 7", SMS_SENDER)["id"]
    gw.wait_state(sms)
    image = wh.media(WA_SENDER, "image", caption="my bill", media_id="1003383421387123")
    (wa,) = _whatsapp(gw, image)
    sign_in(page, gw)

    page.get_by_role("link", name="Messages").click()
    rows = page.locator("table.messages tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("table.messages thead")).to_contain_text("Channel")
    expect(page.locator("tr", has_text="my bill").locator("[data-channel]")).to_have_text("WhatsApp")
    expect(page.locator("tr", has_text="VOTE 7").locator("[data-channel]")).to_have_text("SMS")

    page.get_by_label("Channel").select_option("whatsapp")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"channel=whatsapp"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("my bill")
    expect(page.get_by_label("Channel")).to_have_value("whatsapp")  # the filter stays chosen
    page.get_by_label("Channel").select_option("sms")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("VOTE 7")

    page.goto(gw.url + "/console/messages?channel=whatsapp")
    rows.first.get_by_role("link").click()
    expect(page.get_by_role("heading", level=2, name=re.compile("Message"))).to_contain_text(wa)
    facts = page.locator("section", has=page.get_by_role("heading", name=re.compile("^Message"))).locator(
        "dl"
    )
    expect(facts).to_contain_text("WhatsApp number")
    expect(facts).to_contain_text(BUSINESS)
    expect(facts.locator("dd[data-channel]")).to_have_text("WhatsApp")
    expect(facts).to_contain_text(str(image["id"]))  # the wamid
    expect(facts).to_contain_text("whatsapp image; media id 1003383421387123 (image/jpeg)")
    reply = page.locator("section", has=page.get_by_role("heading", name="Reply"))
    expect(reply).to_contain_text("whatsapp")  # handed to the WhatsApp channel
    assert page.evaluate(_A11Y) == []

    page.goto(gw.url + f"/console/messages/{sms}")
    expect(page.locator("dd[data-channel]")).to_have_text("SMS")
    expect(page.locator("dl.facts").first).not_to_contain_text("wamid")


def test_the_client_form_takes_whatsapp_numbers_beside_shortcodes(
    gw: ServedGateway, app: CallbackRecorder, page: Page
) -> None:
    sign_in(page, gw)
    page.get_by_role("link", name="Clients").click()
    page.get_by_label("Name").fill("shop")
    page.get_by_label("Callback URL").fill(app.url)
    page.get_by_role("button", name="Add client").click()  # neither a shortcode nor a number
    expect(page.get_by_role("alert")).to_contain_text("at least one shortcode or WhatsApp number")
    expect(page.get_by_label("Name")).to_have_value("shop")  # what was typed is kept
    page.get_by_label("WhatsApp numbers").fill("12345")
    page.get_by_role("button", name="Add client").click()
    expect(page.get_by_role("alert")).to_contain_text("'12345' is not a WhatsApp number")
    page.get_by_label("WhatsApp numbers").fill("+91 98765 43210")  # one number, spaces and all
    page.get_by_role("button", name="Add client").click()
    expect(page.get_by_label("Token of shop", exact=True)).to_be_visible()

    row = page.locator("tr", has_text="shop")
    expect(row.get_by_role("cell").nth(1)).to_have_text(f"WhatsApp {BUSINESS}")
    expect(row).to_contain_text("Test MOs are SMS")  # no shortcode: no SMS test MO
    (client,) = gw.admin("GET", "/v1/clients").json()["clients"]
    assert client["whatsapp_numbers"] == [BUSINESS] and client["shortcodes"] == []

    # a WhatsApp message reaches it through the webhook
    (wa,) = _whatsapp(gw, wh.text(WA_SENDER, "HELLO"))
    assert gw.message(wa)["client_id"] == client["id"]
    assert [c.json()["message"] for c in app.calls] == ["HELLO"]

    row.get_by_role("link", name="Change shop").click()
    expect(page.get_by_label("WhatsApp numbers")).to_have_value(BUSINESS)
    page.get_by_label("WhatsApp numbers").fill(f"{BUSINESS}, 0123")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("'0123' is not a WhatsApp number")
    page.get_by_label("Shortcodes").fill(SC)
    page.get_by_label("WhatsApp numbers").fill(f"{BUSINESS}, 919876543299")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Client shop saved.")
    row = page.locator("tr", has_text="shop")
    expect(row.get_by_role("cell").nth(1)).to_contain_text(SC)
    expect(row.get_by_role("cell").nth(1)).to_contain_text(f"WhatsApp {BUSINESS}, 919876543299")
    expect(row.get_by_text("Send test MO")).to_be_visible()  # a shortcode now: SMS test MOs

    row.get_by_role("link", name="Change shop").click()
    page.get_by_label("WhatsApp numbers").fill("")  # emptied: WhatsApp numbers removed
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Client shop saved.")
    (client,) = gw.admin("GET", "/v1/clients").json()["clients"]
    assert client["whatsapp_numbers"] == [] and client["shortcodes"] == [SC]
    row = page.locator("tr", has_text="shop")
    row.get_by_role("link", name="Change shop").click()
    page.get_by_label("Shortcodes").fill("")  # and now nothing: refused
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("at least one shortcode or WhatsApp number")
    assert gw.admin("GET", "/v1/clients").json()["clients"][0]["shortcodes"] == [SC]
    assert page.evaluate(_A11Y) == []
