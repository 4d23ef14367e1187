"""Helpers of the portal tests: two clients with traffic, their people invited and signed in over HTTP
as a browser would (forms, cookies, CSRF tokens)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from mogateway.core import totp

PASSWORD = "correct horse battery staple"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:500]
    return found[1]


def invite(gw: Any, client_id: str, email: str, role: str = "admin") -> str:
    """Invite through the admin API; the invite path."""
    resp = gw.admin("POST", f"/v1/clients/{client_id}/portal/invites", json={"email": email, "role": role})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["invite_path"])


def accept(url: str, path: str, password: str = PASSWORD) -> httpx.Client:
    """Open an invite link and set the password: a signed-in browser (its cookies)."""
    browser = httpx.Client(base_url=url, timeout=20)
    page = browser.get(path)
    assert page.status_code == 200, page.text
    done = browser.post(path, data={"password": password, "again": password})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/portal/account"
    return browser


def sign_in(url: str, email: str, password: str = PASSWORD, code: str = "") -> httpx.Response:
    browser = httpx.Client(base_url=url, timeout=20)
    csrf = csrf_of(browser.get("/portal/login").text)
    return browser.post(
        "/portal/login", data={"csrf": csrf, "email": email, "password": password, "code": code}
    )


def turn_totp_on(browser: httpx.Client) -> tuple[bytes, list[str]]:
    """Turn TOTP on through the Account page: (the secret, the recovery codes)."""
    page = browser.get("/portal/account").text
    started = browser.post("/portal/account/totp/start", data={"csrf": csrf_of(page)})
    secret = re.search(
        r'id="totp-secret" class="mono" type="text" readonly value="([A-Z2-7]+)"', started.text
    )
    assert secret, started.text[:800]
    raw = totp.from_base32(secret[1])
    done = browser.post(
        "/portal/account/totp",
        data={"csrf": csrf_of(started.text), "secret": secret[1], "code": totp.totp(raw, time.time())},
    )
    assert done.status_code == 303, done.text
    shown = browser.get("/portal/account").text
    codes = re.findall(r"<li>([a-z2-9]{5}-[a-z2-9]{5})</li>", shown)
    assert len(codes) == 10, shown[:2000]
    return raw, codes


@dataclass
class Tenant:
    """One client with its traffic and people."""

    client: dict[str, Any]
    shortcode: str
    messages: list[str] = field(default_factory=list)
    admin: httpx.Client | None = None
    admin_email: str = ""


def tenant(gw: Any, callback_url: str, name: str, shortcode: str, mos: int = 3) -> Tenant:
    client = gw.add_client(shortcodes=[shortcode], callback_url=callback_url, name=name)
    found = Tenant(client, shortcode)
    for n in range(mos):
        found.messages.append(gw.push(shortcode, f"VOTE {n}", msisdn=f"9198100{n}{shortcode}"[:12])["id"])
    for mid in found.messages:
        gw.wait_state(mid)
    email = f"admin@{name.lower()}.example"
    found.admin = accept(gw.url, invite(gw, client["id"], email, "admin"))
    found.admin_email = email
    return found
