"""The console's rules that need no browser: throttled sign-in, headers, the off switch, sessions."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from console_harness import ServedGateway, served_gateway
from gateway_harness import ADMIN_TOKEN


def _signin_form(client: httpx.Client) -> str:
    page = client.get("/console/login")
    assert page.status_code == 200
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found
    return found[1]


def test_failed_sign_ins_are_throttled_and_then_even_the_right_token_waits(gw: ServedGateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        csrf = _signin_form(client)
        for _ in range(5):
            wrong = client.post("/console/login", data={"csrf": csrf, "token": "guess-" * 4})
            assert wrong.status_code == 401
            assert "That is not the admin token." in wrong.text
            assert ADMIN_TOKEN not in wrong.text
        locked = client.post("/console/login", data={"csrf": csrf, "token": ADMIN_TOKEN})
        assert locked.status_code == 429
        assert "Too many failed sign-ins" in locked.text
        assert "mogateway_console=" not in locked.headers.get("set-cookie", "")


def test_sign_in_needs_its_form_token_and_only_leads_to_console_pages(gw: ServedGateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        refused = client.post("/console/login", data={"token": ADMIN_TOKEN})  # no form token, no cookie
        assert refused.status_code == 403
        csrf = _signin_form(client)
        signed = client.post(
            "/console/login", data={"csrf": csrf, "token": ADMIN_TOKEN, "next": "//evil.example/x"}
        )
        assert signed.status_code == 303 and signed.headers["location"] == "/console/"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=28800" in cookie


def test_pages_carry_a_strict_policy_and_are_not_cached(gw: ServedGateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        page = client.get("/console/login")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert page.headers["cache-control"] == "no-store"
        assert page.headers["x-frame-options"] == "DENY"
        live = client.get("/console/live/overview")
        assert live.status_code == 401  # no session, no figures
        assert client.get("/console/clients", follow_redirects=False).status_code == 303


def test_the_console_can_be_turned_off(tmp_path: Path) -> None:
    with served_gateway(tmp_path / "gateway", console="false") as gw:
        assert gw.request("GET", "/console/login").status_code == 404
        assert gw.request("GET", "/docs").status_code == 200  # the API docs stay


def test_mogateway_serve_serves_the_console_its_assets_and_the_api_docs(gw: ServedGateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        assert "Admin token" in client.get("/console/login").text
        for asset in ("console/console.css", "console/console.js", "swagger-ui/swagger-ui-bundle.js"):
            assert client.get(f"/static/{asset}").status_code == 200, asset
        docs = client.get("/docs").text
        assert "/static/swagger-ui/swagger-ui-bundle.js" in docs and "cdn" not in docs
        redoc = client.get("/redoc").text
        assert "/static/redoc/redoc.standalone.js" in redoc and "fonts.googleapis" not in redoc
