"""The ``mogateway`` CLI against a real running gateway (the CLI in-process through typer's runner; the
console script itself is exercised by test_gateway_serve.py).

The gateway is the module's shared multi-worker ``mogateway serve`` (``gw`` in conftest.py): each test
works on shortcodes of its own (``codes``) and looks only at its own clients and messages."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, Codes, ServeGateway, closed_port_url
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.cli.common import console
from mogateway.testing.recorder import Answer, CallbackRecorder


@pytest.fixture
def run(gw: ServeGateway, monkeypatch: pytest.MonkeyPatch) -> Any:
    runner = CliRunner()
    env = {
        "MOGATEWAY_URL": gw.url,
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
    }
    # The CLI's console is made at import time: give it a wide terminal (see the 80-column test below).
    # Its private width, not the ``width`` property: undoing a patch of the property would set the width
    # read at patch time for good, and the CLI tests of other directories (COLUMNS) would inherit it.
    monkeypatch.setattr(console, "_width", 200)

    def invoke(*args: str, code: int = 0, extra_env: dict[str, str] | None = None) -> Any:
        result = runner.invoke(cli, list(args), env={**env, **(extra_env or {})})
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
        return result

    return invoke


def as_json(result: Any) -> Any:
    return json.loads(result.stdout)


def on_codes(clients: list[dict[str, Any]], codes: Codes) -> list[dict[str, Any]]:
    """The clients of a listing that hold one of this test's shortcodes."""
    mine = {codes[i] for i in range(10)}
    return [c for c in clients if mine & {str(s) for s in c["shortcodes"]}]


def test_clients_add_list_show_rotate_remove(run: Any, codes: Codes, app: CallbackRecorder) -> None:
    added = as_json(
        run("clients", "add", "--name", "bank", "-s", codes[0], "-s", codes[1], "-u", app.url, "-k", "bal",
            "--timeout", "5", "--tsunix-unit", "s", "--json")
    )  # fmt: skip
    assert (added["shortcodes"], added["keywords"], added["timeout_s"]) == ([codes[0], codes[1]], ["BAL"], 5)
    assert added["tsunix_unit"] == "s" and added["token"]
    cid = added["id"]

    listed = on_codes(as_json(run("clients", "list", "--json"))["clients"], codes)
    assert [c["id"] for c in listed] == [cid] and "token" not in listed[0]
    assert as_json(run("clients", "show", cid, "--json"))["name"] == "bank"

    rotated = as_json(run("clients", "rotate-token", cid, "--json"))
    assert rotated["token"] and rotated["token"] != added["token"]

    table = run("clients", "list").stdout
    assert cid in table and "bank" in table
    assert "token" in run("clients", "rotate-token", cid).stdout.lower()  # shown once, with a warning

    assert cid in run("clients", "remove", cid).stdout
    missing = run("clients", "show", cid, code=5)
    assert "404" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert on_codes(as_json(run("clients", "list", "--json"))["clients"], codes) == []


