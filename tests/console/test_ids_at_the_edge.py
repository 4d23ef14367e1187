"""Ids are checked at the edge: ``.``, ``..`` and anything else that is not an id's shape answer 404 on
every console and admin route that takes an id, and reach no handler. (``/console/clients/%2E`` showed
the client list as one client; ``/console/messages/%2E`` and ``POST /console/clients/%2E/test``
answered 500.) A real id still works, and nothing was created, changed or sent."""

from __future__ import annotations

import re

import httpx
from console_harness import ServedGateway, fresh_get
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN

COOKIE = "mogateway_console"
#: As sent on the wire (percent-encoded where a client would otherwise normalise the path).
NOT_IDS = [
    *("%2E", "%2E%2E", ".%2E", "%2e", "a.b"),  # dot segments, and dots at all
    *("a%20b", "x%3Fy%3D1", "%25", "-lead", "%C3%A9t%C3%A9", "x" * 129),
]

CONSOLE_GETS = ["/console/clients/{}", "/console/clients/{}/remove", "/console/messages/{}"]
CONSOLE_POSTS = [
    "/console/clients/{}",
    "/console/clients/{}/token",
    "/console/clients/{}/remove",
    "/console/clients/{}/test",
    "/console/messages/{}/replay",
]
API = [
    ("GET", "/v1/clients/{}"),
    ("PATCH", "/v1/clients/{}"),
    ("DELETE", "/v1/clients/{}"),
    ("POST", "/v1/clients/{}/token"),
    ("POST", "/v1/clients/{}/signing-secret"),
    ("GET", "/v1/clients/{}/dlt-templates"),
    ("POST", "/v1/clients/{}/dlt-templates"),
    ("DELETE", "/v1/clients/{}/dlt-templates/1107161234567890123"),
    ("POST", "/v1/clients/{}/dlt-check"),
    ("GET", "/v1/messages/{}"),
    ("POST", "/v1/messages/{}/replay"),
]


def _session(url: str) -> str:
    with httpx.Client(base_url=url, timeout=10) as client:
        form = client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        answer = client.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
        assert answer.status_code == 303
        return str(answer.cookies[COOKIE])


def test_every_route_taking_an_id_answers_404_for_what_is_not_an_id(gw: ServedGateway) -> None:
    client = gw.add_client(name="Votes", shortcodes=["56767"], callback_url="http://127.0.0.1:9/cb")
    before = gw.admin("GET", "/v1/clients").json()
    cookie = _session(gw.url)
    page = fresh_get(gw.url + "/console/clients", cookie)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    form = {"csrf": csrf[1], "name": "Renamed", "shortcodes": "56768", "callback_url": "http://127.0.0.1:9/x"}

    with httpx.Client(base_url=gw.url, cookies={COOKIE: cookie}, timeout=30) as console:
        for bad in NOT_IDS:
            for template in CONSOLE_GETS:
                answer = console.get(template.format(bad))
                assert answer.status_code == 404, (template, bad, answer.status_code, answer.text[:200])
                assert "Not found" in answer.text or "not found" in answer.text
            for template in CONSOLE_POSTS:
                answer = console.post(template.format(bad), data={**form, "msisdn": "919810012345"})
                assert answer.status_code == 404, (template, bad, answer.status_code, answer.text[:200])
        # without a session, a bad id is sent to sign in like any other console page
        signed_out = fresh_get(gw.url + "/console/clients/%2E")
        assert signed_out.status_code == 303 and "/console/login" in signed_out.headers["location"]
        assert console.get(f"/console/clients/{client['id']}").status_code == 200  # a real id works

    for bad in NOT_IDS:
        for method, template in API:
            answer = gw.admin(method, template.format(bad), json={})
            assert answer.status_code == 404, (method, template, bad, answer.status_code, answer.text[:200])
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.json()["type"].endswith(":not-found")
    assert gw.request("GET", "/v1/clients/%2E").status_code == 401  # the token is checked first

    assert gw.admin("GET", "/v1/clients").json() == before  # nothing changed
    assert gw.admin("GET", f"/v1/clients/{client['id']}").status_code == 200
    assert gw.request("GET", "/v1/messages", token=INGEST_TOKEN).status_code == 401  # (the admin's)
    assert gw.admin("GET", "/v1/messages").json()["messages"] == []  # no test MO went out
