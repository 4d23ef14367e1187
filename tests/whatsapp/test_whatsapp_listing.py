"""WhatsApp messages where SMS ones are looked at: ``GET /v1/messages?channel=``, the MO counters of
``/metrics`` by channel and ``/v1/stats``'s figures by channel. A real gateway on loopback, WhatsApp
messages put in through the signed webhook (the fake Graph API takes the replies), SMS ones through
the ingest API. The gateway is ``mogateway serve`` with its default workers (at least two), shared by the
module: the requests reach any worker, and the figures are what every worker saw together."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ServeGateway, metric, serve_gateway

APP_SECRET = "app-secret-for-tests-0123456789"
PNID = "106540352242922"  # the fake's default cloud number
BUSINESS = "919876543210"
SC = "56767"
FINAL = frozenset({"replied", "no_reply", "rejected", "failed", "reply_failed"})


def whatsapp_settings(graph_url: str) -> dict[str, Any]:
    """The gateway's ``[whatsapp]`` settings."""
    number = {"phone_number_id": PNID, "display_phone_number": BUSINESS, "access_token": "rehearsal-token"}
    return {
        "app_secret": APP_SECRET,
        "verify_token": "verify-token-for-tests",
        "graph_url": graph_url,
        "numbers": [number],
    }


@dataclass
class Traffic:
    gw: ServeGateway
    sms: list[str]  # ids: accepted, accepted, rejected (a sender outside India)
    whatsapp: list[str]  # ids: a text, an image, a rejected one (a sender outside India)


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    workdir = tmp_path_factory.mktemp("listing")
    with (
        FakeGraphServer() as graph,
        CallbackRecorder.in_thread(Answer.text("Thanks")) as app,
        serve_gateway(workdir, whatsapp=whatsapp_settings(graph.url)) as gw,
        wh.WebhookSender(gw.url + "/v1/whatsapp/webhook", APP_SECRET) as meta,
    ):
        gw.add_client(name="both", shortcodes=[SC], whatsapp_numbers=[BUSINESS], callback_url=app.url)
        sms = [gw.push(SC, "VOTE 1")["id"], gw.push(SC, "VOTE 2", "919812345679")["id"]]
        foreign = gw.ingest(
            "POST", "/v1/inbound", json={"shortcode": SC, "msisdn": "14155550123", "message": "V"}
        )
        assert foreign.status_code == 422  # not Indian: stored as rejected
        sms.append(foreign.json()["id"])
        text = wh.text("919812345678", "HELLO")
        delivery = meta.send(
            text,
            wh.media("919812345678", "image", caption="my bill", media_id="1003383421387123"),
            wh.text("14155550123", "HI"),  # not Indian: rejected, still answered 200
        )
        assert delivery.status == 200, delivery.text
        whatsapp: list[str] = json.loads(delivery.text)["ids"]
        # Meta delivers the text again, on a connection of its own (which may reach another worker)
        with wh.WebhookSender(gw.url + "/v1/whatsapp/webhook", APP_SECRET) as again:
            assert again.send(text).status == 200  # a duplicate
        for message_id in sms + whatsapp:
            gw.wait_state(message_id, FINAL)
        yield Traffic(gw, sms, whatsapp)


def _ids(gw: ServeGateway, **params: str) -> list[str]:
    answer = gw.admin("GET", "/v1/messages", params=params)
    assert answer.status_code == 200, answer.text
    return [m["id"] for m in answer.json()["messages"]]


def test_messages_are_listed_by_channel(traffic: Traffic) -> None:
    gw = traffic.gw
    assert len(traffic.whatsapp) == 3 and len(set(traffic.whatsapp)) == 3
    assert sorted(_ids(gw, channel="whatsapp")) == sorted(traffic.whatsapp)
    assert sorted(_ids(gw, channel="sms")) == sorted(traffic.sms)
    assert sorted(_ids(gw)) == sorted(_ids(gw, channel="")) == sorted(traffic.sms + traffic.whatsapp)
    for m in gw.admin("GET", "/v1/messages", params={"channel": "whatsapp"}).json()["messages"]:
        assert m["channel"] == "whatsapp" and m["origin"] == f"whatsapp:{PNID}"
    # with the other filters, and paged
    assert _ids(gw, channel="whatsapp", state="rejected") == [traffic.whatsapp[2]]
    assert _ids(gw, channel="sms", state="rejected") == [traffic.sms[2]]
    assert sorted(_ids(gw, channel="whatsapp", shortcode=BUSINESS)) == sorted(traffic.whatsapp)
    assert _ids(gw, channel="sms", shortcode=BUSINESS) == []
    first = gw.admin("GET", "/v1/messages", params={"channel": "whatsapp", "limit": "2"}).json()
    rest = _ids(gw, channel="whatsapp", before=first["next"])
    assert sorted([m["id"] for m in first["messages"]] + rest) == sorted(traffic.whatsapp)


