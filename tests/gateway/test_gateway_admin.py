"""The admin API over a real gateway: clients, token rotation, replay, health, metrics and URL checks.

The gateway is ``mogateway serve`` with several workers, one per module (two with private callbacks
refused); each test uses shortcodes of its own and looks at its own messages, clients and counters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import (
    Codes,
    ServeGateway,
    calls_for,
    events,
    metric,
    outcome,
    serve_gateway,
    state_from_timeline,
    wait_until,
)

from mogateway.core.callback_url import UrlRefused
from mogateway.edges.urlguard import check_callback_url
from mogateway.testing.recorder import CallbackRecorder

# ------------------------------------------------------------------------------------ clients


def test_client_lifecycle_over_the_api(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    created = gw.add_client(
        shortcodes=[codes[0], int(codes[1])], callback_url=app.url, keywords=["bal"], timeout_s=5
    )
    assert created["id"].startswith("cl_") and created["token"]
    assert (created["shortcodes"], created["keywords"], created["timeout_s"]) == (
        [codes[0], codes[1]],
        ["BAL"],
        5,
    )
    assert (created["tsunix_unit"], created["unescape_newlines"]) == ("ms", True)

    listed = gw.admin("GET", "/v1/clients").json()["clients"]
    listed = [c for c in listed if codes[0] in c["shortcodes"]]  # (the gateway is shared by the module)
    assert [c["id"] for c in listed] == [created["id"]]
    shown = gw.admin("GET", f"/v1/clients/{created['id']}").json()
    assert "token" not in shown and "token" not in listed[0]  # the token is shown only at creation

    patched = gw.admin(
        "PATCH", f"/v1/clients/{created['id']}", json={"timeout_s": 2, "keywords": [], "name": "renamed"}
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["timeout_s"], patched.json()["keywords"], patched.json()["name"]) == (
        2,
        [],
        "renamed",
    )

    assert gw.admin("DELETE", f"/v1/clients/{created['id']}").status_code == 204
    gone = gw.admin("GET", f"/v1/clients/{created['id']}")
    assert gone.status_code == 404 and gone.headers["content-type"] == "application/problem+json"
    assert gw.admin("DELETE", f"/v1/clients/{created['id']}").status_code == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"timeout_s": 31}, "timeout_s"),
        ({"timeout_s": 0.5}, "timeout_s"),
        ({"tsunix_unit": "us"}, "tsunix_unit"),
        ({"shortcodes": ["0123"]}, "shortcodes"),
        ({"shortcodes": []}, "shortcodes"),
        ({"keywords": ["two words"]}, "keywords"),
        ({"callback_url": "ftp://example.com/cb"}, "callback_url"),
        ({"callback_url": "http://user:pw@93.184.216.34/cb"}, "callback_url"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_client_fields_are_422_naming_the_field(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, change: dict[str, object], field: str
) -> None:
    body = {"name": "x", "shortcodes": [codes[0]], "callback_url": app.url, **change}
    resp = gw.admin("POST", "/v1/clients", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["field"].startswith(field)


def test_rotating_a_token_changes_what_the_callback_carries(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    old = client["token"]
    gw.wait_state(gw.push(codes[0], "before")["id"])
    rotated = gw.admin("POST", f"/v1/clients/{client['id']}/token")
    assert rotated.status_code == 200
    new = rotated.json()["token"]
    assert new and new != old
    gw.wait_state(gw.push(codes[0], "after")["id"])
    before, after = app.calls
    assert before.headers["authorization"] == f"Bearer {old}"
    assert after.headers["authorization"] == f"Bearer {new}"
    assert gw.admin("POST", "/v1/clients/cl_nope/token").status_code == 404


# ------------------------------------------------------------------------------------ messages


def test_replay_calls_the_app_again_and_sends_the_reply_again(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    first = gw.wait_state(gw.push(codes[0], "HELLO")["id"])
    assert first["state"] == "replied"
    from mogateway.testing.recorder import Answer

    app.answer = Answer.text("second answer")
    resp = gw.admin("POST", f"/v1/messages/{first['id']}/replay")
    assert resp.status_code == 202
    assert resp.json() == {"id": first["id"], "state": "queued"}
    again = gw.wait_state(first["id"], frozenset({"replied"}))
    calls = app.wait_for_calls(2)
    assert [c.headers["x-mogateway-message-id"] for c in calls] == [first["id"], first["id"]]
    assert calls[0].body == calls[1].body  # the same MO, byte for byte
    assert again["reply"] == "second answer"
    assert len(events(again, "replay")) == 1 and len(events(again, "reply_submitted")) == 2
    assert state_from_timeline(again) == "replied"
    wait_until(lambda: len(calls_for(mt, first["id"])) >= 2, "two replies handed to the MT endpoint")
    assert [c.json()["text"] for c in calls_for(mt, first["id"])] == ["OK", "second answer"]


def test_replay_refuses_rejected_and_unknown_messages(gw: ServeGateway, codes: Codes) -> None:
    rejected = gw.ingest(
        "POST", "/v1/inbound", json={"shortcode": codes[0], "msisdn": "+14155550123", "message": "x"}
    ).json()
    assert gw.admin("POST", f"/v1/messages/{rejected['id']}/replay").status_code == 409
    assert gw.admin("POST", "/v1/messages/nope/replay").status_code == 404
    assert gw.admin("GET", "/v1/messages/nope").status_code == 404


def test_messages_can_be_found_by_shortcode_msisdn_state_and_time(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    a = gw.wait_state(gw.push(codes[0], "a", msisdn="919810012345")["id"])
    b = gw.wait_state(gw.push(codes[0], "b", msisdn="919876543210")["id"])
    c = gw.wait_state(gw.push(codes[9], "c", msisdn="919876543210")["id"])

    ours = {a["id"], b["id"], c["id"]}

    def ids(**params: object) -> list[str]:
        """The listing, of this test's messages (the gateway is shared by the module)."""
        resp = gw.admin("GET", "/v1/messages", params=params)
        assert resp.status_code == 200, resp.text
        return [m["id"] for m in resp.json()["messages"] if m["id"] in ours]

    assert ids() == [c["id"], b["id"], a["id"]]  # newest first
    assert ids(shortcode=codes[0]) == [b["id"], a["id"]]
    assert ids(msisdn="09876543210") == [c["id"], b["id"]]  # any accepted form of the number
    assert ids(state="unroutable") == [c["id"]]
    assert ids(limit=1) == [c["id"]]  # (the module's tests run one after another: c is the newest)
    assert ids(since=b["received_at"]) == [c["id"], b["id"]]
    for bad in ({"state": "lost"}, {"limit": 0}, {"since": "last week"}):
        assert gw.admin("GET", "/v1/messages", params=bad).status_code == 422


