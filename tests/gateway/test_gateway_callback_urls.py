"""Callback URLs a gateway must never call, and URLs it must call exactly as written down.

* IPv6 forms that carry a refused IPv4 address (IPv4-compatible, NAT64, 6to4, Teredo) and the
  deprecated site-local range: refused at registration (422 problem) and again when connecting.
* Control characters and spaces: refused at registration (API and CLI); non-ASCII: percent-encoded
  once, at registration, and for a URL an older version stored, at send time — never a failure there.

On ``mogateway serve`` with several workers (a strict and a lenient one shared by the module, each test on
shortcodes of its own). A URL "an older version stored" is written into the stopped gateway's journal,
which the gateway then starts on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, Codes, ServeGateway, outcome, serve_gateway
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.testing.recorder import CallbackRecorder

SC = "56767"

#: Each carries 127.0.0.1, 169.254.169.254 (cloud metadata) or 10.0.0.1 inside an IPv6 address, or is in a
#: range that never leaves the site.
EMBEDDED_IPV4_URLS = [
    "http://[::7f00:1]:9/cb",  # IPv4-compatible ::/96 → 127.0.0.1
    "http://[::a9fe:a9fe]/latest/meta-data/",  # → 169.254.169.254
    "http://[64:ff9b::7f00:1]:9/cb",  # NAT64 well-known prefix → 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    "http://[64:ff9b::a00:1]/cb",  # → 10.0.0.1
    "http://[64:ff9b:1::5db8:d822]/cb",  # NAT64 local-use prefix (RFC 8215): refused whatever it carries
    "http://[2002:7f00:1::]:9/cb",  # 6to4 → 127.0.0.1
    "http://[2002:a9fe:a9fe::]/latest/meta-data/",
    "http://[2001:0:5db8:d822:0:0:80ff:fffe]/cb",  # Teredo, client 127.0.0.1 (obfuscated)
    "http://[fec0::1]/cb",  # deprecated site-local fec0::/10
]

#: The same prefixes carrying a public address: the embedded address decides, not the prefix.
EMBEDDED_PUBLIC_URLS = ["http://[64:ff9b::5db8:d822]/cb", "http://[2002:5db8:d822::1]/cb"]

#: Characters that must never reach a request line (a JSON string can carry every one of them).
CONTROL_PATHS = {
    "space": "/call back",
    "CR LF": "/cb\r\nx-injected: 1",
    "LF": "/cb\nx",
    "TAB": "/c\tb",
    "NUL": "/cb\x00",
    "DEL": "/cb\x7f",
    "C1 NEL": "/cb\x85",
    "no-break space": "/cb\xa0x",
}


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    with serve_gateway(tmp_path_factory.mktemp("strict"), allow_private_callbacks=False) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def lenient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    with serve_gateway(tmp_path_factory.mktemp("lenient")) as gateway:
        yield gateway


def register(gw: ServeGateway, url: str, shortcode: str = SC) -> Any:
    return gw.admin("POST", "/v1/clients", json={"name": "x", "shortcodes": [shortcode], "callback_url": url})


def assert_url_problem(resp: Any, *words: str) -> None:
    assert resp.status_code == 422, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    problem = resp.json()
    assert problem["field"] == "callback_url"
    for word in words:
        assert word in problem["detail"], problem


# ------------------------------------------------------------------------ IPv6 forms carrying IPv4


@pytest.mark.parametrize("url", EMBEDDED_IPV4_URLS)
def test_ipv6_forms_carrying_a_refused_ipv4_are_refused_at_registration(
    strict: ServeGateway, url: str
) -> None:
    assert_url_problem(register(strict, url), "private, loopback or reserved")


def test_a_patch_to_an_ipv6_form_carrying_a_refused_ipv4_is_refused(strict: ServeGateway) -> None:
    created = register(strict, "http://93.184.216.34/cb", shortcode="56001")
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    resp = strict.admin("PATCH", f"/v1/clients/{cid}", json={"callback_url": "http://[64:ff9b::a9fe:a9fe]/"})
    assert_url_problem(resp, "private, loopback or reserved")
    assert strict.admin("GET", f"/v1/clients/{cid}").json()["callback_url"] == "http://93.184.216.34/cb"
    assert strict.admin("DELETE", f"/v1/clients/{cid}").status_code == 204


@pytest.mark.parametrize("url", EMBEDDED_PUBLIC_URLS)
def test_the_same_prefixes_carrying_a_public_ipv4_are_accepted(strict: ServeGateway, url: str) -> None:
    created = register(strict, url, shortcode="56002")
    assert created.status_code == 201, created.text
    assert strict.admin("DELETE", f"/v1/clients/{created.json()['id']}").status_code == 204


def test_ipv6_forms_carrying_a_refused_ipv4_are_refused_again_when_connecting(tmp_path: Path) -> None:
    """Registered while private callbacks were allowed, dispatched after they no longer are."""
    shortcodes = [str(57000 + i) for i in range(len(EMBEDDED_IPV4_URLS))]
    with serve_gateway(tmp_path, allow_private_callbacks=True, log_name="lenient") as lenient:
        for shortcode, url in zip(shortcodes, EMBEDDED_IPV4_URLS, strict=True):
            lenient.add_client(shortcodes=[shortcode], callback_url=url, timeout_s=5)
    with serve_gateway(tmp_path, allow_private_callbacks=False, log_name="strict") as strict:
        ids = [strict.push(shortcode, "HELLO")["id"] for shortcode in shortcodes]
        for url, message_id in zip(EMBEDDED_IPV4_URLS, ids, strict=True):
            msg = strict.wait_state(message_id)
            assert msg["state"] == "failed", (url, msg)
            assert "refused URL" in outcome(msg)["detail"], (url, outcome(msg))


# ------------------------------------------------------------------------ characters in the URL


@pytest.mark.parametrize("path", CONTROL_PATHS.values(), ids=CONTROL_PATHS.keys())
def test_control_characters_and_spaces_are_refused_at_registration(
    lenient: ServeGateway, codes: Codes, app: CallbackRecorder, path: str
) -> None:
    assert_url_problem(register(lenient, app.base_url + path), "is not allowed in a URL")
    clients = lenient.admin("GET", "/v1/clients").json()["clients"]
    assert [c for c in clients if c["callback_url"].startswith(app.base_url)] == []


def test_control_characters_are_refused_in_a_patch(
    lenient: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    cid = lenient.add_client(shortcodes=[codes[0]], callback_url=app.url)["id"]
    for path in CONTROL_PATHS.values():
        resp = lenient.admin("PATCH", f"/v1/clients/{cid}", json={"callback_url": app.base_url + path})
        assert_url_problem(resp, "is not allowed in a URL")
    assert lenient.admin("GET", f"/v1/clients/{cid}").json()["callback_url"] == app.url


def test_a_non_ascii_url_is_stored_percent_encoded_and_called_that_way(
    lenient: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    created = lenient.add_client(shortcodes=[codes[0]], callback_url=app.base_url + "/café?städte=köln")
    assert created["callback_url"] == app.base_url + "/caf%C3%A9?st%C3%A4dte=k%C3%B6ln"
    msg = lenient.wait_state(lenient.push(codes[0], "HELLO")["id"])
    assert msg["state"] == "replied", msg
    assert [c.path for c in app.calls] == ["/caf%C3%A9?st%C3%A4dte=k%C3%B6ln"]


def stored_by_an_older_version(tmp_path: Path, shortcode: str, app: CallbackRecorder, path: str) -> None:
    """A client on ``shortcode`` whose callback URL is ``app`` + ``path`` exactly as written, as a version
    without the registration check would have stored it: registered, the gateway stopped, the URL
    written into its journal (the test then starts a gateway on it)."""
    with serve_gateway(tmp_path, log_name="before") as before:
        cid = before.add_client(shortcodes=[shortcode], callback_url=app.url)["id"]
    with sqlite3.connect(tmp_path / "journal.db") as db:
        changed = db.execute(
            "UPDATE clients SET doc = json_set(doc, '$.callback_url', ?) WHERE id = ?",
            (app.base_url + path, cid),
        )
        assert changed.rowcount == 1
    db.close()


def test_a_non_ascii_url_stored_by_an_older_version_is_called_not_failed(
    tmp_path: Path, codes: Codes, app: CallbackRecorder
) -> None:
    stored_by_an_older_version(tmp_path, codes[0], app, "/ünïcode")
    with serve_gateway(tmp_path, log_name="after") as gw:
        msg = gw.wait_state(gw.push(codes[0], "HELLO")["id"])
    assert msg["state"] == "replied", msg
    assert [c.path for c in app.calls] == ["/%C3%BCn%C3%AFcode"]


def test_a_control_character_stored_by_an_older_version_fails_with_a_clear_detail(
    tmp_path: Path, codes: Codes, app: CallbackRecorder
) -> None:
    stored_by_an_older_version(tmp_path, codes[0], app, "/c\tb")
    with serve_gateway(tmp_path, log_name="after") as gw:
        msg = gw.wait_state(gw.push(codes[0], "HELLO")["id"])
    assert msg["state"] == "failed"
    assert "'\\t' at position" in outcome(msg)["detail"], outcome(msg)
    assert app.calls == []  # nothing was written to the application


def test_the_cli_shows_the_refusal_and_exits_4(
    lenient: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    env = {
        "MOGATEWAY_URL": lenient.url,
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
    }
    add = ["clients", "add", "--name", "x", "-s", codes[0], "-u", app.base_url + "/call back"]
    result = CliRunner().invoke(cli, add, env=env)
    assert result.exit_code == 4, (result.stdout, result.stderr)
    assert "is not allowed in a URL" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1  # one line, no traceback