def test_an_unknown_channel_is_refused_naming_the_field(traffic: Traffic) -> None:
    answer = traffic.gw.admin("GET", "/v1/messages", params={"channel": "fax"})
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["field"] == "channel"
    assert answer.json()["detail"] == "channel: must be one of sms, whatsapp"


def test_the_openapi_document_lists_the_channel_filter(traffic: Traffic) -> None:
    spec = traffic.gw.request("GET", "/openapi.json").json()
    params = {p["name"]: p for p in spec["paths"]["/v1/messages"]["get"]["parameters"]}
    assert params["channel"]["schema"]["enum"] == ["", "sms", "whatsapp"]
    assert "whatsapp" in params["channel"]["description"]


def test_the_openapi_document_describes_the_callback_and_its_whatsapp_member(traffic: Traffic) -> None:
    """One schema for the SDK and the API: the shipped file's, as components."""
    from mogateway.client.whatsapp import schema

    spec = traffic.gw.request("GET", "/openapi.json").json()
    components = spec["components"]["schemas"]
    shipped = schema()
    member = components["WhatsAppMember"]
    assert member["properties"]["image"] == {"$ref": "#/components/schemas/WhatsAppMember_media"}
    assert member["required"] == shipped["required"] and list(member["properties"]) == list(
        shipped["properties"]
    )
    for name, definition in shipped["$defs"].items():
        assert json.dumps(components[f"WhatsAppMember_{name}"]).replace(
            "#/components/schemas/WhatsAppMember_", "#/$defs/"
        ) == json.dumps(definition)
    callback = spec["webhooks"]["callback"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert callback == {"$ref": "#/components/schemas/Callback"}
    assert components["Callback"]["properties"]["whatsapp"] == {"$ref": "#/components/schemas/WhatsAppMember"}
    assert components["MessageOut"]["properties"]["whatsapp"]["$ref"] == "#/components/schemas/WhatsAppMember"


def test_metrics_count_mos_by_channel(traffic: Traffic) -> None:
    text = traffic.gw.admin("GET", "/metrics").text

    def value(name: str, **labels: str) -> float:
        """The sum over the workers' samples (each worker labels its own with ``worker``)."""
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        samples = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert any(all(w in line for w in wanted) for line in samples), f"{name} {labels} not in /metrics"
        return float(metric(text, name, **labels))

    assert value("mogateway_mo_accepted_total", channel="sms") == 2
    assert value("mogateway_mo_accepted_total", channel="whatsapp") == 2
    assert value("mogateway_mo_rejected_total", channel="sms", field="msisdn") == 1
    assert value("mogateway_mo_rejected_total", channel="whatsapp", field="msisdn") == 1
    assert value("mogateway_mo_duplicates_total", channel="sms") == 0
    assert value("mogateway_mo_duplicates_total", channel="whatsapp") == 1


def test_stats_give_the_figures_by_channel(traffic: Traffic) -> None:
    expected = {
        "sms": {"mo_in": 3, "accepted": 2, "rejected": 1, "duplicates": 0},
        "whatsapp": {"mo_in": 3, "accepted": 2, "rejected": 1, "duplicates": 1},
    }
    deadline = time.monotonic() + 10  # the sampler reads the counters once a second
    while True:
        totals: dict[str, Any] = traffic.gw.admin("GET", "/v1/stats", params={"window": "1h"}).json()[
            "totals"
        ]
        if totals["channels"] == expected:
            break
        assert time.monotonic() < deadline, totals
        time.sleep(0.1)
    assert totals["mo_in"] == 6 and totals["accepted"] == 4 and totals["duplicates"] == 1
