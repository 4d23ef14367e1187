"""The real ``mogateway waba migrate`` against the fake Graph API: happy paths, resume, interruptions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import APP_ID, DEST_WABA, PIN, TOKEN, Fake, Hooks, Migrate

E164 = "919876543210"


def assert_connected(fake: Fake, e164: str = E164) -> dict[str, Any]:
    number: dict[str, Any] = fake.state()["numbers"][e164]
    assert number["home_waba"] == DEST_WABA
    assert number["status"] == "CONNECTED"
    assert number["platform_type"] == "CLOUD_API"
    return number


def test_happy_path_sms_non_interactive(fake: Fake, migrate: Migrate) -> None:
    first = migrate()
    assert first.exit_code == 3, first.output
    assert "--code XXXXXX" in first.output
    assert f"--state {migrate.state}" in first.output
    saved = migrate.saved()
    assert saved["completed"].keys() >= {"preflight", "migration_requested", "code_requested"}
    assert saved["phone_number_id"]

    code = fake.last_code("+919876543210")
    second = migrate("--code", code)
    assert second.exit_code == 0, second.output
    number = assert_connected(fake)
    assert number["two_step_pin"] == PIN  # 2FA was off: our PIN became the two-step PIN
    assert "becomes" in second.output or "now the number's two-step PIN" in second.output
    assert "CONNECTED" in second.output

    saved = migrate.saved()
    assert "done" in saved["completed"]
    assert saved["app_id"] == APP_ID
    # Secrets never reach the state file or the output.
    text = migrate.state.read_text()
    for secret in (TOKEN, PIN, code):
        assert secret not in text
    assert TOKEN not in first.output + second.output
    assert oct(migrate.state.stat().st_mode & 0o777) == "0o600"
    # The migration call carried cc, the national number and the flag, as JSON.
    (call,) = fake.requests("POST", "/phone_numbers")[-1:]
    assert call["params"] == {"cc": "91", "phone_number": "9876543210", "migrate_phone_number": True}
    assert call["auth"] == "header"
    assert len(fake.requests("POST", "/register")) == 1


def test_happy_path_voice_interactive_with_typo(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate
) -> None:
    # The fake hands out a known code first, so the typed answers can be given up front.
    fake.http.post("/__fake/reset", json={"fixtures": _with_codes(fixtures, E164, ["482913"])})
    result = migrate("--code-method", "VOICE", "--interactive", input="48291\n482913\n")
    assert result.exit_code == 0, result.output
    assert "exactly 6 digits" in result.output
    assert fake.outbox("+919876543210")[-1]["method"] == "VOICE"
    assert_connected(fake)


def test_sms_never_arrives_voice_offered(fixtures: dict[str, Any], fake: Fake, migrate: Migrate) -> None:
    e164 = "919876543213"  # SMS not deliverable in the default world
    fake.http.post("/__fake/reset", json={"fixtures": _with_codes(fixtures, e164, ["111111", "222222"])})
    migrate.phone = "+91 98765 43213"
    result = migrate("--interactive", input="v\n222222\n")
    assert result.exit_code == 0, result.output
    assert "voice call" in result.output
    assert [m["method"] for m in fake.outbox("+919876543213")] == ["VOICE"]
    assert_connected(fake, e164)


def _with_codes(fixtures: dict[str, Any], e164: str, codes: list[str]) -> dict[str, Any]:
    fixtures["numbers"][e164]["codes"] = codes
    return fixtures


def test_webhooks_missing_subscribe_then_continue(fake: Fake, migrate: Migrate) -> None:
    results = migrate.complete()
    assert results[-1].exit_code == 0
    log = fake.requests()
    subscribe = next(
        i for i, r in enumerate(log) if r["method"] == "POST" and r["path"].endswith("subscribed_apps")
    )
    migration = next(
        i for i, r in enumerate(log) if r["method"] == "POST" and r["path"].endswith("phone_numbers")
    )
    assert subscribe < migration, "the app must be subscribed before the migration request"
    assert "subscribing it" in results[0].output
    apps = fake.state()["wabas"][DEST_WABA]["subscribed_apps"]
    assert [a["app_id"] for a in apps] == [APP_ID]


def test_webhooks_error_at_migration_subscribes_and_retries_once(fake: Fake, migrate: Migrate) -> None:
    fake.fault(
        path_regex=r"/phone_numbers$",
        method="POST",
        code=100,
        subcode=2388103,
        is_transient=False,
        message="Invalid parameter",
        user_title="Cannot migrate phone number",
        details="Webhooks have not been set up for the destination WABA",
    )
    results = migrate.complete()
    assert results[-1].exit_code == 0, results[-1].output
    assert len(fake.requests("POST", "/phone_numbers")) == 2
    assert "retrying once" in results[0].output


# -- interruptions at every step, then a plain re-run ---------------------------------------------

# Each fault hits one step; "skip" lets earlier calls to the same path (earlier steps or runs) through.
STEP_FAULTS: dict[str, dict[str, Any]] = {
    "preflight/debug_token": {"path_regex": r"/debug_token$"},
    "preflight/waba": {"path_regex": rf"^/{DEST_WABA}$", "method": "GET"},
    "preflight/subscribe": {"path_regex": r"/subscribed_apps$", "method": "POST"},
    "request_migration": {"path_regex": r"/phone_numbers$", "method": "POST"},
    "request_code": {"path_regex": r"/request_code$"},
    "status_sync": {"path_regex": r"^/8\d+$", "method": "GET"},
    "verify_code": {"path_regex": r"/verify_code$"},
    "subscription_check": {"path_regex": r"/subscribed_apps$", "method": "GET", "skip": 2},
    "final_status": {"path_regex": r"^/8\d+$", "method": "GET", "skip": 3},
}


@pytest.mark.parametrize("where", sorted(STEP_FAULTS))
def test_network_loss_at_each_step_then_resume(where: str, fake: Fake, migrate: Migrate) -> None:
    fake.fault(drop=True, times=50, **STEP_FAULTS[where])
    stopped = migrate.complete()
    assert stopped[-1].exit_code == 9, stopped[-1].output
    assert "run the same command again" in stopped[-1].output
    fake.clear_faults()
    results = migrate.complete()
    assert results[-1].exit_code == 0, results[-1].output
    assert_connected(fake)
    assert len(fake.requests("POST", "/register")) <= 1 + (where == "final_status")
    assert len(fake.outbox("+919876543210")) == 1, "a resumed run must not ask for a second code"


def test_network_loss_at_verify_code_then_resume(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    code = fake.last_code("+919876543210")
    fake.fault(path_regex=r"/verify_code$", drop=True, times=50)
    assert migrate("--code", code).exit_code == 9
    fake.clear_faults()
    assert migrate("--code", code).exit_code == 0
    assert_connected(fake)


def test_register_answer_lost_is_not_repeated(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    fake.fault(path_regex=r"/register$", drop=True, apply=True, times=50)
    result = migrate("--code", fake.last_code("+919876543210"))
    # Graph registered the number; the tool asked for the status instead of registering again.
    assert result.exit_code == 0, result.output
    assert len(fake.requests("POST", "/register")) == 1


def test_register_not_reached_stops_without_retry(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    code = fake.last_code("+919876543210")
    fake.fault(path_regex=r"/register$", drop=True, times=50)
    assert migrate("--code", code).exit_code == 9
    assert len(fake.requests("POST", "/register")) == 1
    fake.clear_faults()
    assert migrate().exit_code == 0
    assert len(fake.requests("POST", "/register")) == 2
    assert len(migrate.saved()["register_attempts"]) == 2


def test_migration_applied_but_answer_lost_resumes_with_2388012(fake: Fake, migrate: Migrate) -> None:
    fake.fault(path_regex=r"/phone_numbers$", method="POST", drop=True, apply=True)
    result = migrate()
    assert result.exit_code == 3, result.output
    assert "2388012" in result.output
    assert len(fake.requests("POST", "/phone_numbers")) == 2


def test_lost_state_file_rerun_gets_2388012_and_resumes(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    pid = migrate.saved()["phone_number_id"]
    migrate.state.unlink()
    # Hide the number from the preflight lookup once, so the tool meets 2388012 on the re-run.
    fake.fault(path_regex=r"/phone_numbers$", method="GET", body={"data": [], "paging": {"cursors": {}}})
    result = migrate()
    assert result.exit_code == 3, result.output
    assert "already exists" in result.output
    assert migrate.saved()["phone_number_id"] == pid
    assert migrate("--code", fake.last_code("+919876543210")).exit_code == 0


def test_rerun_after_done_is_idempotent(fake: Fake, migrate: Migrate) -> None:
    assert migrate.complete()[-1].exit_code == 0
    again = migrate()
    assert again.exit_code == 0, again.output
    assert len(fake.requests("POST", "/register")) == 1
    assert len(fake.requests("POST", "/phone_numbers")) == 1


def test_ctrl_c_at_code_prompt_then_resume(fake: Fake, tmp_path: Path) -> None:
    args = [
        sys.executable,
        "-c",
        "from mogateway.cli import main; main()",
        *Migrate(fake, tmp_path / "s.json").command(),
        "--yes",
        "--pin",
        PIN,
        "--interactive",
    ]
    env = {**os.environ, "WABA_TOKEN": TOKEN, "MOGATEWAY_WABA_TIME_SCALE": "0", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    output = bytearray()

    def read_all() -> None:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 4096):
            output.extend(chunk)

    reader = threading.Thread(target=read_all, name="migrate-output")
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while b"Code sent by SMS" not in output:  # the prompt is up (the code is out)
            assert proc.poll() is None and time.monotonic() < deadline, output.decode()
            time.sleep(0.02)
        assert fake.outbox("+919876543210")
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    out = bytes(output)
    assert proc.returncode == 130, out.decode()
    assert b"run the same command again" in out
    assert TOKEN.encode() not in out
    resumed = subprocess.run(
        [*args[:-1], "--no-interactive", "--code", fake.last_code("+919876543210")],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
    assert len(fake.outbox("+919876543210")) == 1  # no second code was requested
    assert_connected(fake)


def test_override_callback_before_subscribe_subscribes_then_overrides(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate, hooks: Hooks
) -> None:
    fixtures["wabas"][DEST_WABA]["subscribed_apps"] = [{"app_id": APP_ID}]
    fake.http.post("/__fake/reset", json={"fixtures": fixtures})
    # Graph forgets the subscription right before the override (as after a WABA reset).
    fake.fault(
        path_regex=r"/subscribed_apps$",
        method="POST",
        code=100,
        is_transient=False,
        message="Before override the current callback uri, your app must be subscribed to receive messages "
        "for WhatsApp Business Account",
    )
    url, verify = hooks.url, hooks.token
    results = migrate.complete("--callback-url", url, "--verify-token", verify)
    assert results[-1].exit_code == 0, results[-1].output
    posts = [r for r in fake.requests("POST", "/subscribed_apps")]
    assert [("override_callback_uri" in r["params"]) for r in posts] == [True, False, True]
    apps = fake.state()["wabas"][DEST_WABA]["subscribed_apps"]
    assert apps[0]["override_callback_uri"] == url
    assert verify not in migrate.state.read_text()
    assert all(verify not in r.output for r in results)
    assert migrate.saved()["callback_url"] == url
