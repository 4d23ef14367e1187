"""What operators do with the portal: invite from a shell (``mogateway clients invite``) and from the
console, disable people, read a client's audit; the link works once."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
from console_harness import ServedGateway
from gateway_harness import ADMIN_TOKEN

from mogateway.testing.recorder import CallbackRecorder

from .portal_harness import PASSWORD, csrf_of, sign_in


def _cli(gw: ServedGateway, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MOGATEWAY_URL": gw.url, "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "mogateway", "clients", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_invite_from_the_cli_the_link_works_once(gw: ServedGateway, app: CallbackRecorder) -> None:
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url, name="Alpha")
    done = _cli(gw, "invite", client["id"], "--email", "Ann@Alpha.example", "--role", "admin")
    assert done.returncode == 0, done.stderr
    link = re.search(r"^(http://\S+/portal/invite/\S+)$", done.stdout, re.M)
    assert link, done.stdout
    with httpx.Client(timeout=20) as browser:
        assert "ann@alpha.example" in browser.get(link[1]).text
        set_pw = browser.post(link[1], data={"password": PASSWORD, "again": PASSWORD})
        assert set_pw.status_code == 303
        again = browser.post(link[1], data={"password": "another password!", "again": "another password!"})
        assert again.status_code == 404 and "used, expired or unknown" in again.text
    assert sign_in(gw.url, "ann@alpha.example").status_code == 303
    bad = _cli(gw, "invite", client["id"], "--email", "not-an-address")
    assert bad.returncode != 0 and "e-mail" in (bad.stdout + bad.stderr)
    assert _cli(gw, "invite", "cl_nosuch", "--email", "x@y.example").returncode != 0
    assert _cli(gw, "rotate-token", client["id"]).returncode == 0
    gw.admin("PATCH", f"/v1/clients/{client['id']}", json={"timeout_s": 5})
    audit = gw.admin("GET", f"/v1/clients/{client['id']}/audit").json()["audit"]
    assert [(e["actor"], e["action"], e["detail"]) for e in audit[:2]] == [
        ("operator", "changed", "timeout_s"),
        ("operator", "bearer token rotated", "at once"),
    ]
    off = _cli(gw, "portal-disable", client["id"])
    assert off.returncode == 0 and "disabled 1" in off.stdout
    assert sign_in(gw.url, "ann@alpha.example").status_code == 401


def test_the_console_invites_disables_and_shows_the_audit(gw: ServedGateway, app: CallbackRecorder) -> None:
    client = gw.add_client(shortcodes=["56767"], callback_url=app.url, name="Alpha")
    with httpx.Client(base_url=gw.url, timeout=20) as console:
        csrf = csrf_of(console.get("/console/login").text)
        assert console.post("/console/login", data={"csrf": csrf, "token": ADMIN_TOKEN}).status_code == 303
        page = console.get(f"/console/clients/{client['id']}/portal")
        assert page.status_code == 200 and "Nobody yet." in page.text
        csrf = csrf_of(page.text)
        sent = console.post(
            f"/console/clients/{client['id']}/portal/invite", data={"csrf": csrf, "email": "b@alpha.example"}
        )
        assert sent.status_code == 303
        shown = console.get(f"/console/clients/{client['id']}/portal").text
        link = re.search(r'id="invite-link" class="mono" type="text" readonly value="([^"]+)"', shown)
        assert link and "/portal/invite/" in link[1]
        assert link[1] not in console.get(f"/console/clients/{client['id']}/portal").text  # shown once
        with httpx.Client(timeout=20) as person:
            assert person.post(link[1], data={"password": PASSWORD, "again": PASSWORD}).status_code == 303
            assert person.get(gw.url + "/portal/", follow_redirects=False).status_code == 200
            user_id = gw.admin("GET", f"/v1/clients/{client['id']}/portal/users").json()["users"][0]["id"]
            off = console.post(
                f"/console/clients/{client['id']}/portal/users/{user_id}/disable", data={"csrf": csrf}
            )
            assert off.status_code == 303
            assert person.get(gw.url + "/portal/", follow_redirects=False).status_code == 303
        page = console.get(f"/console/clients/{client['id']}/portal").text
        assert "disabled" in page and "password set" in page and "invite" in page
        other = console.get("/console/clients/cl_nosuch/portal")
        assert other.status_code == 404
