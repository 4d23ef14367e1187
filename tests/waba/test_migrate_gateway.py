"""``waba migrate --gateway-url``: the last step points the number's webhooks at a real ``mogateway serve``
and checks its handshake; the state file resumes through it; then the migrated number is answered."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mogateway.api.whatsapp import WEBHOOK_PATH
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.waba.options import GATEWAY_WEBHOOK_PATH

from .conftest import APP_ID, DEST_WABA, TOKEN, Fake, Hooks, Migrate

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ADMIN_TOKEN, GatewayClient, ServeProcess, clean_env, free_port, mogateway_command

APP_SECRET = "migrated-app-secret-0123456789"
VERIFY_TOKEN = "gateway-verify-token-42"
BUSINESS = "919876543210"


def _start_gateway(workdir: Path, port: int, graph_url: str, numbers: list[str]) -> ServeProcess:
    config = workdir / "mogateway.toml"
    text = f"""
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "{VERIFY_TOKEN}"
graph_url = "{graph_url}"
"""
    for pnid in numbers:
        text += f"""
[[whatsapp.numbers]]
phone_number_id = "{pnid}"
display_phone_number = "{BUSINESS}"
access_token = "{TOKEN}"
"""
    config.write_text(text)
    env = clean_env(
        MOGATEWAY_DATABASE=str(workdir / "journal.db"),
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        MOGATEWAY_LOG_LEVEL="warning",
    )
    # The same port across restarts: the URL Meta was given stays the gateway's.
    stderr_path = workdir / "serve.stderr"
    with stderr_path.open("ab") as err:
        process = subprocess.Popen(
            [
                *mogateway_command(),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--config",
                str(config),
            ],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    serve = ServeProcess(process, f"http://127.0.0.1:{port}", stderr_path)
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, serve.stderr()
        try:
            if httpx.get(serve.url + "/healthz", timeout=1.0).status_code == 200:
                return serve
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            serve.kill()
            raise AssertionError(f"mogateway serve did not start: {serve.stderr()}")
        time.sleep(0.05)


def _override(fake: Fake) -> Any:
    apps = fake.state()["wabas"][DEST_WABA]["subscribed_apps"]
    return next(a for a in apps if a["app_id"] == APP_ID).get("override_callback_uri")


def test_the_gateway_path_is_the_webhook_route() -> None:
    assert GATEWAY_WEBHOOK_PATH == WEBHOOK_PATH


def test_gateway_url_points_the_webhooks_at_the_gateway_resumes_and_the_number_is_answered(
    fake: Fake, migrate: Migrate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    gateway_url = f"http://127.0.0.1:{port}"
    webhook_url = gateway_url + WEBHOOK_PATH
    # The verify token is the gateway's own setting, read from its environment variable.
    monkeypatch.setenv("MOGATEWAY_WHATSAPP__VERIFY_TOKEN", VERIFY_TOKEN)

    # The gateway is not running yet: Meta's handshake fails, so Graph refuses the override (2200).
    results = migrate.complete("--gateway-url", gateway_url + "/")
    assert results[-1].exit_code == 1, results[-1].output
    assert "Meta could not verify the callback URL" in results[-1].output
    saved = migrate.saved()
    assert "registered" in saved["completed"] and "callback_overridden" not in saved["completed"]
    assert _override(fake) is None

    workdir = tmp_path / "gw"
    workdir.mkdir()
    serve = _start_gateway(workdir, port, fake.url, numbers=[])
    try:
        again = migrate("--gateway-url", gateway_url)
        assert again.exit_code == 0, again.output
        assert "Check the webhook handshake" in again.output
        assert f"{webhook_url} answered the handshake (and refused a wrong token)" in again.output
        assert _override(fake) == webhook_url
        saved = migrate.saved()
        assert saved["callback_url"] == webhook_url
        assert list(saved["completed"])[-3:] == ["callback_overridden", "webhook_verified", "done"]
        assert VERIFY_TOKEN not in migrate.state.read_text() and VERIFY_TOKEN not in again.output
        # Meta asked (the fake's override) and the tool asked (right token, then a wrong one): 1 + 2, and
        # the gateway logged the refused one.
        assert serve.stderr().count("handshake refused") == 1

        # A run after that finds everything done and sends no override again.
        overrides = len(
            [r for r in fake.requests("POST", "/subscribed_apps") if "override_callback_uri" in r["params"]]
        )
        last = migrate("--gateway-url", gateway_url)
        assert last.exit_code == 0, last.output
        assert "already answered the handshake" in last.output
        assert overrides == len(
            [r for r in fake.requests("POST", "/subscribed_apps") if "override_callback_uri" in r["params"]]
        )
    finally:
        serve.stop()

    # Closing the loop: the gateway serves the migrated number; Meta's webhooks to the URL it was given
    # reach a client application, and its answer goes out from that number.
    pnid = saved["phone_number_id"]
    serve = _start_gateway(workdir, port, fake.url, numbers=[pnid])
    gw = GatewayClient(serve.url)
    try:
        with CallbackRecorder.in_thread(lambda call: Answer.text("Hi " + call.json()["message"])) as app:
            resp = gw.admin(
                "POST",
                "/v1/clients",
                json={"name": "shop", "whatsapp_numbers": [BUSINESS], "callback_url": app.url},
            )
            assert resp.status_code == 201, resp.text
            with wh.WebhookSender(_override(fake), APP_SECRET, phone_number_id=pnid) as meta:
                wamid = wh.new_wamid()
                delivery = meta.send(wh.text("919812345678", "HELLO", wamid=wamid))
                assert delivery.status == 200, delivery.text
                (mid,) = json.loads(delivery.text)["ids"]
            gw.wait_state(mid, frozenset({"replied"}))
            sends = httpx.get(fake.url + "/__fake/messages", params={"to": "919812345678"}).json()["data"]
            (send,) = [s for s in sends if s["context_message_id"] == wamid]
            assert send["phone_number_id"] == pnid and send["text"] == "Hi HELLO"
    finally:
        gw.close()
        serve.stop()


def test_a_url_that_fails_the_handshake_stops_at_the_new_step_and_the_next_run_continues_there(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate, hooks: Hooks
) -> None:
    # Graph takes the override without asking (as if the endpoint changed after Meta's check), so the
    # tool's own handshake is what finds the wrong verify token.
    fixtures["knobs"]["verify_callback_uri"] = False
    fake.http.post("/__fake/reset", json={"fixtures": fixtures})
    hooks.token = "the-gateway-has-another-token"
    results = migrate.complete("--callback-url", hooks.url, "--verify-token", "verify-secret-0042")
    stopped = results[-1]
    assert stopped.exit_code == 1, stopped.output
    assert "does not answer Meta's handshake: the handshake was answered HTTP 403" in stopped.output
    saved = migrate.saved()
    assert "callback_overridden" in saved["completed"] and "webhook_verified" not in saved["completed"]
    assert saved["history"][-1]["step"] == "webhook_verified" and saved["history"][-1]["outcome"] == "error"

    hooks.token = "verify-secret-0042"  # the gateway fixed
    asked = len(hooks.handshakes)
    fixed = migrate("--callback-url", hooks.url, "--verify-token", "verify-secret-0042")
    assert fixed.exit_code == 0, fixed.output
    assert f"callback already set to {hooks.url}" in fixed.output
    assert "webhook_verified" in migrate.saved()["completed"]
    assert len(hooks.handshakes) == asked + 2  # the right token, then a wrong one it must refuse


def test_an_endpoint_that_echoes_any_challenge_is_not_taken(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate, hooks: Hooks
) -> None:
    hooks.echo_any = True  # answers every challenge, whatever the token: it would take anyone's webhooks
    results = migrate.complete("--callback-url", hooks.url, "--verify-token", hooks.token)
    assert results[-1].exit_code == 1, results[-1].output
    assert "a wrong verify token was accepted too" in results[-1].output
    assert "webhook_verified" not in migrate.saved()["completed"]


def test_gateway_url_usage_errors(migrate: Migrate, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOGATEWAY_WHATSAPP__VERIFY_TOKEN", raising=False)
    both = migrate("--gateway-url", "https://gw.example.com", "--callback-url", "https://x.example.com/h")
    assert both.exit_code == 2 and "not both" in both.output
    no_token = migrate("--gateway-url", "https://gw.example.com")
    assert no_token.exit_code == 2 and "--verify-token" in no_token.output
    plain = migrate("--gateway-url", "http://gw.example.com", "--verify-token", "vt-123456789")
    assert plain.exit_code == 2 and "https://" in plain.output
