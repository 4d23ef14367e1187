"""The portal's rules that need no browser, against ``mogateway serve`` with workers: sign-in with a
password and TOTP, cookie flags, the throttle, roles, sign-out everywhere, disabling people, the
callback URL's SSRF rule, and the bearer token's overlap on the real callback path."""

from __future__ import annotations

import html as html_lib
import re
import time
from pathlib import Path

import httpx
import segno
from console_harness import ServedGateway, fresh_get
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, GatewayClient, clean_env, start_serve

from mogateway.core import totp
from mogateway.testing.recorder import Answer, CallbackRecorder

from .portal_harness import PASSWORD, accept, csrf_of, invite, sign_in, tenant, turn_totp_on


def test_sign_in_with_totp_and_recovery_codes_cookie_flags_and_the_throttle(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    raw, codes = turn_totp_on(a.admin)
    no_code = sign_in(gw.url, a.admin_email)
    assert no_code.status_code == 401 and "Wrong e-mail address, password or code." in no_code.text
    signed = sign_in(gw.url, a.admin_email, code=totp.totp(raw, time.time() + 30))
    assert signed.status_code == 303 and signed.headers["location"] == "/portal/"
    cookie = signed.headers["set-cookie"]
    assert "mogateway_portal=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/portal/" in cookie and "Max-Age=28800" in cookie
    # the same code again (a replay), on any worker: refused
    assert sign_in(gw.url, a.admin_email, code=totp.totp(raw, time.time() + 30)).status_code == 401
    assert sign_in(gw.url, a.admin_email, code=codes[0]).status_code == 303
    # the session cookie works on every worker, and not for the console
    session = cookie.split("mogateway_portal=")[1].split(";")[0]
    with httpx.Client(cookies={"mogateway_portal": session}, timeout=10) as browser:
        for _ in range(4):
            assert browser.get(gw.url + "/portal/").status_code == 200
        assert browser.get(gw.url + "/console/", follow_redirects=False).status_code == 303
    # five failures from one address (two above): then even the right password waits
    for _ in range(3):
        assert sign_in(gw.url, a.admin_email, password="wrong " * 3).status_code == 401
    locked = sign_in(gw.url, a.admin_email, code=codes[1])
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.text


def test_rotating_addresses_against_one_account_is_throttled_too(tmp_path: Path) -> None:
    from console_harness import served_gateway

    def from_address(gw: ServedGateway, address: str, email: str, password: str) -> httpx.Response:
        """A sign-in as a browser at ``address`` would make it, through the trusted proxy on loopback."""
        with httpx.Client(base_url=gw.url, timeout=20, headers={"x-forwarded-for": address}) as browser:
            csrf = csrf_of(browser.get("/portal/login").text)
            return browser.post(
                "/portal/login", data={"csrf": csrf, "email": email, "password": password, "code": ""}
            )

    with (
        CallbackRecorder.in_thread(Answer.text("ok")) as app,
        served_gateway(tmp_path / "gw", trusted_proxies="127.0.0.1") as gw,
    ):
        a = tenant(gw, app.url, "Alpha", "56767", mos=0)
        b = tenant(gw, app.url, "Bravo", "56999", mos=0)
        # ten wrong passwords for Alpha's admin, each from another address: no address reaches its five
        for n in range(10):
            assert from_address(gw, f"203.0.113.{n}", a.admin_email, "wrong " * 3).status_code == 401
        locked = from_address(gw, "203.0.113.200", a.admin_email.upper(), PASSWORD)
        assert locked.status_code == 429 and "Too many failed sign-ins" in locked.text
        # the account is throttled, not the addresses, nor another account
        assert from_address(gw, "203.0.113.1", b.admin_email, PASSWORD).status_code == 303
        # an address that failed five times is throttled for every account
        for _ in range(5):
            assert from_address(gw, "198.51.100.7", b.admin_email, "wrong " * 3).status_code == 401
        assert from_address(gw, "198.51.100.7", b.admin_email, PASSWORD).status_code == 429
        assert from_address(gw, "198.51.100.8", b.admin_email, PASSWORD).status_code == 303
        log = gw.log()
        by_account = [line for line in log.splitlines() if "throttled by account" in line]
        by_address = [line for line in log.splitlines() if "throttled by address" in line]
        assert len(by_account) == 1 and repr(a.admin_email) in by_account[0], log[-3000:]
        assert len(by_address) == 1 and "198.51.100.7" in by_address[0], log[-3000:]
        assert PASSWORD not in log


def test_roles_sign_out_everywhere_and_an_operator_disabling_people(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    viewer = accept(gw.url, invite(gw, a.client["id"], "viewer@alpha.example", "viewer"))
    page = viewer.get("/portal/callback").text
    assert 'name="callback_url"' not in page and "Only your team's admins" in page
    refused = viewer.post(
        "/portal/callback", data={"csrf": csrf_of(page), "callback_url": "http://x.example/"}
    )
    assert refused.status_code == 403
    refused = viewer.post("/portal/credentials/token", data={"csrf": csrf_of(page), "overlap_minutes": "0"})
    assert refused.status_code == 403
    # a POST without the CSRF token, or from another site, changes nothing
    assert a.admin.post("/portal/credentials/token", data={"overlap_minutes": "0"}).status_code == 403
    csrf = csrf_of(a.admin.get("/portal/").text)
    other_site = a.admin.post(
        "/portal/credentials/token", data={"csrf": csrf}, headers={"sec-fetch-site": "cross-site"}
    )
    assert other_site.status_code == 403
    # sign out everywhere: both of the admin's browsers, on every worker
    second = sign_in(gw.url, a.admin_email)
    cookie = second.headers["set-cookie"].split("mogateway_portal=")[1].split(";")[0]
    assert fresh_get(gw.url + "/portal/", None).status_code == 303
    a.admin.post("/portal/logout/everywhere", data={"csrf": csrf})
    with httpx.Client(cookies={"mogateway_portal": cookie}, timeout=10) as browser:
        assert browser.get(gw.url + "/portal/", follow_redirects=False).status_code == 303
    assert a.admin.get("/portal/", follow_redirects=False).status_code == 303
    assert viewer.get("/portal/", follow_redirects=False).status_code == 200  # another person's session
    # the operator disables every person of the client: the viewer is out at once, and cannot sign in
    users = gw.admin("GET", f"/v1/clients/{a.client['id']}/portal/users").json()["users"]
    assert {u["email"] for u in users} == {a.admin_email, "viewer@alpha.example"}
    assert gw.admin("POST", f"/v1/clients/{a.client['id']}/portal/disable").json() == {"disabled": 2}
    assert viewer.get("/portal/", follow_redirects=False).status_code == 303
    assert sign_in(gw.url, "viewer@alpha.example").status_code == 401
    audit = gw.admin("GET", f"/v1/clients/{a.client['id']}/audit").json()["audit"]
    assert audit[0]["action"] == "disable all" and audit[0]["actor"] == "operator"


def test_the_callback_url_follows_the_admin_apis_rules(gw: ServedGateway, app: CallbackRecorder) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    csrf = csrf_of(a.admin.get("/portal/callback").text)
    bad = a.admin.post("/portal/callback", data={"csrf": csrf, "callback_url": "ftp://example.com/x"})
    assert bad.status_code == 422 and "callback_url" in bad.text
    assert gw.admin("GET", f"/v1/clients/{a.client['id']}").json()["callback_url"] == app.url


def test_a_private_callback_url_is_refused_when_the_gateway_refuses_private_addresses(tmp_path: Path) -> None:
    env = clean_env(MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN)
    served = start_serve(tmp_path, env)
    gw = GatewayClient(url=served.url)
    try:
        client = gw.add_client(shortcodes=["56767"], callback_url="https://93.184.216.34/cb", name="Alpha")
        browser = accept(gw.url, invite(gw, client["id"], "a@alpha.example"))
        csrf = csrf_of(browser.get("/portal/callback").text)
        for url in ("http://127.0.0.1:9/x", "http://10.0.0.1/x", "http://169.254.169.254/latest"):
            refused = browser.post("/portal/callback", data={"csrf": csrf, "callback_url": url})
            assert refused.status_code == 422, url
        assert (
            gw.admin("GET", f"/v1/clients/{client['id']}").json()["callback_url"]
            == "https://93.184.216.34/cb"
        )
    finally:
        gw.close()
        served.stop()


def test_a_rotated_token_has_an_overlap_on_the_callback_path(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    old = a.client["token"]
    csrf = csrf_of(a.admin.get("/portal/credentials").text)
    a.admin.post("/portal/credentials/token", data={"csrf": csrf, "overlap_minutes": "60"})
    shown = a.admin.get("/portal/credentials").text
    assert "New bearer token" in shown and "callbacks carry the new token from" in shown
    new = shown.split('id="new-secret" class="mono" type="text" readonly value="')[1].split('"')[0]
    assert new != old and new not in a.admin.get("/portal/credentials").text  # shown once
    app.clear()
    gw.wait_state(gw.push("56767", "VOTE 1")["id"])
    assert app.calls[-1].headers["authorization"] == f"Bearer {old}"  # the overlap: still the old one
    csrf = csrf_of(a.admin.get("/portal/credentials").text)
    a.admin.post("/portal/credentials/token", data={"csrf": csrf, "overlap_minutes": "0"})
    newest = a.admin.get("/portal/credentials").text.split('readonly value="')[1].split('"')[0]
    deadline = time.monotonic() + 10
    while True:  # every worker picks the change up (at once, or within the registry's refresh)
        app.clear()
        gw.wait_state(gw.push("56767", "VOTE 2")["id"])
        if app.calls[-1].headers["authorization"] == f"Bearer {newest}" or time.monotonic() > deadline:
            break
    assert app.calls[-1].headers["authorization"] == f"Bearer {newest}"
    # the signing secret: made (signing on), shown once, then callbacks are signed
    csrf = csrf_of(a.admin.get("/portal/credentials").text)
    a.admin.post("/portal/credentials/signing-secret", data={"csrf": csrf, "overlap_minutes": "5"})
    assert "New signing secret" in a.admin.get("/portal/credentials").text
    app.clear()
    gw.wait_state(gw.push("56767", "VOTE 3")["id"])
    assert "x-mogateway-signature" in app.calls[-1].headers


def test_test_my_endpoint_sends_a_whatsapp_clients_callback_as_production_does(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[], whatsapp_numbers=["919876543210"], callback_url=app.url, name="Wa")
    browser = accept(gw.url, invite(gw, client["id"], "w@wa.example"))
    csrf = csrf_of(browser.get("/portal/callback").text)
    app.clear()
    shown = browser.post(
        "/portal/callback/test", data={"csrf": csrf, "message": "HI", "msisdn": "9810012345"}
    )
    assert shown.status_code == 200 and 'data-outcome="reply"' in shown.text
    (call,) = app.calls
    body = call.json()
    assert body["channel"] == "whatsapp" and body["shortcode"] == 919876543210 and body["message"] == "HI"
    assert call.headers["authorization"] == f"Bearer {client['token']}"
    assert call.headers["x-mogateway-message-id"].startswith("test-")
    # nothing stored, nothing replied
    assert gw.admin("GET", "/v1/messages", params={"shortcode": "919876543210"}).json()["messages"] == []


def test_test_my_endpoint_shows_the_answers_headers_escaped_and_masked(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    csrf = csrf_of(a.admin.get("/portal/callback").text)
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    app.then(
        Answer.text(
            "Thanks",
            headers=(
                ("X-Request-Id", "req-4711"),
                ("X-Hostile", hostile),
                ("Set-Cookie", "sid=cookie-secret-value; Path=/; HttpOnly"),
                ("X-Api-Key", "key-secret-value"),
                ("WWW-Authenticate", 'Bearer realm="auth-secret-value"'),
            ),
        )
    )
    shown = a.admin.post("/portal/callback/test", data={"csrf": csrf, "message": "HI"})
    assert shown.status_code == 200 and 'data-outcome="reply"' in shown.text
    headers = shown.text.split('id="answer-headers">')[1].split("</ul>")[0]
    assert "<li>x-request-id: req-4711</li>" in headers
    assert "<li>content-type: text/plain; charset=utf-8</li>" in headers
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert f"<li>x-hostile: {escaped}</li>" in headers
    assert "<script>" not in shown.text.split("</main>")[0].split('id="test-result"')[1]
    assert "<li>set-cookie: sid=… (masked); Path=/; HttpOnly</li>" in headers
    assert "<li>x-api-key: … (masked, 16 characters)</li>" in headers
    assert "www-authenticate: … (masked" in headers
    assert "secret-value" not in shown.text
    # an answer that is no reply: its status, headers and body as it came, escaped
    app.then(Answer.with_status(500, b"<h1>Internal error</h1>", headers=(("Retry-After", "120"),)))
    failed = a.admin.post("/portal/callback/test", data={"csrf": csrf, "message": "HI"})
    assert 'data-outcome="http_error"' in failed.text and '<dd data-figure="status">500</dd>' in failed.text
    assert (
        '<pre class="mono small" data-figure="raw-body">&lt;h1&gt;Internal error&lt;/h1&gt;</pre>'
        in failed.text
    )
    assert "<li>retry-after: 120</li>" in failed.text


def _dark_cells(svg: str) -> set[tuple[int, int]]:
    """The dark modules an inline SVG QR code draws (segno's dark path: horizontal runs a module high,
    after a quiet zone of 4 modules; the white square under it is another path)."""
    d = re.search(r' stroke="#000" d="([^"]+)"', svg)
    assert d, svg[:300]
    x = y = 0.0
    cells = set()
    for op, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?: (-?[\d.]+))?", d[1]):
        if op == "M":
            x, y = float(a), float(b)
        elif op == "m":
            x, y = x + float(a), y + float(b)
        else:
            cells |= {(int(y - 0.5) - 4, int(x) + n - 4) for n in range(int(a))}
            x += float(a)
    return cells


def test_the_totp_key_is_shown_as_a_qr_code_drawn_in_the_page(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    page = a.admin.get("/portal/account").text
    started = a.admin.post("/portal/account/totp/start", data={"csrf": csrf_of(page)}).text
    uri = html_lib.unescape(re.search(r'<p class="small uri"><a href="([^"]+)"', started)[1])  # type: ignore[index]
    assert uri.startswith("otpauth://totp/") and "secret=" in uri
    svg = re.search(r'<div class="qr-code">(<svg .*?</svg>)</div>', started, re.S)
    assert svg, started[:3000]
    assert 'role="img" aria-label="QR code for your authenticator app"' in svg[1]
    assert "<script" not in svg[1] and "href" not in svg[1] and "<image" not in svg[1]  # drawn, not fetched
    matrix = segno.make(uri, error="m", micro=False).matrix  # what a scanner reads back: the link's data
    expected = {(r, c) for r, row in enumerate(matrix) for c, dark in enumerate(row) if dark}
    assert _dark_cells(svg[1]) == expected
    # the app's code for that key turns it on, as before (the QR code changes nothing else)
    secret = re.search(r"secret=([A-Z2-7]+)", uri)
    assert secret is not None
    done = a.admin.post(
        "/portal/account/totp",
        data={
            "csrf": csrf_of(started),
            "secret": secret[1],
            "code": totp.totp(totp.from_base32(secret[1]), time.time()),
        },
    )
    assert done.status_code == 303


def test_the_portal_can_be_turned_off(tmp_path: Path) -> None:
    from console_harness import served_gateway

    with served_gateway(tmp_path / "gw", portal="false") as gw:
        assert gw.request("GET", "/portal/login").status_code == 404
        assert gw.request("GET", "/console/login").status_code == 200
