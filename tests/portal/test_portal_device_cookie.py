"""Device cookies (docs/portal.md "Sign in"): failures typed as someone lock out every browser but their
own. Against ``mogateway serve`` with workers behind a trusted proxy on loopback, so that each request
says which address it comes from (``x-forwarded-for``), as an attacker rotating addresses would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_harness import ServedGateway, served_gateway
from gateway_harness import ADMIN_TOKEN

from mogateway.api.portal.devices import COOKIE, LIFETIME_S, device_cookie, device_key
from mogateway.testing.recorder import Answer, CallbackRecorder

from .portal_harness import PASSWORD, Tenant, accept, csrf_of, invite, tenant

WRONG = "wrong " * 3
THROTTLED = "Too many failed sign-ins"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    with served_gateway(tmp_path_factory.mktemp("device") / "gw", trusted_proxies="127.0.0.1") as gateway:
        yield gateway


@pytest.fixture(scope="module")
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("ok")) as recorder:
        yield recorder


def attempt(
    gw: ServedGateway, email: str, password: str, address: str, device: str | None = None, **headers: str
) -> httpx.Response:
    """One sign-in as a fresh browser at ``address`` would make it, showing ``device`` if given."""
    cookies = {COOKIE: device} if device is not None else None
    with httpx.Client(
        base_url=gw.url, timeout=20, headers={"x-forwarded-for": address}, cookies=cookies
    ) as browser:
        csrf = csrf_of(browser.get("/portal/login").text)
        return browser.post(
            "/portal/login",
            data={"csrf": csrf, "email": email, "password": password, "code": ""},
            headers=headers,
        )


def device_set_by(response: httpx.Response) -> str:
    """The device cookie's Set-Cookie header of a response ("" when it sets none)."""
    found = [h for h in response.headers.get_list("set-cookie") if h.startswith(COOKIE + "=")]
    assert len(found) <= 1, found
    return found[0] if found else ""


def device_of(response: httpx.Response) -> str:
    """The device cookie's value a successful sign-in gave."""
    assert response.status_code == 303, response.text[:500]
    header = device_set_by(response)
    assert header, response.headers.get_list("set-cookie")
    return header.split("=", 1)[1].split(";")[0]


def lock_out(gw: ServedGateway, email: str, net: str) -> None:
    """An attacker's ten wrong passwords as ``email``, each from another address of ``net``: the
    account's throttle refuses, no address's does."""
    for n in range(10):
        assert attempt(gw, email, WRONG, f"{net}.{n}").status_code == 401


def user_id_of(gw: ServedGateway, t: Tenant, email: str) -> str:
    users = gw.admin("GET", f"/v1/clients/{t.client['id']}/portal/users").json()["users"]
    return str(next(u["id"] for u in users if u["email"] == email))


