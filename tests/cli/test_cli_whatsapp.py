"""The CLI's listings with WhatsApp messages and numbers, through typer's runner against a real gateway
on loopback: ``messages list --channel`` and its ``ch`` column within 80 columns, ``messages show``'s
channel, ``clients list``'s ``wa:`` numbers. The gateway is ``mogateway serve`` with its default workers
(at least two), shared by the module: its figures count this module's messages alone."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, ServeGateway, serve_gateway
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder

APP_SECRET = "app-secret-for-tests-0123456789"
PNID = "106540352242922"  # the fake's default cloud number
BUSINESS = "919876543210"
SC = "56767"
FINAL = frozenset({"replied"})


@dataclass
class Stack:
    gw: ServeGateway
    sms: str
    whatsapp: str
    wamid: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with (
        FakeGraphServer() as graph,
        CallbackRecorder.in_thread(Answer.text("Thanks")) as app,
        serve_gateway(
            tmp_path_factory.mktemp("cli"),
            whatsapp={
                "app_secret": APP_SECRET,
                "verify_token": "verify-token-for-tests",
                "graph_url": graph.url,
                "numbers": [
                    {
                        "phone_number_id": PNID,
                        "display_phone_number": BUSINESS,
                        "access_token": "rehearsal-token",
                    }
                ],
            },
        ) as gw,
        wh.WebhookSender(gw.url + "/v1/whatsapp/webhook", APP_SECRET) as meta,
    ):
        gw.add_client(name="both", shortcodes=[SC], whatsapp_numbers=[BUSINESS], callback_url=app.url)
        sms = gw.push(SC, "VOTE for the evening show, and tell my friends", "919812345601")["id"]
        text = wh.text("919812345602", "HELLO from WhatsApp, a longer text than fits")
        delivery = meta.send(text)
        assert delivery.status == 200, delivery.text
        (whatsapp,) = json.loads(delivery.text)["ids"]
        for message_id in (sms, whatsapp):
            gw.wait_state(message_id, FINAL)
        yield Stack(gw, sms, whatsapp, text["id"])


def run(gw: ServeGateway, *args: str, columns: int = 200) -> Any:
    env = {
        "MOGATEWAY_URL": gw.url,
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
        "COLUMNS": str(columns),
    }
    return CliRunner().invoke(cli, list(args), env=env)


def test_messages_list_marks_the_channel_within_80_columns_and_filters_by_it(stack: Stack) -> None:
    result = run(stack.gw, "messages", "list", columns=80)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    assert re.match(r"id +received +from +ch +state +message", lines[0]), lines[0]
    (wa,) = [line for line in lines if line.startswith(stack.whatsapp)]
    (sms,) = [line for line in lines if line.startswith(stack.sms)]
    assert re.match(rf"{stack.whatsapp} \d\d:\d\d:\d\d +919812345602 wa +replied +HELLO", wa), wa
    assert re.match(rf"{stack.sms} \d\d:\d\d:\d\d +919812345601 sms +replied +VOTE", sms), sms

    only = run(stack.gw, "messages", "list", "--channel", "whatsapp", "--json")
    assert only.exit_code == 0, only.stderr
    assert [m["id"] for m in json.loads(only.stdout)["messages"]] == [stack.whatsapp]
    only = run(stack.gw, "messages", "list", "--channel", "sms", "--json")
    assert [m["id"] for m in json.loads(only.stdout)["messages"]] == [stack.sms]
    sms_only = run(stack.gw, "messages", "list", "--channel", "sms", columns=80).stdout
    assert " ch " not in sms_only.splitlines()[0]  # SMS alone lists as it did before channels

    refused = run(stack.gw, "messages", "list", "--channel", "fax")
    assert refused.exit_code != 0
    assert "channel: must be one of sms, whatsapp" in refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr


def test_messages_show_names_the_channel_and_the_wamid(stack: Stack) -> None:
    shown = run(stack.gw, "messages", "show", stack.whatsapp).stdout
    assert re.search(rf"channel +whatsapp \(origin whatsapp:{PNID}, wamid {re.escape(stack.wamid)}\)", shown)
    assert "whatsapp text" in shown  # the timeline's notes
    # The callback's member: the type and its details.
    assert re.search(r"whatsapp +text \{", shown)
    assert '"text":{"body":"HELLOfromWhatsApp' in re.sub(r"\s+", "", shown)  # however rich wraps it
    assert "whatsapp" not in run(stack.gw, "messages", "show", stack.sms).stdout
    assert re.search(r"channel +sms *\n", run(stack.gw, "messages", "show", stack.sms).stdout)


def test_clients_list_shows_whatsapp_numbers_beside_shortcodes(stack: Stack) -> None:
    listed = run(stack.gw, "clients", "list", columns=200)
    assert listed.exit_code == 0, listed.stderr
    assert f"{SC}, wa:{BUSINESS}" in listed.stdout


def test_top_shows_mo_in_by_channel_once_a_whatsapp_message_came(stack: Stack) -> None:
    # each worker samples its counters once a second and the figures sum the workers' samples: poll
    # until every worker's MO is in them
    deadline = time.monotonic() + 10
    while True:
        screen = run(stack.gw, "top", "--once", "--window", "1h", columns=120)
        assert screen.exit_code == 0, screen.stderr
        lines = screen.stdout.splitlines()
        header = next((line for line in lines if "MO in" in line and "p99" in line), "")
        values = lines[lines.index(header) + 1].split() if header else []
        if "WhatsApp" in header and values[:3] == ["2", "1", "1"]:  # MO in, SMS, WhatsApp
            break
        assert time.monotonic() < deadline, screen.stdout
        time.sleep(0.2)
