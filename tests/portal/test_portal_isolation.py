"""Isolation by construction, checked from outside: every portal route, walked by client A's people with
client B's ids and parameters (IDOR), answers 404 or shows A's own data only; no portal page shows
operator-only data (other clients, binds, nodes, tokens). Run against ``mogateway serve`` with workers."""

from __future__ import annotations

import re
from datetime import datetime

from console_harness import NODE, ServedGateway
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN

from mogateway.api.portal import account, callback, credentials, pages, reports, signin
from mogateway.testing.recorder import CallbackRecorder

from .portal_harness import csrf_of, tenant

#: Every portal route (method, path): the walk below must cover each, so a new route fails this test
#: until it is walked too.
ROUTES = {
    (method, route.path)  # type: ignore[attr-defined]
    for module in (signin, pages, callback, credentials, reports, account)
    for route in module.router.routes
    for method in route.methods  # type: ignore[attr-defined]
}


def test_every_portal_route_with_another_clients_ids_and_parameters(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767")
    b = tenant(gw, app.url, "Bravo", "56999")
    assert a.admin is not None and b.admin is not None
    browser = a.admin
    b_id = b.client["id"]
    b_url_before = gw.admin("GET", f"/v1/clients/{b_id}").json()["callback_url"]
    month = datetime.now().astimezone().strftime("%Y-%m")
    day = datetime.now().astimezone().strftime("%Y-%m-%d")
    walked: set[tuple[str, str]] = set()
    other = {"client": b_id, "client_id": b_id, "shortcode": b.shortcode}

    def foreign(text: str) -> None:
        """Nothing of B, nothing only operators see (the form fields echo the search, B's parameters)."""
        text = re.sub(r'value="[^"]*"', "", text)
        for mid in b.messages:
            assert mid not in text
        assert b_id not in text and "Bravo" not in text and b.shortcode not in text
        for secret in (ADMIN_TOKEN, INGEST_TOKEN, a.client["token"], b.client["token"]):
            assert secret not in text
        assert NODE not in text, text[text.find(NODE) - 200 : text.find(NODE) + 50]
        assert 'href="/console' not in text and "binds" not in text.lower()

    def get(path: str, route: str, status: int = 200, **params: str) -> str:
        resp = browser.get(path, params=params, follow_redirects=False)
        assert resp.status_code == status, (path, resp.status_code, resp.text[:300])
        walked.add(("GET", route))
        foreign(resp.text)
        return resp.text

    def post(path: str, route: str, data: dict[str, str], status: int = 303) -> str:
        page = browser.get("/portal/callback").text
        resp = browser.post(path, data={"csrf": csrf_of(page), **data})
        assert resp.status_code == status, (path, resp.status_code, resp.text[:300])
        walked.add(("POST", route))
        foreign(resp.text)
        return resp.text

    # One message: B's ids are not found, like ids that do not exist.
    for mid in b.messages:
        get(f"/portal/messages/{mid}", "/portal/messages/{message_id}", 404)
    get(f"/portal/messages/{a.messages[0]}", "/portal/messages/{message_id}")
    get("/portal/messages/%2E%2E", "/portal/messages/{message_id}", 404)
    get("/portal/messages/a%3Fb", "/portal/messages/{message_id}", 404)
    for mid in (*b.messages, a.messages[0]):  # B's, and A's own SMS (no media): not found alike
        get(f"/portal/messages/{mid}/media", "/portal/messages/{message_id}/media", 404)
    # Lists, searches, figures, reports, audit: B's parameters find nothing of B.
    listing = get("/portal/messages", "/portal/messages", client=b_id, client_id=b_id)
    assert all(mid in listing for mid in a.messages)  # the client parameters are nobody's business
    assert "No message matches." in get("/portal/messages", "/portal/messages", **other)
    assert "No message matches." in get("/portal/messages", "/portal/messages", shortcode=b.shortcode)
    for route in (
        "/portal/",
        "/portal/audit",
        "/portal/callback",
        "/portal/credentials",
        "/portal/reports",
        "/portal/account",
    ):
        get(route, route, **other)
    csv = get("/portal/reports/export.csv", "/portal/reports/export.csv", month=month, **other)
    assert sorted(re.findall(r"^([^,\n]+),", csv, re.M)[1:]) == sorted(a.messages)
    assert browser.get("/portal/reports/count", params={"day": day, **other}).json() == {"rows": 3}
    with browser.stream("GET", "/portal/live/overview", params=other) as live:  # the first event only
        assert live.status_code == 200
        events = live.iter_lines()
        while not (line := next(events)).startswith("data: "):
            pass
        foreign(line)
        assert "56767" in line
    walked.add(("GET", "/portal/live/overview"))
    walked.add(("GET", "/portal/reports/count"))
    get("/portal/login", "/portal/login", 303, **other)  # signed in: to the portal
    get("/portal", "/portal", 303, **other)
    # Changes with B's ids in the form change A (or nothing), never B.
    post("/portal/callback", "/portal/callback", {"callback_url": app.url + "?x=1", **other})
    assert gw.admin("GET", f"/v1/clients/{b_id}").json()["callback_url"] == b_url_before
    assert gw.admin("GET", f"/v1/clients/{a.client['id']}").json()["callback_url"].endswith("?x=1")
    result = post("/portal/callback/test", "/portal/callback/test", {**other}, 200)
    assert "Would become a reply" in result and "56767" in result
    for what in ("token", "signing-secret"):
        post(f"/portal/credentials/{what}", "/portal/credentials/{what}", {"overlap_minutes": "0", **other})
    post("/portal/credentials/nothing", "/portal/credentials/{what}", {**other})
    post("/portal/account/totp/start", "/portal/account/totp/start", {**other}, 200)
    post("/portal/account/totp", "/portal/account/totp", {"secret": "AAAAAAAA", "code": "1", **other}, 422)
    post("/portal/account/totp/off", "/portal/account/totp/off", {"code": "1", **other}, 303)
    # B's audit has only B's own entries: nothing A did landed there.
    b_audit = gw.admin("GET", f"/v1/clients/{b_id}/audit").json()["audit"]
    assert [(e["actor"], e["action"]) for e in b_audit] == [
        ("portal:admin@bravo.example", "password set"),
        ("operator", "invite"),
        ("operator", "created"),
    ]
    # The invite page of a token that is not one; then signing out (everywhere last).
    browser.get("/portal/invite/not-a-token")
    walked.add(("GET", "/portal/invite/{token}"))
    resp = browser.post("/portal/invite/not-a-token", data={"password": "x" * 12, "again": "x" * 12})
    assert resp.status_code == 404
    walked.add(("POST", "/portal/invite/{token}"))
    post("/portal/login", "/portal/login", {"email": "admin@bravo.example", "password": "nope"}, 403)
    post("/portal/logout", "/portal/logout", {})
    assert browser.get("/portal/", follow_redirects=False).status_code == 303
    b.admin.post("/portal/logout/everywhere", data={"csrf": csrf_of(b.admin.get("/portal/").text)})
    walked.add(("POST", "/portal/logout/everywhere"))
    assert walked >= {r for r in ROUTES if r[0] in ("GET", "POST")}, sorted(ROUTES - walked)
