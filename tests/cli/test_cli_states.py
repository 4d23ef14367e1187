"""The readers of message states on a running gateway: ``mogateway send --wait`` and ``messages list``
(through typer's runner, as a person runs them) and the console's filter and test MO, each of which kept a
list of states of its own once. (The lists themselves are pinned in tests/core/test_state_groups.py.)

The gateway is ``mogateway serve`` with its default workers, shared by the module (tests/cli/conftest.py):
each test has shortcodes and senders of its own."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, Codes, ServeGateway
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.cli.exit_codes import Exit
from mogateway.core.timeline import STATES
from mogateway.testing.recorder import Answer, CallbackRecorder

PE = "1201159178420181234"

pytestmark = pytest.mark.slow


def run(gw: ServeGateway, *args: str, columns: int = 200) -> Any:
    env = {
        "MOGATEWAY_URL": gw.url,
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
        "COLUMNS": str(columns),
    }
    return CliRunner().invoke(cli, list(args), env=env)


def sender(codes: Codes, n: int = 0) -> str:
    """A subscriber number of this test's own (Indian: 91 and ten digits)."""
    return f"919812{codes[0]}{n}"


def blocking_client(gw: ServeGateway, app: CallbackRecorder, codes: Codes, **fields: Any) -> dict[str, Any]:
    """A client on ``codes[0]`` whose replies its DLT rules block: its messages end ``reply_blocked``
    (final)."""
    app.answer = Answer.text("Your OTP is 1234")
    return dict(
        gw.add_client(shortcodes=[codes[0]], callback_url=app.url, dlt_pe_id=PE, dlt_enforce=True, **fields)
    )


def test_send_wait_ends_on_the_final_state_not_on_the_deadline(
    gw: ServeGateway, app: CallbackRecorder, codes: Codes
) -> None:
    blocking_client(gw, app, codes)
    started = time.monotonic()
    result = run(gw, "send", "OTP", "-s", codes[0], "-m", sender(codes), "--wait", "30", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert '"state": "reply_blocked"' in result.stdout
    assert time.monotonic() - started < 15  # ended on the state, not on the deadline


def test_send_wait_says_not_yet_while_the_message_waits(
    gw: ServeGateway, app: CallbackRecorder, codes: Codes
) -> None:
    app.answer = Answer.text("late", delay_s=3.0)
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, timeout_s=10)
    result = run(gw, "send", "BAL", "-s", codes[0], "-m", sender(codes), "--wait", "0.3")
    assert result.exit_code == Exit.NOT_YET, (result.stdout, result.stderr)
    assert "no outcome within 0.3 s (state queued)" in result.stderr
    # the late answer still comes: the message ends replied, leaving nothing in flight in the shared gateway
    listed = gw.admin("GET", "/v1/messages", params={"shortcode": codes[0]}).json()["messages"]
    (message,) = listed
    assert gw.wait_state(message["id"])["state"] == "replied"


def test_messages_list_fits_80_columns_with_id_sender_and_state_whole(
    gw: ServeGateway, app: CallbackRecorder, codes: Codes
) -> None:
    blocking_client(gw, app, codes)
    ids = []
    for n in range(3):
        text = f"OTP please, for my savings account number {n}"
        ids.append(gw.push(codes[0], text, sender(codes, n))["id"])
    for message_id in ids:
        gw.wait_state(message_id, frozenset({"reply_blocked"}))
    result = run(gw, "messages", "list", columns=80)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    shown = [line for line in lines if line.startswith(tuple(ids))]
    assert [line[:26] for line in shown] == ids[::-1]  # newest first
    for n, message_id in enumerate(ids):
        (line,) = [line for line in shown if line.startswith(message_id)]
        whole = rf"{message_id} \d\d:\d\d:\d\d +{sender(codes, n)} reply_blocked OTP please"
        assert re.match(whole, line), line
    wide = run(gw, "messages", "list", columns=200).stdout
    assert f"{codes[0]} reply_blocked" in wide  # the shortcode and the reply, with room
    assert "Your OTP is 1234" in wide


# ------------------------------------------------------------------------------------ the console


@contextlib.contextmanager
def signed_in(gw: ServeGateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, follow_redirects=True, timeout=30) as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/login").text)
        assert csrf
        overview = client.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
        assert overview.status_code == 200 and "Overview" in overview.text
        yield client


def test_the_console_filters_by_every_state_and_by_reply_blocked(
    gw: ServeGateway, app: CallbackRecorder, codes: Codes
) -> None:
    blocking_client(gw, app, codes)
    message_id = gw.push(codes[0], "OTP", sender(codes))["id"]
    gw.wait_state(message_id, frozenset({"reply_blocked"}))
    with signed_in(gw) as client:
        page = client.get("/console/messages").text
        states = re.search(r'<select id="q-state".*?</select>', page, re.DOTALL)
        assert states, page
        assert re.findall(r'<option value="([a-z_]+)"', states[0]) == [s.value for s in STATES]
        found = client.get("/console/messages", params={"state": "reply_blocked"})
        assert found.status_code == 200 and message_id in found.text
        assert message_id not in client.get("/console/messages", params={"state": "replied"}).text


def test_the_console_test_mo_ends_on_a_blocked_reply_at_once(
    gw: ServeGateway, app: CallbackRecorder, codes: Codes
) -> None:
    client_id = blocking_client(gw, app, codes, timeout_s=20)["id"]  # waiting out the deadline: 25 s
    with signed_in(gw) as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/clients").text)
        assert csrf
        started = time.monotonic()
        result = client.post(
            f"/console/clients/{client_id}/test",
            data={"csrf": csrf[1], "shortcode": codes[0], "msisdn": sender(codes), "message": "OTP"},
            headers={"x-console-fetch": "1", "origin": gw.url},
        )
        assert result.status_code == 200, result.text
        assert 'class="result bad" data-state="reply_blocked"' in result.text
        assert time.monotonic() - started < 10
