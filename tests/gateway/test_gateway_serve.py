"""``mogateway serve`` as an operator runs it: a subprocess, its settings, its generated tokens, and what
survives a SIGKILL in the middle of callbacks."""

from __future__ import annotations

import collections
import json
import os
import platform
import stat
import sys
import time
from pathlib import Path

import pytest
from gateway_harness import (
    FINAL,
    GatewayClient,
    clean_env,
    run_cli,
    serve_env,
    start_serve,
)

from mogateway import compiled
from mogateway.testing.recorder import Answer, CallbackRecorder

pytestmark = pytest.mark.slow
SC = "56767"


# ------------------------------------------------------------------------------------ start-up


def read_tokens_file(path: Path) -> dict[str, str]:
    """The generated tokens file: owner-only, ``MOGATEWAY_<NAME>_TOKEN=value`` lines."""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_tokens_are_generated_once_written_to_an_owner_only_file_and_kept(
    tmp_path: Path, app: CallbackRecorder
) -> None:
    env = clean_env(MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true")
    first = start_serve(tmp_path, env, log_name="first")
    try:
        tokens = read_tokens_file(tmp_path / "mogateway.tokens")  # next to ./mogateway.db
        assert set(tokens) == {"MOGATEWAY_ADMIN_TOKEN", "MOGATEWAY_INGEST_TOKEN"}
        admin, ingest = tokens["MOGATEWAY_ADMIN_TOKEN"], tokens["MOGATEWAY_INGEST_TOKEN"]
        assert admin != ingest and len(admin) >= 32
        # stderr is what a service manager keeps as the log: the path is there, the tokens are not.
        assert admin not in first.stderr() and ingest not in first.stderr()
        assert str(tmp_path / "mogateway.tokens") in first.stderr()
        # The start-up line names the Python it runs on (its build changes the CPU per MO), and whether
        # the pure layers run compiled (the suite runs on the build, mogateway.compiled).
        # The supervisor writes it once every worker serves, which can be just after /healthz answers.
        runs_on = f"Python {platform.python_version()} {os.path.realpath(sys.executable)}, {compiled.STATUS})"
        deadline = time.monotonic() + 10
        while "mogateway listening on" not in first.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = [line for line in first.stderr().splitlines() if "mogateway listening on" in line]
        assert len(started) == 1 and runs_on in started[0], first.stderr()
        gw = GatewayClient(first.url, admin_token=admin, ingest_token=ingest)
        assert gw.admin("GET", "/v1/clients").status_code == 200
        assert gw.ingest("GET", "/v1/clients").status_code == 401

        # The console script, run where the journal is, finds the generated tokens by itself.
        cli_env = clean_env(MOGATEWAY_URL=first.url)
        added = run_cli(
            tmp_path, cli_env, "clients", "add", "--name", "echo", "-s", SC, "-u", app.url, "--json"
        )
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["shortcodes"] == [SC]
        sent = run_cli(
            tmp_path, cli_env, "send", "-s", SC, "-m", "919810012345", "HELLO", "--wait", "10", "--json"
        )
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout)["reply"] == "OK"
        gw.close()
    finally:
        assert first.stop() in (0, -15)  # graceful on SIGTERM (uvicorn re-raises the signal after)

    second = start_serve(tmp_path, env, log_name="second")
    try:
        assert "mogateway.tokens" not in second.stderr()  # nothing generated, nothing written
        assert admin not in second.stderr() and ingest not in second.stderr()  # never printed, never logged
        gw = GatewayClient(second.url, admin_token=admin, ingest_token=ingest)
        assert gw.admin("GET", "/v1/clients").json()["clients"][0]["name"] == "echo"
        gw.close()
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"MOGATEWAY_ADMIN_TOKEN": "short-secret"}, "admin_token"),
        ({"MOGATEWAY_DATABASE": "mysql://db/mo"}, "database"),
        ({"MOGATEWAY_REPLY_MAX_PARTS": "0"}, "reply_max_parts"),
        ({"MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "perhaps"}, "allow_private_callbacks"),
        ({"MOGATEWAY_QUEUE": "kafka://x"}, "queue"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_invalid_setting_stops_start_up_with_one_line(
    tmp_path: Path, env: dict[str, str], setting: str
) -> None:
    done = run_cli(tmp_path, clean_env(**env), "serve", "--port", "1")
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert setting in lines[0] and "Traceback" not in done.stderr
    assert "short-secret" not in done.stderr  # a secret is named, never echoed


def test_an_unknown_setting_in_the_config_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text("port = 8099\nreply_max_part = 3\n")
    done = run_cli(tmp_path, clean_env(), "serve", "--config", str(config))
    assert done.returncode != 0
    assert "reply_max_part" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------ SIGKILL

N = 200


def test_sigkill_during_callbacks_loses_nothing_and_never_splits_a_message(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    items = [
        {"shortcode": SC, "msisdn": "919810012345", "message": f"MO {i:03d}", "id": f"src-{i}"}
        for i in range(N)
    ]
    accepted: dict[str, str] = {}  # source id -> message id the gateway acknowledged

    with CallbackRecorder.in_thread(Answer.late(0.25, "ok")) as app:
        first = start_serve(tmp_path, env, log_name="first")
        try:
            gw = GatewayClient(first.url)
            gw.add_client(shortcodes=[SC], callback_url=app.url, max_concurrency=16)
            for start in range(0, N, 50):
                resp = gw.ingest("POST", "/v1/inbound/batch", json=items[start : start + 50])
                assert resp.status_code == 200, resp.text
                for item, result in zip(items[start : start + 50], resp.json()["results"], strict=True):
                    assert result["state"] == "queued"
                    accepted[item["id"]] = result["id"]
            app.wait_for_calls(40, timeout=20)  # callbacks are now in flight (each takes 0.25 s)
        finally:
            first.kill()
            gw.close()
        calls_before_restart = len(app.calls)
        assert calls_before_restart < N  # the kill really came in the middle

        second = start_serve(tmp_path, env, log_name="second")
        try:
            gw = GatewayClient(second.url)
            deadline = time.monotonic() + 60
            while True:
                listed = gw.admin("GET", "/v1/messages", params={"limit": 1000}).json()["messages"]
                if len(listed) == N and all(m["state"] in FINAL for m in listed):
                    break
                assert time.monotonic() < deadline, collections.Counter(m["state"] for m in listed)
                time.sleep(0.2)
            assert {m["state"] for m in listed} == {"replied"}

            # A source that never heard back pushes everything again: all duplicates, no new callback.
            calls_done = len(app.calls)
            again = gw.ingest("POST", "/v1/inbound/batch", json=items).json()
            assert again["duplicates"] == N and again["accepted"] == 0
            assert [r["id"] for r in again["results"]] == [accepted[item["id"]] for item in items]
            time.sleep(0.5)
            assert len(app.calls) == calls_done
            gw.close()
        finally:
            second.stop()

    ids_by_source: dict[str, set[str]] = collections.defaultdict(set)
    bodies_by_source: dict[str, set[bytes]] = collections.defaultdict(set)
    for call in app.calls:
        source = "src-" + str(int(call.json()["message"].split()[1]))
        ids_by_source[source].add(call.headers["x-mogateway-message-id"])
        bodies_by_source[source].add(call.body)
    assert set(ids_by_source) == set(accepted)  # every accepted MO reached the application
    for source, message_id in accepted.items():
        assert ids_by_source[source] == {message_id}, source  # ...always as the same message
        assert len(bodies_by_source[source]) == 1, source  # ...with the same bytes
    # At-least-once: the MOs in flight at the kill were delivered again after the restart.
    assert len(app.calls) > N
