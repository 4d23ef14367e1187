"""The console's message page shows a WhatsApp message's type and details (its callback member): media
file name, MIME type, size and caption; coordinates and place; contact cards; reaction and the wamid
reacted to; button and list row ids and titles; the replied-to wamid, forwarded flags and an ad's
referral. Every message comes in through the real signed webhook of a ``mogateway serve`` with several
workers; what the person wrote is escaped (a hostile caption, file name and names stay text)."""

from __future__ import annotations

import contextlib
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_harness import ServedGateway, served_gateway, sign_in
from gateway_harness import ADMIN_TOKEN
from playwright.sync_api import Page, expect

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder
from whatsapp.whatsapp_harness import APP_SECRET, BUSINESS, whatsapp_config

SENDER = "919812345678"
ASKED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSMDAwMDAwMDAwMDAwMDAwMDAxAA=="
REACTED = "wamid.HBgMOTE5ODEyMzQ1Njc4FQIAERgSQjI0RTk1OEY0RTJGRTk1RjU1AA=="
HOSTILE_CAPTION = "<script>window.pwned=1</script>\"'&amp;"
HOSTILE_FILE = '"><img src=x onerror="window.pwned=2">.pdf'
HOSTILE_NAME = "<b onmouseover=alert(3)>Ravi</b>"
_A11Y = (Path(__file__).parent / "a11y.js").read_text()


def _messages() -> dict[str, dict[str, object]]:
    return {
        "document": wh.replying_to(
            wh.document(
                SENDER,
                HOSTILE_FILE,
                caption=HOSTILE_CAPTION,
                file_size=303833,
                media_id="1003383421387259",
                mime_type="application/pdf",
            ),
            ASKED,
        ),
        "voice": wh.forwarded(wh.audio(SENDER, media_id="1003383421387257"), frequently=True),
        "location": wh.location(
            SENDER, 19.076, 72.8777, name="Gateway of India", address="Apollo Bandar, Colaba, Mumbai"
        ),
        "contacts": wh.contacts(
            SENDER, wh.contact_card(HOSTILE_NAME, "+91 98123 45679", wa_id="919812345679")
        ),
        "reaction": wh.reaction(SENDER, REACTED, "👍"),
        "button_reply": wh.button_reply(SENDER, "pay-1", "Pay now"),
        "list_reply": wh.list_reply(SENDER, "p299", "Plan 299", "2 GB/day"),
        "button": wh.quick_reply(SENDER, "Stop promotions", "STOP_PROMOS"),
        "order": wh.order(SENDER, "1537264876583739", wh.product_item("sku-101", 2, 149.5), text="by 6"),
        "ad": wh.with_referral(wh.text(SENDER, "I saw your ad"), headline="Pay your bill <now>"),
        "unsupported": wh.unsupported(SENDER, "poll"),
    }


class Gateway:
    def __init__(self, served: ServedGateway, ids: dict[str, str]) -> None:
        self.served = served
        self.ids = ids


@pytest.fixture(scope="module")
def wa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("console-wa-types")
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(Answer.text("Thanks")) as app:
        config = whatsapp_config(graph.url)
        with served_gateway(workdir / "gateway", config=config) as gw:
            gw.add_client(name="shop", shortcodes=[], whatsapp_numbers=[BUSINESS], callback_url=app.url)
            messages = _messages()
            with wh.WebhookSender(gw.url + "/v1/whatsapp/webhook", APP_SECRET) as meta:
                delivery = meta.send(*messages.values())
            assert delivery.status == 200, delivery.text
            ids = dict(zip(messages, json.loads(delivery.text)["ids"], strict=True))
            for message_id in ids.values():
                gw.wait_state(message_id)
            yield Gateway(gw, ids)


def _client(gw: ServedGateway) -> httpx.Client:
    client = httpx.Client(base_url=gw.url, timeout=10)
    form = client.get("/console/login").text
    found = re.search(r'name="csrf" value="([^"]+)"', form)
    assert found
    signed = client.post("/console/login", data={"csrf": found[1], "token": ADMIN_TOKEN})
    assert signed.status_code == 303, signed.text
    return client