def test_a_message_shows_its_whole_timeline(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    msg = gw.wait_state(gw.push(codes[0], "HELLO", id=f"src-{codes[0]}")["id"])
    kinds = [ev["event"] for ev in msg["timeline"]]
    assert kinds == ["received", "stored", "routed", "attempt", "outcome", "reply_submitted"]
    assert msg["source_id"] == f"src-{codes[0]}"
    attempt = events(msg, "attempt")[0]
    assert attempt["status"] == 200 and attempt["elapsed_ms"] >= 0
    assert outcome(msg)["reply"] == "OK"
    assert msg["sender"] == {"cc": 91, "ndc": 9810, "sn": 12345, "operator": "airtel", "circle": ""}


# ------------------------------------------------------------------------------------ operations


def test_healthz_needs_no_token(gw: ServeGateway, codes: Codes) -> None:
    resp = gw.request("GET", "/healthz")
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["status"] == "ok" and doc["version"]


def test_metrics_have_per_client_counters_and_latency_histograms(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    """The counters are each worker's, summed here over the workers (``worker`` label)."""
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    before = gw.admin("GET", "/metrics").text
    for text in ("one", "two"):
        gw.wait_state(gw.push(codes[0], text)["id"])
    from mogateway.testing.recorder import Answer

    app.answer = Answer.with_status(500)
    gw.wait_state(gw.push(codes[0], "three")["id"])
    gw.wait_state(gw.push(codes[9], "nobody")["id"])
    resp = gw.admin("GET", "/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    cid = client["id"]

    def value(name: str, **labels: str) -> float:
        assert re.search(rf"^{name}\{{", text, re.MULTILINE), f"{name} not in metrics"
        return metric(text, name, **labels)

    def grew(name: str, **labels: str) -> float:
        return value(name, **labels) - metric(before, name, **labels)

    assert value("mogateway_callbacks_total", client=cid, outcome="reply") == 2
    assert value("mogateway_callbacks_total", client=cid, outcome="http_error") == 1
    assert value("mogateway_callback_latency_seconds_count", client=cid) == 3
    assert value("mogateway_callback_latency_seconds_bucket", client=cid, le="+Inf") == 3
    assert grew("mogateway_mo_accepted_total", channel="sms") == 4  # by channel (WhatsApp: its own)
    assert grew("mogateway_mo_unroutable_total") == 1


# ------------------------------------------------------------------------------------ URL checks

REFUSED_URLS = [
    "http://127.0.0.1:9/cb",
    "http://localhost:9/cb",  # a name resolving to loopback
    "http://10.1.2.3/cb",
    "http://192.168.1.10/cb",
    "http://172.16.0.1/cb",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://100.64.0.1/cb",  # CGNAT
    "http://[::1]:9/cb",
    "http://[fe80::1]/cb",
    "http://[::ffff:127.0.0.1]/cb",
    "http://0.0.0.0/cb",
]


@pytest.fixture(scope="module")
def strict_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    with serve_gateway(tmp_path_factory.mktemp("strict"), allow_private_callbacks=False) as gateway:
        yield gateway


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_private_callback_urls_are_refused_at_registration(
    strict_gw: ServeGateway, codes: Codes, url: str
) -> None:
    resp = strict_gw.admin(
        "POST", "/v1/clients", json={"name": "x", "shortcodes": [codes[0]], "callback_url": url}
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["field"] == "callback_url"


def test_a_public_callback_url_is_accepted_and_a_patch_to_a_private_one_refused(
    strict_gw: ServeGateway, codes: Codes
) -> None:
    created = strict_gw.add_client(shortcodes=[codes[0]], callback_url="http://93.184.216.34/cb")
    resp = strict_gw.admin("PATCH", f"/v1/clients/{created['id']}", json={"callback_url": "http://10.0.0.1/"})
    assert resp.status_code == 422 and resp.json()["field"] == "callback_url"


def test_private_addresses_are_refused_again_when_connecting(
    tmp_path: Path, codes: Codes, app: CallbackRecorder
) -> None:
    """Registered while allowed (or before DNS pointed the name at loopback), dispatched while not: a
    name and an address, each on a shortcode of its own."""
    hosts = {codes[0]: "localhost", codes[1]: "127.0.0.1"}
    with serve_gateway(tmp_path, allow_private_callbacks=True, log_name="lenient") as lenient:
        for shortcode, host in hosts.items():
            lenient.add_client(
                shortcodes=[shortcode], callback_url=app.url.replace("127.0.0.1", host), timeout_s=2
            )
    with serve_gateway(tmp_path, allow_private_callbacks=False, log_name="strict") as strict:
        pushed = {host: strict.push(shortcode, "HELLO")["id"] for shortcode, host in hosts.items()}
        for host, message_id in pushed.items():
            msg = strict.wait_state(message_id)
            assert msg["state"] == "failed", host
            assert "refused" in outcome(msg)["detail"], host
    assert app.calls == []


async def test_registration_check_resolves_names() -> None:
    with pytest.raises(UrlRefused):
        await check_callback_url("http://localhost/cb", allow_private=False)
    await check_callback_url("http://localhost/cb", allow_private=True)
    with pytest.raises(UrlRefused):
        await check_callback_url("gopher://93.184.216.34/", allow_private=True)  # the scheme, always