def test_send_then_messages_list_show_and_replay(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    app.answer = Answer.text("Hi\\nthere")
    sc, source_id = codes[0], f"cli-{codes[0]}"
    gw.add_client(shortcodes=[sc], callback_url=app.url)
    sent = as_json(
        run("send", "--shortcode", sc, "--msisdn", "9810012345", "HELLO", "--id", source_id, "--json")
    )
    assert sent["duplicate"] is False
    mid = sent["id"]
    gw.wait_state(mid)

    again = as_json(run("send", "-s", sc, "-m", "919810012345", "HELLO", "--id", source_id, "--json"))
    assert (again["id"], again["duplicate"]) == (mid, True)

    shown = as_json(run("messages", "show", mid, "--json"))
    assert (shown["state"], shown["reply"], shown["msisdn"]) == ("replied", "Hi\nthere", "919810012345")
    assert [ev["event"] for ev in shown["timeline"]][-1] == "reply_submitted"

    listed = as_json(run("messages", "list", "--shortcode", sc, "--state", "replied", "--json"))["messages"]
    assert [m["id"] for m in listed] == [mid]

    replayed = as_json(run("messages", "replay", mid, "--json"))
    assert replayed == {"id": mid, "state": "queued"}
    app.wait_for_calls(2)
    gw.wait_state(mid, frozenset({"replied"}))

    human = run("messages", "show", mid).stdout
    assert mid in human and "replied" in human and "reply_submitted" in human
    assert mid in run("messages", "list").stdout


def test_send_wait_prints_the_outcome(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    waited = as_json(run("send", "-s", codes[0], "-m", "919810012345", "HELLO", "--wait", "5", "--json"))
    assert waited["state"] == "replied" and waited["reply"] == "OK"


def test_send_of_a_foreign_number_fails_with_one_line(run: Any, codes: Codes) -> None:
    result = run("send", "-s", codes[0], "-m", "+14155550123", "HELLO", code=4)
    assert "422" in result.stderr and "msisdn" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_an_unreachable_gateway_is_one_line_and_exit_3(run: Any) -> None:
    result = run("clients", "list", code=3, extra_env={"MOGATEWAY_URL": closed_port_url().rsplit("/", 1)[0]})
    assert "cannot reach the gateway" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_wrong_token_is_one_line_and_exit_4(run: Any) -> None:
    result = run("clients", "list", code=4, extra_env={"MOGATEWAY_ADMIN_TOKEN": "wrong-token-0123456789"})
    assert "401" in result.stderr and "Traceback" not in result.stderr


def test_ids_stay_whole_in_an_80_column_terminal(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "_width", 80)
    app.answer = Answer.text("Your balance is Rs 42.00 as of today")
    client = gw.add_client(shortcodes=[codes[0], codes[1]], callback_url=app.url, keywords=["BAL"])
    mid = gw.push(codes[0], "BAL please, for my savings account")["id"]
    gw.wait_state(mid)
    assert client["id"] in run("clients", "list").stdout
    assert mid in run("messages", "list").stdout


def test_clients_add_sign_rotate_secret_and_signing_on_off(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    from mogateway.client import SignatureError, verify_signature

    sc = codes[0]
    added = as_json(run("clients", "add", "--name", "signed", "-s", sc, "-u", app.url, "--sign", "--json"))
    cid, secret = added["id"], added["signing_secret"]
    assert added["sign_callbacks"] is True and len(secret) >= 43
    shown = run("clients", "show", cid)
    assert (
        "sign_callbacks" in shown.stdout
        and secret not in shown.stdout
        and "shown only now" not in shown.stdout
    )
    gw.wait_state(gw.push(sc, "HELLO")["id"])
    assert verify_signature(app.calls[-1].body, app.calls[-1].headers, secret)

    rotated = run("clients", "rotate-secret", cid)
    assert "signing_secret" in rotated.stdout and "signing_grace_until" in rotated.stdout
    assert "signing secret is shown only now" in rotated.stdout
    new_secret = as_json(run("clients", "rotate-secret", cid, "--json"))["signing_secret"]
    gw.wait_state(gw.push(sc, "AGAIN")["id"])
    assert verify_signature(app.calls[-1].body, app.calls[-1].headers, new_secret)

    off = as_json(run("clients", "signing", cid, "--off", "--json"))
    assert off["sign_callbacks"] is False and "signing_secret" not in off
    refused = run("clients", "rotate-secret", cid, code=4)
    assert "409" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    on = as_json(run("clients", "signing", cid, "--on", "--json"))
    assert on["signing_secret"] not in (secret, new_secret)
    gw.wait_state(gw.push(sc, "ONCE MORE")["id"])
    with pytest.raises(SignatureError):
        verify_signature(app.calls[-1].body, app.calls[-1].headers, new_secret)
    assert verify_signature(app.calls[-1].body, app.calls[-1].headers, on["signing_secret"])

    plain = as_json(run("clients", "add", "--name", "plain", "-s", codes[1], "-u", app.url, "--json"))
    assert plain["sign_callbacks"] is False and "signing_secret" not in plain


def test_top_once_prints_the_overview(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    name = f"vote-{codes[0]}"  # the client's own row, whatever other tests' clients show
    added = as_json(run("clients", "add", "--name", name, "-s", codes[0], "-u", app.url, "--json"))
    gw.wait_state(gw.push(codes[0], "VOTE 1")["id"])
    deadline = time.monotonic() + 10
    while True:  # the sampler reads the counters once a second
        screen = run("top", "--once", "--window", "1h").stdout
        if any(name in line and "100.0 %" in line for line in screen.splitlines()):
            break
        assert time.monotonic() < deadline, screen
    for words in ("mogateway top", "last 5 minutes", "outcomes", "http error", "queue lag", "clients"):
        assert words in screen
    assert added["id"] not in screen  # clients are shown by name
    bad = run("top", "--once", "--window", "fortnight", code=4)
    assert "window" in bad.stderr


def test_top_says_when_the_gateway_cannot_be_reached(run: Any) -> None:
    result = run("top", "--once", "--url", closed_port_url().rsplit("/", 1)[0], code=3)
    assert "cannot reach the gateway" in result.stderr