def _facts(page: str) -> dict[str, str]:
    """The WhatsApp section's facts as label -> the text shown (unescaped once, as a browser shows it)."""
    section = re.search(r'<section aria-labelledby="wa-heading".*?</section>', page, re.S)
    assert section, "no WhatsApp section"
    pairs = re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", section[0], re.S)
    facts: dict[str, str] = {}
    for label, value in pairs:
        facts.setdefault(html.unescape(label), html.unescape(value))
    return facts


@pytest.fixture(scope="module")
def pages(wa: Gateway) -> dict[str, str]:
    with contextlib.closing(_client(wa.served)) as client:
        out = {}
        for name, message_id in wa.ids.items():
            page = client.get(f"/console/messages/{message_id}")
            assert page.status_code == 200, page.text[:300]
            out[name] = page.text
        return out


def test_a_document_shows_file_name_mime_size_caption_and_the_wamid_replied_to(pages: dict[str, str]) -> None:
    facts = _facts(pages["document"])
    assert facts["WhatsApp type"] == "document"
    assert facts["File name"] == HOSTILE_FILE and facts["Caption"] == HOSTILE_CAPTION
    assert facts["MIME type"] == "application/pdf"
    assert facts["Size"] == "296.7 KiB (303,833 bytes)"
    assert facts["Media id"] == "1003383421387259" and facts["In reply to"] == ASKED
    assert facts["Profile name"] == "Test User"


def test_what_the_person_wrote_is_escaped_never_markup(pages: dict[str, str]) -> None:
    page = pages["document"]
    assert HOSTILE_CAPTION not in page and HOSTILE_FILE not in page
    assert "<script>window.pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;&#34;&#39;&amp;amp;" in page
    contacts = pages["contacts"]
    assert HOSTILE_NAME not in contacts and "&lt;b onmouseover=alert(3)&gt;Ravi&lt;/b&gt;" in contacts
    assert "Pay your bill <now>" not in pages["ad"] and "Pay your bill &lt;now&gt;" in pages["ad"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("voice", {"WhatsApp type": "audio (voice note)", "Voice note": "yes", "Forwarded": "many times"}),
        (
            "location",
            {
                "WhatsApp type": "location",
                "Coordinates": "19.076, 72.8777",
                "Place": "Gateway of India",
                "Address": "Apollo Bandar, Colaba, Mumbai",
            },
        ),
        ("contacts", {"Contact": f"{HOSTILE_NAME}: +91 98123 45679 (WhatsApp 919812345679)"}),
        ("reaction", {"WhatsApp type": "reaction", "Reaction": "👍", "Reacted to": REACTED}),
        (
            "button_reply",
            {"WhatsApp type": "interactive (reply button)", "Button id": "pay-1", "Button title": "Pay now"},
        ),
        (
            "list_reply",
            {
                "WhatsApp type": "interactive (list row)",
                "List row id": "p299",
                "List row title": "Plan 299",
                "List row description": "2 GB/day",
            },
        ),
        ("button", {"Button payload": "STOP_PROMOS", "Button text": "Stop promotions"}),
        ("order", {"Catalog": "1537264876583739", "Item": "sku-101 × 2 at 149.5 INR", "Note": "by 6"}),
        (
            "ad",
            {
                "WhatsApp type": "text",
                "From an ad": "ad 120212345678901234",
                "Ad headline": "Pay your bill <now>",
                "Ad URL": "https://fb.me/3cr4Wqqkv",
            },
        ),
        (
            "unsupported",
            {
                "What it was": "poll",
                "Meta's error": "131051 Message type unknown: Message type is currently not supported.",
            },
        ),
    ],
)
def test_each_type_shows_its_details(pages: dict[str, str], name: str, expected: dict[str, str]) -> None:
    facts = _facts(pages[name])
    assert {k: facts.get(k) for k in expected} == expected, facts


def test_an_sms_page_has_no_whatsapp_section(wa: Gateway) -> None:
    gw = wa.served
    gw.add_client(name="sms", shortcodes=["56767"], callback_url="http://127.0.0.1:9/")
    sms = gw.push("56767", "VOTE 7", "919810012345")["id"]  # its page exists once it is stored
    with contextlib.closing(_client(gw)) as client:
        page = client.get(f"/console/messages/{sms}").text
    assert 'aria-labelledby="wa-heading"' not in page and "Channel" in page