def test_the_persons_own_browser_signs_in_while_an_attacker_keeps_the_account_throttled(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56701", mos=0)
    own = device_of(attempt(gw, a.admin_email, PASSWORD, "198.51.100.1"))
    lock_out(gw, a.admin_email, "203.0.113")
    # any browser without the cookie waits, the right password or not, from a fresh address
    refused = attempt(gw, a.admin_email, PASSWORD, "203.0.113.100")
    assert refused.status_code == 429 and THROTTLED in refused.text
    assert device_set_by(refused) == ""
    # the person's own browser signs in, from anywhere, and gets a new cookie
    again = attempt(gw, a.admin_email, PASSWORD, "198.51.100.2", own)
    assert again.status_code == 303 and again.headers["location"] == "/portal/"
    assert device_of(again) != own
    # the attacker goes on: everyone else still waits, the person still does not
    assert attempt(gw, a.admin_email, WRONG, "203.0.113.10").status_code == 429
    assert attempt(gw, a.admin_email, PASSWORD, "203.0.113.101").status_code == 429
    assert attempt(gw, a.admin_email, PASSWORD, "198.51.100.1", own).status_code == 303
    log = gw.log()
    assert len([x for x in log.splitlines() if "throttled by account" in x and a.admin_email in x]) == 1
    assert own not in log and PASSWORD not in log


def test_the_browser_that_accepted_the_invite_is_the_persons_own(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    """Accepting an invite signs in: that browser gets a device cookie as a sign-in's would, so a person
    locked out by someone else's failures before ever signing in again still gets in from it."""
    i = tenant(gw, app.url, "India", "56709", mos=0)
    email = "viewer@india.example"
    path = invite(gw, i.client["id"], email, "viewer")
    with httpx.Client(base_url=gw.url, timeout=20, headers={"x-forwarded-for": "198.51.100.90"}) as browser:
        assert browser.get(path).status_code == 200
        done = browser.post(path, data={"password": PASSWORD, "again": PASSWORD})
        assert done.status_code == 303 and done.headers["location"] == "/portal/account"
        header = device_set_by(done)
        assert "HttpOnly" in header and "SameSite=strict" in header and f"Max-Age={LIFETIME_S}" in header
        own = header.split("=", 1)[1].split(";")[0]
    lock_out(gw, email, "203.0.115")
    assert attempt(gw, email, PASSWORD, "203.0.115.100").status_code == 429
    assert attempt(gw, email, PASSWORD, "198.51.100.91", own).status_code == 303


def test_a_tampered_expired_foreign_or_other_accounts_cookie_is_no_cookie(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    b = tenant(gw, app.url, "Bravo", "56702", mos=0)
    c = tenant(gw, app.url, "Charlie", "56703", mos=0)
    own = device_of(attempt(gw, b.admin_email, PASSWORD, "198.51.100.11"))
    others = device_of(attempt(gw, c.admin_email, PASSWORD, "198.51.100.12"))
    lock_out(gw, b.admin_email, "203.0.114")
    user_id = user_id_of(gw, b, b.admin_email)
    key = device_key(ADMIN_TOKEN)  # no secret_key here: the admin token is what the gateway signs with
    # Accepting the invite set the password, which is generation 1 of the person's device cookies.
    now = int(time.time())
    nonce, exp, mac = own.split(".")
    flipped = mac[:10] + ("A" if mac[10] != "A" else "B") + mac[11:]
    bad = {
        "tampered": f"{nonce}.{exp}.{flipped}",
        "expiry moved": f"{nonce}.{int(exp) + 1}.{mac}",
        "expired": device_cookie(key, user_id, 1, now - 1),
        "another key": device_cookie(device_key("another secret of another gateway"), user_id, 1, now + 600),
        "an older generation": device_cookie(key, user_id, 0, now + 600),
        "another account's": others,
        "not one": "x" * 80,
    }
    for n, (what, value) in enumerate(bad.items()):
        refused = attempt(gw, b.admin_email, PASSWORD, f"198.51.100.{20 + n}", value)
        assert refused.status_code == 429 and THROTTLED in refused.text, what
        assert "Wrong" not in refused.text and device_set_by(refused) == "", what
    # the same rules made it: a cookie signed as the gateway signs is one
    made = device_cookie(key, user_id, 1, now + 600)
    assert attempt(gw, b.admin_email, PASSWORD, "198.51.100.40", made).status_code == 303
    assert attempt(gw, b.admin_email, PASSWORD, "198.51.100.41", own).status_code == 303


def test_a_cookies_own_failures_are_limited_and_its_address_still_counts(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    d = tenant(gw, app.url, "Delta", "56704", mos=0)
    own = device_of(attempt(gw, d.admin_email, PASSWORD, "198.51.100.50"))
    spare = device_of(attempt(gw, d.admin_email, PASSWORD, "198.51.100.51"))
    lock_out(gw, d.admin_email, "203.0.115")
    # the person's own typos are judged, not refused: five, each from another address
    for n in range(5):
        wrong = attempt(gw, d.admin_email, WRONG, f"192.0.2.{n}", own)
        assert wrong.status_code == 401 and "Wrong e-mail address" in wrong.text
    # then that cookie waits as any browser does; another browser's cookie does not
    refused = attempt(gw, d.admin_email, PASSWORD, "192.0.2.100", own)
    assert refused.status_code == 429 and THROTTLED in refused.text
    assert attempt(gw, d.admin_email, PASSWORD, "192.0.2.101", spare).status_code == 303
    # an address that failed five times waits, cookie or not
    for _ in range(5):
        assert attempt(gw, "nobody@delta.example", WRONG, "192.0.2.200").status_code == 401
    assert attempt(gw, d.admin_email, PASSWORD, "192.0.2.200", spare).status_code == 429
    log = gw.log()
    by_device = [x for x in log.splitlines() if "throttled by device cookie" in x]
    assert len(by_device) == 1 and repr(d.admin_email) in by_device[0], log[-3000:]
    assert own not in log and spare not in log
    assert own.split(".")[0] not in log


def test_the_cookies_flags_and_contents(gw: ServedGateway, app: CallbackRecorder) -> None:
    e = tenant(gw, app.url, "Echo", "56705", mos=0)
    # a failed sign-in sets none
    assert device_set_by(attempt(gw, e.admin_email, WRONG, "198.51.100.60")) == ""
    signed = attempt(gw, e.admin_email, PASSWORD, "198.51.100.61")
    header = device_set_by(signed)
    assert "HttpOnly" in header and "SameSite=strict" in header and "Path=/portal/" in header
    assert f"Max-Age={LIFETIME_S}" in header and LIFETIME_S == 30 * 24 * 3600
    assert "Secure" not in header  # served over http here
    value = device_of(signed)
    user_id = user_id_of(gw, e, e.admin_email)
    assert e.admin_email not in value and user_id not in value
    # over HTTPS (as the proxy says) it is Secure, as the session's cookie
    https = attempt(gw, e.admin_email, PASSWORD, "198.51.100.62", **{"x-forwarded-proto": "https"})
    assert https.status_code == 303 and "Secure" in device_set_by(https)


def test_disabling_a_person_or_signing_out_everywhere_ends_their_cookies(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    f = tenant(gw, app.url, "Foxtrot", "56706", mos=0)
    assert f.admin is not None
    viewer_email = "viewer@foxtrot.example"
    accept(gw.url, invite(gw, f.client["id"], viewer_email, "viewer"))
    viewers = device_of(attempt(gw, viewer_email, PASSWORD, "198.51.100.70"))
    admins = device_of(attempt(gw, f.admin_email, PASSWORD, "198.51.100.71"))
    lock_out(gw, viewer_email, "203.0.116")
    lock_out(gw, f.admin_email, "203.0.117")
    assert attempt(gw, viewer_email, PASSWORD, "198.51.100.72", viewers).status_code == 303
    assert attempt(gw, f.admin_email, PASSWORD, "198.51.100.73", admins).status_code == 303
    # the operator disables the viewer, then invites them again: the cookie from before is worth nothing
    # (and their old password too, until they accept: test_a_person_disabled_and_invited_again_...)
    viewer_id = user_id_of(gw, f, viewer_email)
    disabled = gw.admin("POST", f"/v1/clients/{f.client['id']}/portal/users/{viewer_id}/disable")
    assert disabled.json() == {"disabled": 1}
    invite(gw, f.client["id"], viewer_email, "viewer")
    refused = attempt(gw, viewer_email, PASSWORD, "198.51.100.74", viewers)
    assert refused.status_code == 429 and THROTTLED in refused.text
    # the admin signs out everywhere: their browsers' cookies go with their sessions
    csrf = csrf_of(f.admin.get("/portal/").text)
    assert f.admin.post("/portal/logout/everywhere", data={"csrf": csrf}).status_code == 303
    refused = attempt(gw, f.admin_email, PASSWORD, "198.51.100.75", admins)
    assert refused.status_code == 429 and THROTTLED in refused.text


def test_a_person_disabled_and_invited_again_signs_in_only_with_the_new_invites_password(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    """Invited again after being disabled, a person is enabled at once, but the password they had (it may
    be why they were disabled) signs in no more: only the one they set by accepting the new invite."""
    h = tenant(gw, app.url, "Hotel", "56708", mos=0)
    email = "viewer@hotel.example"
    accept(gw.url, invite(gw, h.client["id"], email, "viewer"))
    assert attempt(gw, email, PASSWORD, "198.51.100.80").status_code == 303
    viewer_id = user_id_of(gw, h, email)
    assert (
        gw.admin("POST", f"/v1/clients/{h.client['id']}/portal/users/{viewer_id}/disable").status_code == 200
    )
    assert attempt(gw, email, PASSWORD, "198.51.100.81").status_code == 401
    path = invite(gw, h.client["id"], email, "viewer")
    users = gw.admin("GET", f"/v1/clients/{h.client['id']}/portal/users").json()["users"]
    assert next(u for u in users if u["email"] == email)["disabled_at"] in (0, None)  # enabled again
    assert attempt(gw, email, PASSWORD, "198.51.100.82").status_code == 401  # the old password
    new_password = "a new one " * 2
    accept(gw.url, path, new_password)
    assert attempt(gw, email, PASSWORD, "198.51.100.83").status_code == 401
    assert attempt(gw, email, new_password, "198.51.100.84").status_code == 303


def test_with_a_secret_key_the_cookies_are_signed_under_it(tmp_path: Path) -> None:
    """A gateway with ``secret_key`` signs with a key derived from it: a cookie made under the admin
    token's (as before the key was set: a rotation) is no cookie there."""
    secret = "q" * 43 + "="
    with (
        CallbackRecorder.in_thread(Answer.text("ok")) as app,
        served_gateway(tmp_path / "gw", trusted_proxies="127.0.0.1", secret_key=secret) as gw,
    ):
        g = tenant(gw, app.url, "Golf", "56707", mos=0)
        own = device_of(attempt(gw, g.admin_email, PASSWORD, "198.51.100.80"))
        lock_out(gw, g.admin_email, "203.0.118")
        user_id = user_id_of(gw, g, g.admin_email)
        by_token = device_cookie(device_key(ADMIN_TOKEN), user_id, 1, int(time.time()) + 600)
        assert attempt(gw, g.admin_email, PASSWORD, "198.51.100.81", by_token).status_code == 429
        by_key = device_cookie(device_key(secret), user_id, 1, int(time.time()) + 600)
        assert attempt(gw, g.admin_email, PASSWORD, "198.51.100.82", by_key).status_code == 303
        assert attempt(gw, g.admin_email, PASSWORD, "198.51.100.83", own).status_code == 303
