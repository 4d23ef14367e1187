"""The fake Graph API itself: parameter transports, envelopes, state machine, control endpoints."""

from __future__ import annotations

import pytest

from .conftest import APP_ID, DEST_WABA, TOKEN, Fake, Hooks

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _pid(fake: Fake) -> str:
    fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH)
    r = fake.http.post(
        f"/v25.0/{DEST_WABA}/phone_numbers",
        headers=AUTH,
        json={"cc": "91", "phone_number": "9876543210", "migrate_phone_number": True},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


@pytest.mark.parametrize("transport", ["query", "form", "multipart", "json"])
def test_parameters_in_every_transport(fake: Fake, transport: str) -> None:
    pid = _pid(fake)
    params = {"code_method": "SMS", "language": "en_US", "access_token": TOKEN}
    url = f"/v25.0/{pid}/request_code"
    if transport == "query":
        r = fake.http.post(url, params=params)
    elif transport == "form":
        r = fake.http.post(url, data=params)
    elif transport == "multipart":
        r = fake.http.post(url, files={k: (None, v) for k, v in params.items()})
    else:
        r = fake.http.post(url, json=params)
    assert r.status_code == 200 and r.json() == {"success": True}, r.text
    assert r.headers["facebook-api-version"] == "v25.0" and r.headers["x-fb-trace-id"]


def test_error_envelopes_and_statuses(fake: Fake) -> None:
    r = fake.http.get(f"/v25.0/{DEST_WABA}")
    assert r.status_code == 400 and r.json()["error"]["code"] == 104
    r = fake.http.get(f"/v25.0/{DEST_WABA}", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["error"]["code"] == 190
    r = fake.http.get("/v25.0/123", headers=AUTH)
    err = r.json()["error"]
    assert (r.status_code, err["code"], err["error_subcode"], err["type"]) == (
        400,
        100,
        33,
        "GraphMethodException",
    )
    assert err["message"].startswith("(#100) ") and err["fbtrace_id"]
    r = fake.http.post(
        f"/v25.0/{DEST_WABA}/phone_numbers",
        headers=AUTH,
        data={"cc": "91", "phone_number": "9876543210", "migrate_phone_number": "true"},
    )
    err = r.json()["error"]
    assert (err["code"], err["error_subcode"]) == (100, 2388103)
    assert "Webhooks" in err["error_data"]["details"]


def test_state_machine_and_side_effects(fake: Fake) -> None:
    pid = _pid(fake)
    again = fake.http.post(
        f"/v25.0/{DEST_WABA}/phone_numbers",
        headers=AUTH,
        json={"cc": "91", "phone_number": "9876543210", "migrate_phone_number": True},
    )
    assert again.json()["error"]["error_subcode"] == 2388012
    reg = fake.http.post(
        f"/v25.0/{pid}/register", headers=AUTH, json={"messaging_product": "whatsapp", "pin": "123456"}
    )
    assert reg.json()["error"]["code"] == 133006
    fake.http.post(
        f"/v25.0/{pid}/request_code", headers=AUTH, params={"code_method": "SMS", "language": "en_US"}
    )
    code = fake.last_code("+919876543210")
    assert fake.http.post(f"/v25.0/{pid}/verify_code", headers=AUTH, json={"code": code}).json()["success"]
    assert fake.http.post(
        f"/v25.0/{pid}/register", headers=AUTH, json={"messaging_product": "whatsapp", "pin": "123456"}
    ).json() == {"success": True}
    templates = fake.http.get(f"/v25.0/{DEST_WABA}/message_templates", headers=AUTH).json()["data"]
    assert [(t["name"], t["quality_score"]["score"]) for t in templates] == [("order_update", "UNKNOWN")]


def test_override_needs_subscription_first(fake: Fake, hooks: Hooks) -> None:
    body = {"override_callback_uri": hooks.url, "verify_token": hooks.token}
    r = fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH, json=body)
    assert r.status_code == 400 and "must be subscribed" in r.json()["error"]["message"]
    assert hooks.handshakes == []  # refused before the URL is asked anything
    fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH)
    assert fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH, json=body).json()["success"]
    apps = fake.http.get(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH).json()["data"]
    assert apps[0]["whatsapp_business_api_data"]["id"] == APP_ID
    assert apps[0]["override_callback_uri"] == body["override_callback_uri"]
    (asked,) = hooks.handshakes  # as Meta: the handshake GET with the verify token, before taking it
    assert asked["hub.mode"] == "subscribe" and asked["hub.verify_token"] == hooks.token


def test_override_is_refused_when_the_url_fails_the_handshake(fake: Fake, hooks: Hooks) -> None:
    fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH)
    for url, token, why in (
        (hooks.url, "another-token", "HTTP Status Code = 403"),
        ("http://127.0.0.1:9/v1/whatsapp/webhook", hooks.token, "HTTP Status Code = 0"),
    ):
        body = {"override_callback_uri": url, "verify_token": token}
        r = fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH, json=body)
        error = r.json()["error"]
        assert r.status_code == 400 and error["code"] == 2200, r.text
        assert "Callback verification failed" in error["message"] and why in error["message"]
    apps = fake.http.get(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH).json()["data"]
    assert "override_callback_uri" not in apps[0]  # nothing taken
    # Plain http is for this machine only; elsewhere https, as Meta.
    body = {"override_callback_uri": "http://hooks.example.com/x", "verify_token": hooks.token}
    r = fake.http.post(f"/v25.0/{DEST_WABA}/subscribed_apps", headers=AUTH, json=body)
    assert r.status_code == 400 and r.json()["error"]["code"] == 100


def test_clock_expires_codes_and_tokens(fake: Fake) -> None:
    pid = _pid(fake)
    fake.http.post(
        f"/v25.0/{pid}/request_code", headers=AUTH, json={"code_method": "VOICE", "language": "en"}
    )
    fake.advance(601)
    r = fake.http.post(
        f"/v25.0/{pid}/verify_code", headers=AUTH, json={"code": fake.last_code("+919876543210")}
    )
    assert r.json()["error"]["code"] == 136025 and "expired" in r.json()["error"]["error_data"]["details"]
    fake.advance(3600)
    r = fake.http.get(
        "/v25.0/debug_token", params={"input_token": "x"}, headers={"Authorization": "Bearer expiring-token"}
    )
    assert (r.json()["error"]["code"], r.json()["error"]["error_subcode"]) == (190, 463)
