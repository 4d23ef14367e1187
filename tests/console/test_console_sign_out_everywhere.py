"""Console sessions are bound to the admin token they were opened with, and can all be ended at once.

A default gateway (several workers). Restarting it with a new ``MOGATEWAY_ADMIN_TOKEN`` signs every
browser out: the old cookie is sent to sign in (a live stream gets 401), a form sent with it changes
nothing, and its row leaves the journal. *Sign out everywhere* (the console's button, with the CSRF
token like every form, and ``mogateway console sessions revoke --all``) ends every session.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess

import httpx
from console_harness import ServedGateway, fresh_get
from gateway_harness import ADMIN_TOKEN, clean_env, mogateway_command

COOKIE = "mogateway_console"
NEW_ADMIN_TOKEN = "rotated-admin-token-0123456789ab"


def _session(url: str, token: str = ADMIN_TOKEN) -> str:
    with httpx.Client(base_url=url, timeout=10) as client:
        form = client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf, form.text[:300]
        answer = client.post("/console/login", data={"csrf": csrf[1], "token": token})
        assert answer.status_code == 303, answer.text[:300]
        return str(answer.cookies[COOKIE])


def _csrf(url: str, cookie: str) -> str:
    page = fresh_get(url + "/console/clients", cookie)
    assert page.status_code == 200, page.status_code
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found
    return found[1]


def _post(url: str, path: str, cookie: str, data: dict[str, str]) -> httpx.Response:
    with httpx.Client(cookies={COOKIE: cookie}, timeout=10) as client:
        return client.post(url + path, data=data, follow_redirects=False)


def _client_form(name: str, shortcode: str, csrf: str) -> dict[str, str]:
    return {"csrf": csrf, "name": name, "shortcodes": shortcode, "callback_url": "http://127.0.0.1:9/cb"}


def _session_rows(gw: ServedGateway) -> int:
    with sqlite3.connect(gw.workdir / "mogateway.db") as db:
        return int(db.execute("SELECT count(*) FROM console_sessions").fetchone()[0])


def _signed_out(gw: ServedGateway, cookie: str) -> None:
    page = fresh_get(gw.url + "/console/clients", cookie)
    assert page.status_code == 303 and page.headers["location"].startswith("/console/login"), page.status_code
    assert fresh_get(gw.url + "/console/live/overview", cookie).status_code == 401


def test_a_new_admin_token_signs_every_browser_out_and_the_old_cookie_changes_nothing(
    gw: ServedGateway,
) -> None:
    cookie = _session(gw.url)
    csrf = _csrf(gw.url, cookie)
    made = _post(gw.url, "/console/clients", cookie, _client_form("Before", "52001", csrf))
    assert made.status_code == 303, made.text[:300]  # the cookie and its form work...

    gw.env["MOGATEWAY_ADMIN_TOKEN"] = gw.admin_token = NEW_ADMIN_TOKEN
    gw.restart()
    assert gw.admin("GET", "/v1/clients").status_code == 200  # the API takes the new token
    assert gw.request("GET", "/v1/clients", token=ADMIN_TOKEN).status_code == 401

    refused = _post(gw.url, "/console/clients", cookie, _client_form("After", "52002", csrf))
    assert refused.status_code == 303 and refused.headers["location"].startswith("/console/login")
    names = [c["name"] for c in gw.admin("GET", "/v1/clients").json()["clients"]]
    assert names == ["Before"]  # ...and after the rotation it created nothing
    _signed_out(gw, cookie)
    assert _session_rows(gw) == 0  # the refused session is gone from the journal

    fresh = _session(gw.url, NEW_ADMIN_TOKEN)  # a session opened with the new token works
    assert fresh_get(gw.url + "/console/clients", fresh).status_code == 200


def test_sign_out_everywhere_from_the_console_ends_every_session(gw: ServedGateway) -> None:
    mine, other = _session(gw.url), _session(gw.url)
    page = fresh_get(gw.url + "/console/", mine)
    assert 'formaction="/console/logout/everywhere"' in page.text  # the button, in the CSRF form

    forged = _post(gw.url, "/console/logout/everywhere", mine, {"csrf": "not-the-token"})
    assert forged.status_code == 403
    assert fresh_get(gw.url + "/console/clients", other).status_code == 200  # nothing ended

    done = _post(gw.url, "/console/logout/everywhere", mine, {"csrf": _csrf(gw.url, mine)})
    assert done.status_code == 303 and done.headers["location"] == "/console/login"
    _signed_out(gw, mine)
    _signed_out(gw, other)
    assert _session_rows(gw) == 0


def test_mogateway_console_sessions_revoke_all_ends_every_session(gw: ServedGateway) -> None:
    cookies = [_session(gw.url) for _ in range(3)]
    env = clean_env(MOGATEWAY_URL=gw.url, MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN)
    command = [*mogateway_command(), "console", "sessions", "revoke"]
    vague = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert vague.returncode == 2 and "--all" in vague.stderr  # says what it would do
    assert fresh_get(gw.url + "/console/clients", cookies[0]).status_code == 200

    done = subprocess.run([*command, "--all"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "3 console sessions ended" in done.stdout
    for cookie in cookies:
        _signed_out(gw, cookie)
    wrong = subprocess.run(
        [*command, "--all", "--token", "not-the-admin-token-0123456789"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 4 and "401" in wrong.stderr
