"""The admin API over a real gateway: clients, token rotation, replay, health, metrics and URL checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gateway_harness import InProcessGateway, events, in_process_gateway, outcome, state_from_timeline

from mogateway.core.callback_url import UrlRefused
from mogateway.edges.urlguard import check_callback_url
from mogateway.testing.recorder import CallbackRecorder

SC = "56767"


# ------------------------------------------------------------------------------------ clients


def test_client_lifecycle_over_the_api(gw: InProcessGateway, app: CallbackRecorder) -> None:
    created = gw.add_client(shortcodes=[SC, 56768], callback_url=app.url, keywords=["bal"], timeout_s=5)
    assert created["id"].startswith("cl_") and created["token"]
    assert (created["shortcodes"], created["keywords"], created["timeout_s"]) == ([SC, "56768"], ["BAL"], 5)
    assert (created["tsunix_unit"], created["unescape_newlines"]) == ("ms", True)

    listed = gw.admin("GET", "/v1/clients").json()["clients"]
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
    gw: InProcessGateway, app: CallbackRecorder, change: dict[str, object], field: str
) -> None:
    body = {"name": "x", "shortcodes": [SC], "callback_url": app.url, **change}
    resp = gw.admin("POST", "/v1/clients", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["field"].startswith(field)


def test_rotating_a_token_changes_what_the_callback_carries(
    gw: InProcessGateway, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[SC], callback_url=app.url)
    old = client["token"]
    gw.wait_state(gw.push(SC, "before")["id"])
    rotated = gw.admin("POST", f"/v1/clients/{client['id']}/token")
    assert rotated.status_code == 200
    new = rotated.json()["token"]
    assert new and new != old
    gw.wait_state(gw.push(SC, "after")["id"])
    before, after = app.calls
    assert before.headers["authorization"] == f"Bearer {old}"
    assert after.headers["authorization"] == f"Bearer {new}"
    assert gw.admin("POST", "/v1/clients/cl_nope/token").status_code == 404


# ------------------------------------------------------------------------------------ messages


def test_replay_calls_the_app_again_and_sends_the_reply_again(
    gw: InProcessGateway, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[SC], callback_url=app.url)
    first = gw.wait_state(gw.push(SC, "HELLO")["id"])
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
    mt.wait_for_calls(2)
    assert [c.json()["text"] for c in mt.calls] == ["OK", "second answer"]


def test_replay_refuses_rejected_and_unknown_messages(gw: InProcessGateway) -> None:
    rejected = gw.ingest(
        "POST", "/v1/inbound", json={"shortcode": SC, "msisdn": "+14155550123", "message": "x"}
    ).json()
    assert gw.admin("POST", f"/v1/messages/{rejected['id']}/replay").status_code == 409
    assert gw.admin("POST", "/v1/messages/nope/replay").status_code == 404
    assert gw.admin("GET", "/v1/messages/nope").status_code == 404


def test_messages_can_be_found_by_shortcode_msisdn_state_and_time(
    gw: InProcessGateway, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[SC], callback_url=app.url)
    a = gw.wait_state(gw.push(SC, "a", msisdn="919810012345")["id"])
    b = gw.wait_state(gw.push(SC, "b", msisdn="919876543210")["id"])
    c = gw.wait_state(gw.push("99999", "c", msisdn="919876543210")["id"])

    def ids(**params: object) -> list[str]:
        resp = gw.admin("GET", "/v1/messages", params=params)
        assert resp.status_code == 200, resp.text
        return [m["id"] for m in resp.json()["messages"]]

    assert ids() == [c["id"], b["id"], a["id"]]  # newest first
    assert ids(shortcode=SC) == [b["id"], a["id"]]
    assert ids(msisdn="09876543210") == [c["id"], b["id"]]  # any accepted form of the number
    assert ids(state="unroutable") == [c["id"]]
    assert ids(limit=1) == [c["id"]]
    assert ids(since=b["received_at"]) == [c["id"], b["id"]]
    for bad in ({"state": "lost"}, {"limit": 0}, {"since": "last week"}):
        assert gw.admin("GET", "/v1/messages", params=bad).status_code == 422


def test_a_message_shows_its_whole_timeline(gw: InProcessGateway, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=[SC], callback_url=app.url)
    msg = gw.wait_state(gw.push(SC, "HELLO", id="src-1")["id"])
    kinds = [ev["event"] for ev in msg["timeline"]]
    assert kinds == ["received", "stored", "routed", "attempt", "outcome", "reply_submitted"]
    assert msg["source_id"] == "src-1"
    attempt = events(msg, "attempt")[0]
    assert attempt["status"] == 200 and attempt["elapsed_ms"] >= 0
    assert outcome(msg)["reply"] == "OK"
    assert msg["sender"] == {"cc": 91, "ndc": 9810, "sn": 12345, "operator": "airtel", "circle": ""}


# ------------------------------------------------------------------------------------ operations


def test_healthz_needs_no_token(gw: InProcessGateway) -> None:
    resp = gw.request("GET", "/healthz")
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["status"] == "ok" and doc["version"]


def test_metrics_have_per_client_counters_and_latency_histograms(
    gw: InProcessGateway, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[SC], callback_url=app.url)
    for text in ("one", "two"):
        gw.wait_state(gw.push(SC, text)["id"])
    from mogateway.testing.recorder import Answer

    app.answer = Answer.with_status(500)
    gw.wait_state(gw.push(SC, "three")["id"])
    gw.wait_state(gw.push("99999", "nobody")["id"])
    resp = gw.admin("GET", "/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    cid = re.escape(client["id"])

    def value(pattern: str) -> float:
        match = re.search(rf"^{pattern} (\S+)$", text, re.MULTILINE)
        assert match, f"{pattern} not in metrics"
        return float(match.group(1))

    assert value(rf'mogateway_callbacks_total\{{client="{cid}",outcome="reply"\}}') == 2
    assert value(rf'mogateway_callbacks_total\{{client="{cid}",outcome="http_error"\}}') == 1
    assert value(rf'mogateway_callback_latency_seconds_count\{{client="{cid}"\}}') == 3
    assert value(rf'mogateway_callback_latency_seconds_bucket\{{client="{cid}",le="\+Inf"\}}') == 3
    assert value(r'mogateway_mo_accepted_total\{channel="sms"\}') == 4  # by channel (WhatsApp: its own)
    assert value(r"mogateway_mo_unroutable_total") == 1


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


@pytest.fixture
def strict_gw(tmp_path: Path) -> InProcessGateway:  # type: ignore[misc]
    with in_process_gateway(tmp_path / "strict.db", allow_private_callbacks=False) as gateway:
        yield gateway


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_private_callback_urls_are_refused_at_registration(strict_gw: InProcessGateway, url: str) -> None:
    resp = strict_gw.admin("POST", "/v1/clients", json={"name": "x", "shortcodes": [SC], "callback_url": url})
    assert resp.status_code == 422, resp.text
    assert resp.json()["field"] == "callback_url"


def test_a_public_callback_url_is_accepted_and_a_patch_to_a_private_one_refused(
    strict_gw: InProcessGateway,
) -> None:
    created = strict_gw.add_client(shortcodes=[SC], callback_url="http://93.184.216.34/cb")
    resp = strict_gw.admin("PATCH", f"/v1/clients/{created['id']}", json={"callback_url": "http://10.0.0.1/"})
    assert resp.status_code == 422 and resp.json()["field"] == "callback_url"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_private_addresses_are_refused_again_when_connecting(
    tmp_path: Path, app: CallbackRecorder, host: str
) -> None:
    """Registered while allowed (or before DNS pointed the name at loopback), dispatched while not."""
    journal = tmp_path / "shared.db"
    url = app.url.replace("127.0.0.1", host)
    with in_process_gateway(journal, allow_private_callbacks=True) as lenient:
        lenient.add_client(shortcodes=[SC], callback_url=url)
    with in_process_gateway(journal, allow_private_callbacks=False) as strict:
        msg = strict.wait_state(strict.push(SC, "HELLO")["id"])
    assert msg["state"] == "failed"
    assert "refused" in outcome(msg)["detail"]
    assert app.calls == []


async def test_registration_check_resolves_names() -> None:
    with pytest.raises(UrlRefused):
        await check_callback_url("http://localhost/cb", allow_private=False)
    await check_callback_url("http://localhost/cb", allow_private=True)
    with pytest.raises(UrlRefused):
        await check_callback_url("gopher://93.184.216.34/", allow_private=True)  # the scheme, always
