"""What an outside review of the console and the admin API asked for, each checked on a default
(multi-worker) gateway: the throttle's address is not the client's to choose, a request without the
token learns nothing about what a route accepts, no subscriber number in the log at INFO, security
headers on every answer, and ids from console URLs kept whole in the API paths they reach."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from console_harness import ServedGateway, served_gateway
from gateway_harness import ADMIN_TOKEN

from mogateway.config import ConfigError, load_settings


def _attempt(url: str, token: str, forwarded_for: str) -> int:
    with httpx.Client(base_url=url, timeout=10, headers={"x-forwarded-for": forwarded_for}) as client:
        form = client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        return client.post("/console/login", data={"csrf": csrf[1], "token": token}).status_code


def test_x_forwarded_for_is_ignored_unless_the_proxy_is_trusted(gw: ServedGateway, tmp_path: Path) -> None:
    # By default no proxy is trusted, not even 127.0.0.1: a new address per attempt changes nothing.
    codes = [_attempt(gw.url, "guess-" * 4, f"203.0.113.{n}") for n in range(6)]
    assert codes == [401] * 5 + [429]
    assert _attempt(gw.url, ADMIN_TOKEN, "198.51.100.7") == 429

    with served_gateway(tmp_path / "behind-proxy", trusted_proxies="127.0.0.1, 10.0.0.0/8") as proxied:
        # Behind a trusted proxy each client has its own count...
        assert [_attempt(proxied.url, "guess-" * 4, f"203.0.113.{n}") for n in range(6)] == [401] * 6
        # ...and one client's failures are its own.
        codes = [_attempt(proxied.url, "guess-" * 4, "198.51.100.9") for _ in range(6)]
        assert codes == [401] * 5 + [429]
        assert _attempt(proxied.url, ADMIN_TOKEN, "198.51.100.10") == 303


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    assert load_settings(trusted_proxies="10.0.0.1, 192.168.0.0/16").trusted_proxies == [
        "10.0.0.1",
        "192.168.0.0/16",
    ]
    with pytest.raises(ConfigError, match="trusted_proxies") as refused:
        load_settings(trusted_proxies="10.0.0.1, proxy.example")
    assert "'proxy.example' is not an IP address or network" in str(refused.value)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/clients"),
        ("PATCH", "/v1/clients/cl_nobody"),
        ("POST", "/v1/clients/cl_nobody/dlt-templates"),
        ("POST", "/v1/clients/cl_nobody/dlt-check"),
    ],
)
def test_a_request_without_the_token_is_refused_before_its_body_is_looked_at(
    gw: ServedGateway, method: str, path: str
) -> None:
    for body in (b"{}", b'{"name": ', b'{"unknown": 1}'):
        for token in (None, "wrong-token-0123456789"):
            answer = gw.request(
                method, path, token=token, content=body, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 401, (body, token, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert "field" not in answer.json()  # nothing about what the body should have been
    with_token = gw.admin(method, path, json={"unknown": 1})
    assert with_token.status_code in (404, 422)  # with the token: validated as before


def test_a_number_searched_for_in_the_console_never_reaches_the_log(tmp_path: Path) -> None:
    number = "919812398765"
    with served_gateway(tmp_path / "gateway", log_level="info") as gw:
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            form = client.get("/console/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert csrf
            client.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
            for _ in range(6):  # new searches, on whichever worker
                found = client.get("/console/messages", params={"msisdn": number, "state": "replied"})
                assert found.status_code == 200 and "No message matches." in found.text
        log = gw.log()
    assert "mogateway" in log  # the log was written at INFO...
    assert number not in log and number[2:] not in log  # ...without the number searched for


_ANSWERS = [
    ("/docs", 200),
    ("/redoc", 200),
    ("/openapi.json", 200),
    ("/healthz", 200),
    ("/v1/clients", 401),
    ("/console", 303),
    ("/static/console/console.css", 200),
    ("/no/such/thing", 404),
]


def test_every_answer_says_nosniff_and_may_not_be_framed_and_carries_a_policy(gw: ServedGateway) -> None:
    answers = [(path, gw.request("GET", path), status) for path, status in _ANSWERS]
    answers.append(("/v1/clients (admin)", gw.admin("GET", "/v1/clients"), 200))
    answers.append(("DELETE /v1/clients/cl_nobody", gw.admin("DELETE", "/v1/clients/cl_nobody"), 404))
    for what, answer, status in answers:
        assert answer.status_code == status, what
        assert answer.headers["x-content-type-options"] == "nosniff", what
        assert answer.headers["x-frame-options"] == "DENY", what
        policy = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, what
    docs = gw.request("GET", "/docs").headers["content-security-policy"]
    scripts = docs.split("script-src", 1)[1].split(";", 1)[0]
    assert "'self' 'sha256-" in scripts and "unsafe" not in scripts  # its own inline script, no other


def test_ids_from_console_urls_stay_one_path_segment_in_the_api(gw: ServedGateway) -> None:
    client = gw.add_client(name="vote", shortcodes=["56767"], callback_url="http://127.0.0.1:9/cb")
    message = gw.push("56767", "VOTE 1")
    with httpx.Client(base_url=gw.url, timeout=10) as browser:
        form = browser.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        browser.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
        assert browser.get(f"/console/clients/{client['id']}").status_code == 200
        # Unquoted, "<id>%3Fy=1" would have become GET /v1/clients/<id>?y=1: the client's page.
        cid = client["id"]
        for sneaky in (f"{cid}%3Fy=1", f"{cid}%23x", f"{cid}%2Fdlt-templates", f"x%2F..%2F{cid}"):
            assert browser.get(f"/console/clients/{sneaky}").status_code == 404, sneaky
        whole = browser.get(f"/console/clients/{client['id']}%3Fy=1")
        assert f"client {client['id']}?y=1" in whole.text  # looked up as the one id it is
        assert browser.get(f"/console/messages/{message['id']}").status_code == 200
        assert browser.get(f"/console/messages/{message['id']}%3Fx=1").status_code == 404
