"""Failures of ``waba migrate`` against the fake: classified, explained, exit statuses, no blind retry."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from mogateway.cli import app
from mogateway.testing.fake_graph.fixtures import UNPAID_WABA

from .conftest import DEST_WABA, TOKEN, Fake, Migrate


def test_two_step_still_on_is_not_retried(fake: Fake, migrate: Migrate) -> None:
    migrate.phone = "+91 98765 43211"  # two-step on, PIN 246810
    results = migrate.complete()
    last = results[-1]
    assert last.exit_code == 6, last.output
    assert "133005" in last.output
    assert "turn two-step verification off" in last.output
    assert len(fake.requests("POST", "/register")) == 1
    assert migrate.saved()["facts"]["two_step_disabled"] is False
    # A re-run is one more attempt, never a loop; with the right PIN it completes.
    assert migrate().exit_code == 6
    assert len(fake.requests("POST", "/register")) == 2
    done = migrate("--pin", "246810", pin=False)
    assert done.exit_code == 0, done.output


def test_register_limit_133016_stops(fake: Fake, migrate: Migrate) -> None:
    fake.fault(
        path_regex=r"/register$",
        code=133016,
        is_transient=False,
        message="Account register deregister rate limit exceeded",
    )
    last = migrate.complete()[-1]
    assert last.exit_code == 7, last.output
    assert "72 hours" in last.output
    assert len(fake.requests("POST", "/register")) == 1


def test_local_register_guard_refuses_an_eleventh_attempt(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    saved = migrate.saved()
    saved["register_attempts"] = [saved["completed"]["preflight"]] * 10
    migrate.state.write_text(json.dumps(saved))
    result = migrate("--code", fake.last_code("+919876543210"))
    assert result.exit_code == 7, result.output
    assert fake.requests("POST", "/register") == []


def test_fake_counts_ten_registers_then_133016(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate
) -> None:
    migrate.phone = "+91 98765 43211"
    fixtures["knobs"]["pin_max_guesses"] = 100
    fake.http.post("/__fake/reset", json={"fixtures": fixtures})
    assert migrate.complete()[-1].exit_code == 6
    pid = migrate.saved()["phone_number_id"]
    for _ in range(9):
        fake.http.post(
            f"/v25.0/{pid}/register",
            json={"messaging_product": "whatsapp", "pin": "000000"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    result = migrate("--pin", "246810", pin=False)
    assert result.exit_code == 7, result.output
    assert "133016" in result.output


def test_wrong_then_expired_code_then_new_code(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    code = fake.last_code("+919876543210")
    wrong = "000000" if code != "000000" else "111111"
    refused = migrate("--code", wrong)
    assert refused.exit_code == 8, refused.output
    assert "--new-code" in refused.output
    fake.advance(601)  # past the code's 10 minutes
    expired = migrate("--code", code)
    assert expired.exit_code == 8
    assert "expired" in expired.output
    fresh = migrate("--new-code")
    assert fresh.exit_code == 3
    assert len(fake.outbox("+919876543210")) == 2
    assert migrate("--code", fake.last_code("+919876543210")).exit_code == 0


def test_wrong_code_interactive_is_asked_again(
    fixtures: dict[str, Any], fake: Fake, migrate: Migrate
) -> None:
    fixtures["numbers"]["919876543210"]["codes"] = ["424242"]
    fake.http.post("/__fake/reset", json={"fixtures": fixtures})
    result = migrate("--interactive", input="123456\n424242\n")
    assert result.exit_code == 0, result.output
    assert "Code refused" in result.output


def test_token_expiring_between_runs(fixtures: dict[str, Any], fake: Fake, migrate: Migrate) -> None:
    first = migrate(token="expiring-token")
    assert first.exit_code == 3
    assert "token expires in" in first.output
    fake.advance(7200)
    second = migrate("--code", fake.last_code("+919876543210"), token="expiring-token")
    assert second.exit_code == 4, second.output
    assert "System User token" in second.output
    assert "expiring-token" not in second.output
    # With a good token the run continues; the old code has expired by now, so ask for a new one.
    assert migrate("--new-code").exit_code == 3
    assert migrate("--code", fake.last_code("+919876543210")).exit_code == 0


def test_token_expiring_mid_run(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    fake.fault(
        path_regex=r"/verify_code$",
        code=190,
        subcode=463,
        is_transient=False,
        http=401,
        message="Error validating access token: Session has expired",
    )
    code = fake.last_code("+919876543210")
    result = migrate("--code", code)
    assert result.exit_code == 4, result.output
    assert "190/463" in result.output
    assert len(fake.requests("POST", "/verify_code")) == 1
    assert migrate("--code", code).exit_code == 0


def test_transient_and_throttled_errors_are_retried(fake: Fake, migrate: Migrate) -> None:
    fake.fault(path_regex=r"/request_code$", code=2, times=2, message="Service temporarily unavailable")
    fake.fault(
        path_regex=rf"^/{DEST_WABA}$", code=80007, times=2, is_transient=False, message="Rate limit hit"
    )
    first = migrate()
    assert first.exit_code == 3, first.output
    assert first.output.count("retry") >= 4
    assert len(fake.requests("POST", "/request_code")) == 3
    assert len(fake.requests("GET", f"/{DEST_WABA}")) == 3
    assert migrate("--code", fake.last_code("+919876543210")).exit_code == 0


def test_throttling_that_lasts_stops_with_9(fake: Fake, migrate: Migrate) -> None:
    fake.fault(path_regex=r"/debug_token$", code=4, times=50, message="Application request limit reached")
    result = migrate()
    assert result.exit_code == 9, result.output
    assert len(fake.requests("GET", "/debug_token")) == 5  # bounded


def test_transient_error_at_register_is_not_retried(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    fake.fault(path_regex=r"/register$", code=133004, times=50, message="Server temporarily unavailable")
    result = migrate("--code", fake.last_code("+919876543210"))
    assert result.exit_code == 9, result.output
    assert len(fake.requests("POST", "/register")) == 1


def test_wrong_waba_id(fake: Fake, migrate: Migrate) -> None:
    migrate.waba = "111111111111111"
    result = migrate()
    assert result.exit_code == 5, result.output
    assert "not the business id" in result.output
    assert "100/33" in result.output


def test_display_name_not_approved(fake: Fake, migrate: Migrate) -> None:
    migrate.phone = "+91 98765 43212"
    result = migrate()
    assert result.exit_code == 5
    assert "display name" in result.output
    assert migrate.saved()["facts"]["display_name_approved"] is False


def test_no_payment_method(fake: Fake, migrate: Migrate) -> None:
    migrate.waba = UNPAID_WABA
    result = migrate()
    assert result.exit_code == 5, result.output
    assert "payment method" in result.output
    assert migrate.saved()["facts"]["payment_method"] is False


def test_token_without_management_permission(fake: Fake, migrate: Migrate) -> None:
    result = migrate(token="messaging-only-token")
    assert result.exit_code == 4
    assert "whatsapp_business_management" in result.output


def test_dry_run_prints_calls_with_token_redacted(fake: Fake, migrate: Migrate) -> None:
    result = migrate(
        "--dry-run", "--callback-url", "https://hooks.example.com/wa", "--verify-token", "vt-99887766"
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert TOKEN not in out and "vt-99887766" not in out and "135790" not in out
    assert f"GET {fake.url}/v25.0/debug_token?input_token=***" in out
    assert f"POST {fake.url}/v25.0/{DEST_WABA}/phone_numbers" in out
    assert '{"cc": "91", "phone_number": "9876543210", "migrate_phone_number": true}' in out
    assert '{"messaging_product": "whatsapp", "pin": "<PIN>"}' in out
    assert '"override_callback_uri": "https://hooks.example.com/wa"' in out
    assert "Authorization: Bearer ***" in out
    assert fake.requests() == []
    assert not migrate.state.exists()


def test_usage_errors(fake: Fake, migrate: Migrate) -> None:
    migrate.phone = "98765 43210"
    assert migrate().exit_code == 2
    migrate.phone = "+91 98765 43210"
    assert migrate("--code-method", "FAX").exit_code == 2
    assert migrate("--callback-url", "http://insecure.example.com").exit_code == 2
    assert migrate("--pin", "12", pin=False).exit_code == 2
    assert fake.requests() == []


def test_state_file_of_another_number(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    migrate.phone = "+91 98765 43213"
    result = migrate()
    assert result.exit_code == 2
    assert "is for +919876543210" in result.output


def test_missing_pin_stops_before_register_then_continues(fake: Fake, migrate: Migrate) -> None:
    assert migrate(pin=False).exit_code == 3
    result = migrate("--code", fake.last_code("+919876543210"), pin=False)
    assert result.exit_code == 2
    assert "--pin-file" in result.output
    assert fake.requests("POST", "/register") == []
    assert migrate().exit_code == 0


def test_pin_file_and_missing_token(fake: Fake, migrate: Migrate, tmp_path: Any) -> None:
    pin_file = tmp_path / "pin"
    pin_file.write_text("135790\n")
    first = migrate("--pin-file", str(pin_file), pin=False)
    assert first.exit_code == 3
    second = migrate("--pin-file", str(pin_file), "--code", fake.last_code("+919876543210"), pin=False)
    assert second.exit_code == 0, second.output
    assert fake.state()["numbers"]["919876543210"]["two_step_pin"] == "135790"


def test_missing_token_without_terminal(fake: Fake, migrate: Migrate) -> None:
    args = [*migrate.command(), "--no-interactive", "--token-env", "MY_WABA_TOKEN"]
    result = CliRunner().invoke(app, args, env={"MY_WABA_TOKEN": "", "WABA_TOKEN": TOKEN})
    assert result.exit_code == 2
    assert "set MY_WABA_TOKEN" in result.output
    assert fake.requests() == []
    ok = CliRunner().invoke(
        app, [*args, "--yes"], env={"MY_WABA_TOKEN": TOKEN, "MOGATEWAY_WABA_TIME_SCALE": "0"}
    )
    assert ok.exit_code == 3, ok.output


def test_deletion_pending_133015_waits_then_registers_once_more(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    fake.fault(path_regex=r"/register$", code=133015, is_transient=False, message="Please wait a few minutes")
    result = migrate("--code", fake.last_code("+919876543210"))
    assert result.exit_code == 0, result.output
    assert "waiting 5 minutes" in result.output
    assert len(fake.requests("POST", "/register")) == 2


def test_not_verified_133006_goes_back_to_the_code_step(fake: Fake, migrate: Migrate) -> None:
    assert migrate().exit_code == 3
    fake.fault(
        path_regex=r"/register$", code=133006, is_transient=False, message="Phone number needs to be verified"
    )
    result = migrate("--code", fake.last_code("+919876543210"))
    assert "133006" in result.output
    assert result.exit_code == 0, result.output  # Graph shows the code verified, so register runs again
    assert len(fake.requests("POST", "/register")) == 2


def test_interactive_confirmation_no_aborts(fake: Fake, migrate: Migrate) -> None:
    args = [*migrate.command(), "--interactive", "--pin", "135790"]
    result = CliRunner().invoke(app, args, input="n\n", env={"WABA_TOKEN": TOKEN})
    assert result.exit_code == 10, result.output
    assert fake.requests("POST", "/phone_numbers") == []
