"""``mogateway simulate`` against real applications on 127.0.0.1, good and misbehaving."""

from __future__ import annotations

import itertools
import socket
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from mogateway.cli import simulate as simulate_cli
from mogateway.client import CallbackApp, InboundMessage
from mogateway.core import contract
from mogateway.core.contract import OutcomeKind
from mogateway.simulation import EXIT_CODES, exit_code, percentile
from mogateway.testing.callback_apps import RecordingApp, answer_app, serve_asgi

TOKEN = "sim-token"


def cli() -> typer.Typer:
    # A group of its own, so `simulate` is a subcommand whatever else the main app registers.
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """Test group."""

    simulate_cli.register(app)
    return app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["simulate", *args])
    return result.exit_code, result.output


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, output = run(*args, "--json")
    return code, orjson.loads(output)


def echo(message: InboundMessage) -> str:
    return f"You said: {message.message}"


def test_reply_is_reported_with_sms_parts_and_exit_0() -> None:
    with serve_asgi(CallbackApp(echo, TOKEN)) as url:
        code, output = run(url, "--token", TOKEN, "HELLO")
    assert code == 0, output
    assert "reply (status 200)" in output
    assert "| You said: HELLO" in output
    assert "SMS: 1 part, GSM-7, 15 septets" in output


def test_json_reply_counts_parts_of_long_and_unicode_text() -> None:
    with serve_asgi(CallbackApp(lambda m: "नमस्ते " * 20, TOKEN)) as url:
        code, doc = run_json(url, "--token", TOKEN, "HI")
    assert code == 0
    assert doc["outcome"] == "reply" and doc["sends_reply"] is True and doc["status"] == 200
    assert doc["sms"]["encoding"] == "ucs2"
    assert doc["sms"]["parts"] == 3  # 139 UTF-16 units after strip: 67 per part
    assert doc["elapsed_ms"] > 0 and doc["exit_code"] == 0


def test_sends_contract_exact_request() -> None:
    app = RecordingApp(answer=b"ok")
    with serve_asgi(app) as url:
        args = ["--msisdn", "919812012345", "--operator", "airtel", "--circle", "delhi", "--tsunix-unit", "s"]
        code, _ = run(url + "/cb", "--token", TOKEN, "--shortcode", "56767", *args, "BAL")
    assert code == 0
    (request,) = app.requests
    assert (request.method, request.path) == ("POST", "/cb")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-mogateway-message-id"]
    mo = contract.parse_callback_body(request.body)
    assert (mo.shortcode, mo.msisdn, mo.text) == ("56767", "919812012345", "BAL")
    assert mo.sender is not None
    assert (mo.sender.sn_digits, mo.sender.operator, mo.sender.circle) == ("012345", "airtel", "delhi")
    assert len(str(orjson.loads(request.body)["tsunix"])) == 10
    assert request.body == contract.callback_body(mo, "s")  # the bytes the gateway would send


@pytest.mark.parametrize(
    ("app", "kind", "detail"),
    [
        (answer_app(b"", content_type="text/plain"), "blank", "blank body"),
        (answer_app(b"  \\n "), "blank", "blank body"),
        (answer_app(b"oops", status=500), "http_error", "status 500"),
        (answer_app(b'{"reply":"hi"}', content_type="application/json"), "bad_response", "content type"),
    ],
)
def test_no_reply_answers_give_their_reason_and_exit_code(app: Any, kind: str, detail: str) -> None:
    with serve_asgi(app) as url:
        code, output = run(url, "--token", TOKEN, "HI")
        json_code, doc = run_json(url, "--token", TOKEN, "HI")
    assert code == json_code == EXIT_CODES[OutcomeKind(kind)] != 0
    assert f"no reply ({kind}): " in output and detail in output
    assert doc["outcome"] == kind and doc["reply"] is None and detail in doc["detail"]


def test_wrong_token_is_reported_as_401() -> None:
    with serve_asgi(CallbackApp(echo, "the-real-one")) as url:
        code, doc = run_json(url, "--token", TOKEN, "HI")
    assert (code, doc["outcome"], doc["status"]) == (5, "http_error", 401)


def test_slow_application_times_out() -> None:
    with serve_asgi(answer_app(b"late", delay_s=3)) as url:
        code, output = run(url, "--token", TOKEN, "--timeout", "0.4", "HI")
    assert code == 4
    assert "no reply (timeout): no complete answer within 0.4 s" in output


