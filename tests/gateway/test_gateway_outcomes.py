"""Every outcome rule of the callback, through the real dispatcher against a real callback server.

The gateway's reply channel is ``http`` pointing at the ``mt`` recorder: whatever reaches the subscriber
passes there, so "no error text is ever sent" is checked by looking at what ``mt`` received about the
message.

The gateway is ``mogateway serve`` with several workers, shared by the module (each test on shortcodes of
its own); the tests of what is logged read a gateway's log (its stderr), as an operator would.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_harness import (
    Codes,
    ServeGateway,
    calls_for,
    closed_port_url,
    events,
    outcome,
    serve_gateway,
    state_from_timeline,
    wait_until,
)

from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

MSISDN = "919810012345"


def run_one(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, answer: Answer, text: str = "HELLO", **client: Any
) -> dict[str, Any]:
    """Register ``app`` (answering ``answer``) on the test's first shortcode, push one MO, wait for its
    final state."""
    app.answer = answer
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, **client)
    accepted = gw.push(codes[0], text)
    message = gw.wait_state(accepted["id"])
    assert state_from_timeline(message) == message["state"]  # the timeline explains the state
    return message


def mt_texts(mt: CallbackRecorder, message_id: str) -> list[str]:
    """The texts handed to the MT endpoint for one message, once there is one."""
    wait_until(lambda: calls_for(mt, message_id), f"a reply to {message_id} at the MT endpoint")
    return [call.json()["text"] for call in calls_for(mt, message_id)]


@pytest.fixture(scope="module")
def logged_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    """A gateway logging at INFO (to its stderr) with the default reply channel, ``log``."""
    with serve_gateway(tmp_path_factory.mktemp("logged"), log_level="info") as gateway:
        yield gateway


def log_lines(gw: ServeGateway, logger: str) -> list[str]:
    """The messages of one logger in the gateway's log (every worker's)."""
    return [line.split(f"{logger}: ", 1)[1] for line in gw.stderr().splitlines() if f" {logger}: " in line]


# ------------------------------------------------------------------------------------ replies


def test_text_reply_is_recorded_and_handed_to_the_reply_channel(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.text("Your balance is Rs 42"))
    assert msg["state"] == "replied"
    assert msg["reply"] == "Your balance is Rs 42"
    out = outcome(msg)
    assert (out["outcome"], out["status"], out["parts"], out["encoding"]) == ("reply", 200, 1, "gsm7")
    (submitted,) = events(msg, "reply_submitted")
    assert submitted["channel"] == "http" and submitted["refs"] == ["mt-1"]
    mt_texts(mt, msg["id"])
    (call,) = calls_for(mt, msg["id"])
    assert call.json() == {
        "to": MSISDN,
        "from": codes[0],
        "text": "Your balance is Rs 42",
        "message_id": msg["id"],
    }
    assert len(app.calls) == 1


def test_the_log_channel_records_and_logs_the_reply(
    logged_gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    msg = run_one(logged_gw, codes, app, Answer.text("Thanks!"))  # reply_channel defaults to "log"
    assert msg["state"] == "replied"
    (submitted,) = events(msg, "reply_submitted")
    assert submitted["channel"] == "log" and submitted["parts"] == 1

    def logged() -> list[str]:
        return [line for line in log_lines(logged_gw, "mogateway.replies") if msg["id"] in line]

    wait_until(logged, "the reply in the log")
    (line,) = logged()
    assert "'Thanks!'" in line and MSISDN in line


def test_text_plain_in_latin1_is_decoded_with_its_charset(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.text("Café ouvert", charset="iso-8859-1"))
    assert msg["reply"] == "Café ouvert"
    assert mt_texts(mt, msg["id"]) == ["Café ouvert"]


def test_a_missing_content_type_counts_as_text(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer(body=b"plain enough", content_type=None))
    assert (msg["state"], msg["reply"]) == ("replied", "plain enough")


def test_a_hindi_reply_is_sent_as_ucs2(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.text("धन्यवाद 🙏"))
    out = outcome(msg)
    assert (msg["reply"], out["encoding"], out["parts"]) == ("धन्यवाद 🙏", "ucs2", 1)
    assert mt_texts(mt, msg["id"]) == ["धन्यवाद 🙏"]


@pytest.mark.parametrize("body", [b"", b"   ", b" \r\n\t \n"], ids=["empty", "spaces", "whitespace"])
def test_a_blank_answer_sends_no_reply(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder, body: bytes
) -> None:
    msg = run_one(gw, codes, app, Answer.blank(body))
    assert msg["state"] == "no_reply"
    assert outcome(msg)["outcome"] == "blank"
    assert msg["reply"] is None and not events(msg, "reply_submitted")
    assert calls_for(mt, msg["id"]) == []


def test_backslash_n_in_a_reply_becomes_a_line_break(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.text("Balance: 42\\nValid till 31 Dec"))
    assert msg["reply"] == "Balance: 42\nValid till 31 Dec"
    assert mt_texts(mt, msg["id"]) == ["Balance: 42\nValid till 31 Dec"]


def test_line_break_unescaping_is_switchable_per_client(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.text("C:\\new folder"), unescape_newlines=False)
    assert msg["reply"] == "C:\\new folder"
    assert mt_texts(mt, msg["id"]) == ["C:\\new folder"]


# ------------------------------------------------------------------------------------ parts


@pytest.mark.parametrize(
    ("reply", "parts", "encoding"),
    [
        ("a" * 160, 1, "gsm7"),
        ("a" * 161, 2, "gsm7"),
        ("न" * 70, 1, "ucs2"),
        ("न" * 71, 2, "ucs2"),
        ("न" * 134, 2, "ucs2"),
    ],
    ids=["gsm160", "gsm161", "ucs70", "ucs71", "ucs134"],
)
def test_reply_parts_are_counted(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, reply: str, parts: int, encoding: str
) -> None:
    msg = run_one(gw, codes, app, Answer.text(reply))
    out = outcome(msg)
    assert (out["parts"], out["encoding"]) == (parts, encoding)
    assert "truncated_from_chars" not in out
    assert events(msg, "reply_submitted")[0]["parts"] == parts


@pytest.mark.parametrize(
    ("reply", "kept"),
    [("a" * 600, "a" * 459), ("न" * 250, "न" * 201)],  # 3 parts: 3 x 153 septets, 3 x 67 units
    ids=["gsm7", "ucs2"],
)
def test_long_replies_are_capped_at_reply_max_parts_and_the_cut_recorded(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder, reply: str, kept: str
) -> None:
    msg = run_one(gw, codes, app, Answer.text(reply))  # gw runs with reply_max_parts = 3
    out = outcome(msg)
    assert msg["reply"] == kept
    assert (out["parts"], out["truncated_from_chars"]) == (3, len(reply))
    assert mt_texts(mt, msg["id"]) == [kept]


# ------------------------------------------------------------------------------------ no reply


@pytest.mark.parametrize("status", [500, 404, 204])
def test_another_status_is_an_http_error_with_the_status(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder, status: int
) -> None:
    body = b"" if status == 204 else b"Traceback: secret internals of the app"
    msg = run_one(gw, codes, app, Answer.with_status(status, body))
    assert msg["state"] == "http_error"
    out = outcome(msg)
    assert (out["outcome"], out["status"]) == ("http_error", status)
    assert msg["reply"] is None
    assert calls_for(mt, msg["id"]) == []  # the app's error text never reaches the subscriber


def test_redirects_are_not_followed(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    with CallbackRecorder.in_thread(Answer.text("followed the redirect")) as elsewhere:
        msg = run_one(gw, codes, app, Answer.with_status(302, headers=(("location", elsewhere.url),)))
        assert (msg["state"], outcome(msg)["status"]) == ("http_error", 302)
        assert elsewhere.calls == []
    assert calls_for(mt, msg["id"]) == []


@pytest.mark.parametrize(
    "content_type", ["application/json", "text/html; charset=utf-8", "application/octet-stream"]
)
def test_another_content_type_is_a_bad_response(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder, content_type: str
) -> None:
    msg = run_one(gw, codes, app, Answer(body=b'{"reply": "hi"}', content_type=content_type))
    assert msg["state"] == "bad_response"
    assert content_type.split(";")[0] in outcome(msg)["detail"]
    assert calls_for(mt, msg["id"]) == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_answer_over_64_kib_is_a_bad_response(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder, chunked: bool
) -> None:
    msg = run_one(gw, codes, app, Answer.oversize(chunked=chunked))
    assert msg["state"] == "bad_response"
    assert "65536" in outcome(msg)["detail"]
    assert calls_for(mt, msg["id"]) == []


def test_an_answer_of_exactly_64_kib_is_still_read(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.oversize(64 * 1024, chunked=True))
    assert msg["state"] == "replied"  # (then capped to the configured number of parts)


def test_an_undecodable_body_is_a_bad_response(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(
        gw, codes, app, Answer(body=b"\xff\xfe\xfa not utf-8", content_type="text/plain; charset=utf-8")
    )
    assert msg["state"] == "bad_response"
    assert calls_for(mt, msg["id"]) == []


def test_a_compressed_answer_is_read_as_the_text_it_carries(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    """An application behind a compressing proxy gzips its answer when the request says it may."""
    text = "Café: table for 2 confirmed"

    def maybe_gzip(call: RecordedCall) -> Answer:
        if "gzip" in call.headers.get("accept-encoding", ""):
            return Answer(
                body=gzip.compress(text.encode("latin-1")),
                content_type="text/plain; charset=iso-8859-1",
                headers=(("content-encoding", "gzip"),),
            )
        return Answer.text(text, charset="iso-8859-1")

    msg = run_one(gw, codes, app, maybe_gzip)  # type: ignore[arg-type]
    assert (msg["state"], msg["reply"]) == ("replied", text)
    assert mt_texts(mt, msg["id"]) == [text]  # never the compressed bytes read as Latin-1


def test_an_answer_compressed_anyway_is_a_bad_response_never_garbage_text(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    """Even when the application compresses although it was asked not to."""
    compressed = Answer(
        body=gzip.compress("Café".encode("latin-1")),
        content_type="text/plain; charset=iso-8859-1",
        headers=(("content-encoding", "gzip"),),
    )
    msg = run_one(gw, codes, app, compressed)
    assert msg["state"] == "bad_response"
    assert "gzip" in outcome(msg)["detail"]
    assert app.calls[0].headers["accept-encoding"] == "identity"
    assert calls_for(mt, msg["id"]) == []


# ------------------------------------------------------------------------------------ time


def test_no_answer_within_the_client_timeout_is_timed_out(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    msg = run_one(gw, codes, app, Answer.late(3.0, "too late"), timeout_s=1)
    assert msg["state"] == "timed_out"
    out = outcome(msg)
    assert 950 <= out["elapsed_ms"] < 2000
    attempts = events(msg, "attempt")
    assert len(attempts) == 1 and attempts[0]["error"] == "timeout"
    assert calls_for(mt, msg["id"]) == [] and msg["reply"] is None


def test_the_timeout_is_a_deadline_for_the_whole_exchange_not_for_inactivity(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    """A 200 whose body trickles in a byte every 0.1 s never goes quiet for long, but takes 2 s."""
    trickle = Answer.text("x" * 20, trickle_bytes=1, trickle_s=0.1)
    msg = run_one(gw, codes, app, trickle, timeout_s=1)
    assert msg["state"] == "timed_out"
    assert outcome(msg)["elapsed_ms"] < 1800
    assert calls_for(mt, msg["id"]) == []


def test_connection_refused_is_retried_within_the_deadline_then_failed(
    gw: ServeGateway, codes: Codes, mt: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=closed_port_url(), timeout_s=1)
    msg = gw.wait_state(gw.push(codes[0], "HELLO")["id"])
    assert msg["state"] == "failed"
    out = outcome(msg)
    assert "could not connect" in out["detail"]
    assert 950 <= out["elapsed_ms"] < 2000
    attempts = events(msg, "attempt")
    assert len(attempts) >= 3  # backoff 50 ms, 100 ms, 200 ms, ... within 1 s
    assert all("status" not in a and a["error"] for a in attempts)
    assert [a["n"] for a in attempts] == list(range(1, len(attempts) + 1))
    assert calls_for(mt, msg["id"]) == []


def test_an_app_that_hangs_up_gets_the_same_message_again_then_it_fails(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    """Closing without an answer is a connection failure: retried (same message id) while time lasts."""
    msg = run_one(gw, codes, app, Answer.hang_up(), timeout_s=1)
    assert msg["state"] == "failed"
    calls = app.calls
    assert len(calls) >= 2
    assert {c.headers["x-mogateway-message-id"] for c in calls} == {msg["id"]}
    assert calls_for(mt, msg["id"]) == []


def test_a_slow_client_does_not_delay_another_client(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    """Isolation: one app that never answers in time, one fast app on another shortcode."""
    app.answer = Answer.late(3.0)
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, timeout_s=2, max_concurrency=1)
    with CallbackRecorder.in_thread(Answer.text("fast")) as fast:
        gw.add_client(shortcodes=[codes[1]], callback_url=fast.url, name="fast")
        slow_ids = [gw.push(codes[0], f"slow {i}")["id"] for i in range(3)]
        fast_id = gw.push(codes[1], "quick")["id"]
        msg = gw.wait_state(fast_id, timeout=1.5)
        assert msg["state"] == "replied"
        assert all(gw.message(i)["state"] == "queued" for i in slow_ids)


def test_a_client_never_has_more_callbacks_in_flight_than_its_cap(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    app.answer = Answer.late(0.3)
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, max_concurrency=2)
    ids = [gw.push(codes[0], f"m{i}")["id"] for i in range(6)]
    for message_id in ids:
        gw.wait_state(message_id)
    at = sorted(call.at for call in app.calls)
    # With at most two in flight, the third call can only start once the first answer (0.3 s) came back.
    assert all(at[i + 2] - at[i] >= 0.25 for i in range(len(at) - 2)), at


def test_a_hanging_client_with_a_cap_above_the_global_one_leaves_room_for_the_others(
    tmp_path: Path, codes: Codes, app: CallbackRecorder
) -> None:
    """max_inflight 10 (a worker's: every worker has its own), the hanging client's cap 50 (shared by
    the workers): it holds 9 callbacks on each worker, and each worker's tenth slot is the other
    clients', so the other client is answered while all of them hang."""
    app.answer = Answer.late(4.0)
    with (
        serve_gateway(tmp_path, max_inflight=10) as gw,
        CallbackRecorder.in_thread(Answer.text("fast")) as fast,
    ):
        gw.add_client(shortcodes=[codes[0]], callback_url=app.url, timeout_s=5, max_concurrency=50)
        gw.add_client(shortcodes=[codes[1]], callback_url=fast.url, name="fast")
        # Each push on a new connection: every worker takes (far more than) nine of them.
        for i in range(30 * gw.workers):
            gw.push(codes[0], f"hang {i}")
        held = 9 * gw.workers
        app.wait_for_calls(held)
        fast_id = gw.push(codes[1], "quick")["id"]
        assert gw.wait_state(fast_id, timeout=2.0)["state"] == "replied"
        assert len(app.calls) == held  # the hanging client never got a worker's tenth slot


def test_a_client_failing_again_and_again_is_one_log_line_and_one_when_it_works_again(
    logged_gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    """(Its cap of one puts the client on one worker, which counts its failures in a row.)"""
    app.then(*[Answer.with_status(500)] * 12)  # then "OK" again
    name = f"flaky{codes[0]}"
    logged_gw.add_client(shortcodes=[codes[0]], callback_url=app.url, name=name, max_concurrency=1)
    ids = [logged_gw.push(codes[0], f"VOTE {n}")["id"] for n in range(14)]
    states = [logged_gw.wait_state(mid)["state"] for mid in ids]
    assert states == ["http_error"] * 12 + ["replied"] * 2

    def lines() -> list[str]:
        return [
            line
            for line in log_lines(logged_gw, "mogateway.service.dispatcher")
            if f"client {name} (" in line
        ]

    wait_until(
        lambda: any("work again" in line for line in lines()), "the line saying the callbacks work again"
    )
    failing = [line for line in lines() if "callbacks failed in a row" in line]
    assert len(failing) == 1, lines()  # at the 5th failure, not once per failure
    assert "5 callbacks failed in a row, the last: http_error 500" in failing[0]
    recovered = [line for line in lines() if "callbacks work again after 12 failures" in line]
    assert len(recovered) == 1, lines()