@pytest.mark.browser
def test_the_browser_shows_the_section_runs_no_injected_script_and_stays_accessible(
    wa: Gateway, page: Page
) -> None:
    sign_in(page, wa.served)
    page.goto(wa.served.url + f"/console/messages/{wa.ids['document']}")
    section = page.locator("section", has=page.get_by_role("heading", name="WhatsApp message"))
    expect(section).to_contain_text("File name")
    expect(section).to_contain_text(HOSTILE_FILE)  # shown as text...
    expect(section).to_contain_text(HOSTILE_CAPTION)
    assert page.evaluate("window.pwned") is None  # ...never run
    assert section.locator("img, script").count() == 0
    assert page.evaluate(_A11Y) == []
    page.goto(wa.served.url + f"/console/messages/{wa.ids['location']}")
    expect(page.locator("dl[data-whatsapp-type=location]")).to_contain_text("19.076, 72.8777")


# ------------------------------------------------------------------------------------ the facts, unit


def _members() -> list[dict[str, object]]:
    """The member of each message of tests/fixtures/whatsapp/every_type.json, as the gateway makes it."""
    from mogateway.core.whatsapp_member import build_member

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "whatsapp" / "every_type.json"
    value = json.loads(fixture.read_text())["entry"][0]["changes"][0]["value"]
    return [build_member(m, "Asha") for m in value["messages"]]


def test_every_member_of_meta_s_shapes_gives_its_facts() -> None:
    from mogateway.api.console.whatsapp_view import whatsapp_facts

    seen = {}
    for member in _members():
        facts = whatsapp_facts(member)
        assert facts[0][0] == "WhatsApp type" and facts[1] == ("Profile name", "Asha", "text")
        assert all(isinstance(value, str) and value for _, value, _ in facts), facts
        shown: dict[str, str] = {}
        for label, value, _ in facts:  # a label that repeats (items, contacts): its values joined
            shown[label] = f"{shown[label]} | {value}" if label in shown else value
        seen[str(member["wamid"])[-4:]] = shown
    assert seen["0002"]["Ad headline"] == "Pay your bill on WhatsApp"
    assert seen["0003"]["Forwarded"] == "yes"  # "frequently_forwarded": "yes" is not a boolean: dropped
    assert seen["0004"]["WhatsApp type"] == "audio (voice note)"
    assert (
        seen["0006"]["File name"] == "statement-nov.pdf"
        and seen["0006"]["Size"] == "296.7 KiB (303,833 bytes)"
    )
    assert "Animated" not in seen["0007"] and seen["0007"]["MIME type"] == "image/webp"
    assert seen["0008"]["Coordinates"] == "19.076, 72"
    assert seen["0009"]["Contact"] == (
        "Ravi Kumar: +91 98123 45679 (WhatsApp 919812345679), ravi@example.in, Example Ltd"
    )
    assert seen["0011"]["Reaction"] == "(removed)"
    assert seen["0012"]["In reply to"].startswith("wamid.")
    assert seen["0014"]["Flow answer"] == '{"flow_token": "t-1", "rating": "5"}'
    # "quantity": "1" is an integer as a digit string: written as a number
    assert seen["0016"]["Item"] == "sku-101 × 2 at 149.5 INR | sku-102 × 1 at 99 INR"
    assert (
        seen["0017"]["Notice"] == "user_changed_number" and seen["0017"]["New WhatsApp id"] == "919812345680"
    )
    assert seen["0018"]["What it was"] == "edit"
    assert seen["0019"] == {"WhatsApp type": "poll_vote", "Profile name": "Asha"}  # a type not known here


def test_no_member_no_facts_and_odd_shapes_never_fail() -> None:
    from mogateway.api.console.whatsapp_view import whatsapp_facts

    assert whatsapp_facts(None) == [] and whatsapp_facts([1]) == []
    odd = {"type": "image", "image": [], "context": "x", "referral": {"source_type": 3}}
    assert whatsapp_facts(odd) == [("WhatsApp type", "image", "plain"), ("From an ad", "yes", "plain")]
