"""The library pieces on their own: error table, state file, backoff, phone parsing, client over HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mogateway.waba import ExitCode, GraphClient, GraphError, Kind, Retry, StateFile, Step, calls, parse_phone
from mogateway.waba.graph import BackoffPolicy
from mogateway.waba.phone import PhoneError
from mogateway.waba.state import MigrationState, StateFileError

from .conftest import DEST_WABA, TOKEN, Fake


def graph_error(code: int, subcode: int | None = None, title: str = "", details: str = "") -> GraphError:
    body = {
        "error": {
            "message": f"(#{code}) x",
            "code": code,
            "error_subcode": subcode,
            "error_user_title": title,
            "error_data": {"details": details},
            "fbtrace_id": "T1",
        }
    }
    return GraphError.from_response(400, body)


@pytest.mark.parametrize(
    ("code", "subcode", "title", "kind", "retry", "exit_code"),
    [
        (100, 2388012, "", Kind.ALREADY_EXISTS, Retry.RESUME, ExitCode.NOT_ELIGIBLE),
        (
            100,
            2388103,
            "Cannot migrate phone number",
            Kind.WEBHOOKS_MISSING,
            Retry.FIX_THEN_ONCE,
            ExitCode.NOT_ELIGIBLE,
        ),
        (
            100,
            2388103,
            "Your WhatsApp account does not have a payment account",
            Kind.NOT_ELIGIBLE,
            Retry.NEVER,
            ExitCode.NOT_ELIGIBLE,
        ),
        (
            100,
            2388103,
            "There was an error migrating this phone number",
            Kind.TRANSIENT,
            Retry.BACKOFF,
            ExitCode.UNAVAILABLE,
        ),
        (100, 33, "", Kind.NOT_FOUND, Retry.NEVER, ExitCode.NOT_ELIGIBLE),
        (100, None, "", Kind.INVALID_PARAMETER, Retry.NEVER, ExitCode.ERROR),
        (190, 463, "", Kind.AUTH, Retry.NEVER, ExitCode.AUTH),
        (200, 1349174, "", Kind.PERMISSION, Retry.NEVER, ExitCode.AUTH),
        (133005, None, "", Kind.TWO_STEP_ON, Retry.NEVER, ExitCode.TWO_STEP),
        (133016, None, "", Kind.REGISTER_LIMIT, Retry.NEVER, ExitCode.REGISTER_BLOCKED),
        (133015, None, "", Kind.DELETION_PENDING, Retry.WAIT_ONCE, ExitCode.UNAVAILABLE),
        (136025, None, "", Kind.CODE_REJECTED, Retry.NEVER, ExitCode.CODE),
        (80008, None, "", Kind.THROTTLED, Retry.BACKOFF, ExitCode.UNAVAILABLE),
        (131000, None, "", Kind.TRANSIENT, Retry.BACKOFF, ExitCode.UNAVAILABLE),
        (424242, None, "", Kind.UNKNOWN, Retry.NEVER, ExitCode.ERROR),
    ],
)
def test_classification(
    code: int, subcode: int | None, title: str, kind: Kind, retry: Retry, exit_code: ExitCode
) -> None:
    verdict = graph_error(code, subcode, title).classify()
    assert (verdict.kind, verdict.retry, verdict.exit_code) == (kind, retry, exit_code)
    assert verdict.meaning and verdict.advice


def test_graph_error_fields() -> None:
    err = graph_error(100, 2388103, "Cannot migrate phone number", "Webhooks have not been set up")
    assert (err.code, err.subcode, err.fbtrace_id, err.details) == (
        100,
        2388103,
        "T1",
        "Webhooks have not been set up",
    )
    assert err.reference == "Graph error 100/2388103, fbtrace_id T1"
    odd = GraphError.from_response(502, "<html>")
    assert odd.code == -1 and odd.classify().retry is Retry.BACKOFF


def test_state_file_atomic_and_private(tmp_path: Path) -> None:
    store = StateFile(tmp_path / "sub" / "state.json")
    state = MigrationState(waba_id="1", cc="91", national="9876543210")
    state.mark_done(Step.PREFLIGHT)
    store.save(state)
    state.phone_number_id = "42"
    store.save(state)
    assert os.listdir(tmp_path / "sub") == ["state.json"]  # no temporary file left behind
    assert (store.path.stat().st_mode & 0o777) == 0o600
    loaded = store.load()
    assert loaded.phone_number_id == "42" and loaded.is_done(Step.PREFLIGHT)
    assert loaded.current_step() is Step.MIGRATION_REQUESTED
    store.path.write_text("{not json")
    with pytest.raises(StateFileError):
        store.load()


def test_backoff_grows_and_respects_time_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOGATEWAY_WABA_TIME_SCALE", "1")
    policy = BackoffPolicy(base_s=1.0, cap_s=8.0)
    delays = [policy.delay(n) for n in range(1, 7)]
    assert 0.5 <= delays[0] <= 1.0 and 4.0 <= delays[3] <= 8.0 and delays[5] <= 8.0
    monkeypatch.setenv("MOGATEWAY_WABA_TIME_SCALE", "0.01")
    assert policy.delay(4) <= 0.08


def test_parse_phone() -> None:
    number = parse_phone("+91 98765-43210")
    assert (number.cc, number.national, number.e164) == ("91", "9876543210", "+919876543210")
    with pytest.raises(PhoneError):
        parse_phone("98765 43210")
    with pytest.raises(PhoneError):
        parse_phone("+91 123")


def test_client_retries_then_raises_typed_error(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOGATEWAY_WABA_TIME_SCALE", "0")
    fake.fault(path_regex="/debug_token$", code=2, times=2)
    seen: list[int] = []
    with GraphClient(TOKEN, graph_url=fake.url, on_retry=lambda r, e, n, d: seen.append(n)) as client:
        info = calls.debug_token(client)
        assert info.is_valid and calls.MANAGEMENT_SCOPE in info.scopes
        assert seen == [1, 2]
        with pytest.raises(GraphError) as caught:
            calls.get_waba(client, "999")
    assert (caught.value.code, caught.value.subcode, caught.value.http_status) == (100, 33, 400)
    assert caught.value.fbtrace_id
    assert TOKEN not in str(caught.value)


def test_steps_find_number_follows_pages(fake: Fake) -> None:
    with GraphClient(TOKEN, graph_url=fake.url) as client:
        calls.subscribe_app(client, DEST_WABA)
        pid = calls.request_migration(client, DEST_WABA, "91", "9876543210")
        found = calls.find_number(client, DEST_WABA, "91", "9876543210")
    assert found is not None and found.id == pid and not found.is_verified