def test_connection_refused_is_failed_after_retries() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, doc = run_json(f"http://127.0.0.1:{port}/", "--token", TOKEN, "--timeout", "0.4", "HI")
    assert (code, doc["outcome"]) == (7, "failed")
    assert len(doc["attempts"]) >= 2  # retried with backoff while the deadline lasted
    assert all(a["status"] is None and a["error"] for a in doc["attempts"])


def test_repeat_prints_a_latency_summary() -> None:
    with serve_asgi(CallbackApp(echo, TOKEN)) as url:
        code, output = run(url, "--token", TOKEN, "--repeat", "20", "--concurrency", "5", "HI")
        json_code, doc = run_json(url, "--token", TOKEN, "--repeat", "10", "--concurrency", "3", "HI")
    assert code == 0, output
    assert "20 callbacks, concurrency 5" in output
    assert "outcomes: reply 20" in output
    assert "latency ms: p50 " in output and " p99 " in output and " max " in output
    assert json_code == 0
    assert doc["count"] == 10 and doc["outcomes"] == {"reply": 10}
    latency = doc["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]


def test_repeat_with_mixed_outcomes_exits_1() -> None:
    counter = itertools.count()

    def sometimes(_: InboundMessage) -> str | None:
        return "yes" if next(counter) % 2 == 0 else None

    with serve_asgi(CallbackApp(sometimes, TOKEN)) as url:
        code, doc = run_json(url, "--token", TOKEN, "--repeat", "6", "HI")
    assert code == 1
    assert doc["outcomes"] == {"reply": 3, "blank": 3}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ftp://example.invalid/", "--token", TOKEN, "HI"], "only http and https"),
        (["http://127.0.0.1:9/", "--token", TOKEN, "--msisdn", "12345", "HI"], "--msisdn"),
        (["http://127.0.0.1:9/", "--token", TOKEN, "--shortcode", "5a", "HI"], "--shortcode"),
        (["http://127.0.0.1:9/", "--token", TOKEN, "--tsunix-unit", "us", "HI"], "--tsunix-unit"),
        (["http://127.0.0.1:9/", "HI"], "--token"),
        (["http://127.0.0.1:9/", "--token", TOKEN, "--repeat", "0", "HI"], "--repeat"),
    ],
)
def test_usage_errors_exit_2_with_one_message(args: list[str], message: str) -> None:
    code, output = run(*args)
    assert code == 2
    assert message in output
    assert "Traceback" not in output


def test_exit_code_rules() -> None:
    assert exit_code([OutcomeKind.REPLY] * 3) == 0
    assert exit_code([OutcomeKind.TIMEOUT] * 2) == 4
    assert exit_code([OutcomeKind.REPLY, OutcomeKind.TIMEOUT]) == 1
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    assert 1 not in EXIT_CODES.values() and 2 not in EXIT_CODES.values()


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (50.0, 90.0, 99.0)
    assert percentile(values, 100) == 100.0 and percentile([7.0], 50) == 7.0 and percentile([], 50) == 0.0


def test_signing_secret_signs_like_the_gateway_and_a_wrong_one_is_a_401() -> None:
    secret = "sim-signing-secret-0123456789abcdefghijkl"
    app = CallbackApp(echo, TOKEN, signing_secrets=[secret])
    with serve_asgi(app) as url:
        code, output = run(url, "--token", TOKEN, "--signing-secret", secret, "HELLO")
        assert code == 0, output
        assert "(signed)" in output and "| You said: HELLO" in output
        assert secret not in output  # a secret is used, never printed

        code, document = run_json(url, "--token", TOKEN, "--signing-secret", "new-secret," + secret, "HI")
        assert (code, document["reply"]) == (0, "You said: HI")  # several: as during a rotation

        code, document = run_json(url, "--token", TOKEN, "--signing-secret", "not-the-secret", "HI")
        assert (code, document["outcome"], document["status"]) == (5, "http_error", 401)
        code, document = run_json(url, "--token", TOKEN, "HI")  # unsigned: refused as "missing"
        assert (code, document["status"]) == (5, 401)

        result = CliRunner().invoke(
            cli(),
            ["simulate", url, "HI", "--json"],
            env={"MOGATEWAY_CLIENT_TOKEN": TOKEN, "MOGATEWAY_SIGNING_SECRET": secret},
        )
        assert result.exit_code == 0, result.output
    code, output = run("http://127.0.0.1:9/", "--token", TOKEN, "--signing-secret", " , ", "HI")
    assert code == 2 and "--signing-secret" in output
