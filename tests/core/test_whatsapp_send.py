"""core.whatsapp_send: request bodies, the 4,096-unit split, answers and the error classification."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mogateway.core.whatsapp_send import (
    MAX_TEXT_UNITS,
    SendAction,
    action_for_code,
    classify_answer,
    mark_read_request,
    network_failure,
    parse_send_answer,
    split_text,
    text_message_request,
    utf16_units,
)


def graph_error(code: int, details: str = "", *, transient: bool | None = None, title: str = "T") -> bytes:
    error: dict[str, object] = {
        "message": f"(#{code}) {title}",
        "type": "OAuthException",
        "code": code,
        "fbtrace_id": "Az8or2yhqkZfEZ-_4Qn_Bam",
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    if transient is not None:
        error["is_transient"] = transient
    return json.dumps({"error": error}).encode()


# -- bodies ------------------------------------------------------------------------------------------


def test_text_request_body_is_the_reference_s() -> None:
    body = json.loads(text_message_request("919812345678", "Your balance is ₹240", "wamid.IN"))
    assert body == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "919812345678",
        "type": "text",
        "text": {"preview_url": False, "body": "Your balance is ₹240"},
        "context": {"message_id": "wamid.IN"},
    }
    assert "context" not in json.loads(text_message_request("9198", "x"))
    assert json.loads(mark_read_request("wamid.IN")) == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.IN",
    }


def test_send_answers() -> None:
    ok = (
        b'{"messaging_product":"whatsapp","contacts":[{"input":"9198","wa_id":"9198"}],'
        b'"messages":[{"id":"wamid.R"}]}'
    )
    assert parse_send_answer(ok) == "wamid.R"
    for bad in (
        b"",
        b"{}",
        b'{"messages": []}',
        b'{"messages": [{"id": 5}]}',
        b"[1]",
        b'{"messages":[{"id":""}]}',
    ):
        assert parse_send_answer(bad) is None


# -- classification ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (131047, SendAction.FAIL_NOW),
        (131026, SendAction.FAIL_NOW),
        (100, SendAction.FAIL_NOW),
        (131009, SendAction.FAIL_NOW),
        (131051, SendAction.FAIL_NOW),
        (130429, SendAction.RETRY_BACKOFF),
        (4, SendAction.RETRY_BACKOFF),
        (80007, SendAction.RETRY_BACKOFF),
        (1, SendAction.RETRY_BACKOFF),
        (2, SendAction.RETRY_BACKOFF),
        (131000, SendAction.RETRY_BACKOFF),
        (131056, SendAction.RETRY_THIS_RECIPIENT),
        (190, SendAction.FAIL_AND_ALERT_TOKEN),
        (131048, SendAction.FAIL_AND_ALERT_OPERATOR),
        (133010, SendAction.FAIL_AND_ALERT_OPERATOR),
        (131031, SendAction.FAIL_AND_ALERT_OPERATOR),
        (368, SendAction.FAIL_AND_ALERT_OPERATOR),
    ],
)
def test_the_reference_table(code: int, action: SendAction) -> None:
    assert action_for_code(code) is action
    # by code, not by HTTP status: a 500 with a "do not retry" code is still not retried
    assert action_for_code(code, http_status=500) is action
    failure = classify_answer(400, graph_error(code, "why it failed"))
    assert (failure.action, failure.code, failure.details, failure.http_status) == (
        action,
        code,
        "why it failed",
        400,
    )
    assert failure.title == f"(#{code}) T"


def test_codes_outside_the_table() -> None:
    assert action_for_code(999999) is SendAction.FAIL_NOW
    assert action_for_code(999999, is_transient=True) is SendAction.RETRY_BACKOFF
    assert action_for_code(999999, http_status=503) is SendAction.RETRY_BACKOFF
    assert classify_answer(400, graph_error(999999, transient=True)).action is SendAction.RETRY_BACKOFF
    assert classify_answer(400, graph_error(999999, transient=False)).action is SendAction.FAIL_NOW


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (500, SendAction.RETRY_BACKOFF),
        (502, SendAction.RETRY_BACKOFF),
        (429, SendAction.RETRY_BACKOFF),
        (408, SendAction.RETRY_BACKOFF),
        (404, SendAction.FAIL_NOW),
        (401, SendAction.FAIL_NOW),
    ],
)
def test_answers_without_graph_s_envelope(status: int, action: SendAction) -> None:
    for body in (b"<html>bad gateway</html>", b"", b'{"error": "x"}', b'{"error": {"code": "1"}}'):
        failure = classify_answer(status, body)
        assert (failure.action, failure.code, failure.http_status) == (action, None, status)


def test_network_failures_are_retried_and_long_details_clipped() -> None:
    failure = network_failure("connection reset", maybe_sent=True)
    assert (failure.action, failure.code, failure.maybe_sent) == (SendAction.RETRY_BACKOFF, None, True)
    long = classify_answer(400, graph_error(100, "x" * 5000))
    assert len(long.details) == 1000 and long.details.endswith("…")


# -- splitting ---------------------------------------------------------------------------------------


def test_short_text_is_one_part_and_empty_is_none() -> None:
    assert split_text("") == []
    assert split_text("hello") == ["hello"]
    exact = "a" * MAX_TEXT_UNITS
    assert split_text(exact) == [exact]
    assert [len(p) for p in split_text(exact + "b")] == [MAX_TEXT_UNITS, 1]


def test_parts_end_after_whitespace_preferring_paragraphs_then_lines() -> None:
    words = ("word " * 1000).strip()  # 4,999 characters
    first, second = split_text(words)
    assert first.endswith("word ") and len(first) <= MAX_TEXT_UNITS and first + second == words
    para = "a" * 3000 + "\n\n" + "b" * 500 + "\n" + "c" * 500 + " " + "d" * 1000
    assert split_text(para)[0] == "a" * 3000 + "\n\n"
    line = "a" * 2500 + " x\n" + "b" * 1400 + " " + "c" * 1000
    assert split_text(line)[0] == "a" * 2500 + " x\n"


def test_no_part_ends_inside_a_surrogate_pair_or_a_grapheme() -> None:
    emoji = "😀" * 3000  # 6,000 UTF-16 units
    parts = split_text(emoji)
    assert [utf16_units(p) for p in parts] == [4096, 1904] and "".join(parts) == emoji
    family = "👨\u200d👩\u200d👧"  # a ZWJ sequence
    text = "a" * 4093 + family
    first = split_text(text)[0]
    assert first == "a" * 4093
    flags = "x" + "🇮🇳" * 1100  # regional indicator pairs
    assert all(utf16_units(p) <= 4096 and len(p.replace("x", "")) % 2 == 0 for p in split_text(flags))
    accents = "e\u0301" * 2100  # e + combining acute
    assert all(p[0] != "\u0301" for p in split_text(accents))
    skin = "a" * 4094 + "👍🏽"  # thumbs up + skin tone: 4 units, does not fit after 4,094
    assert split_text(skin) == ["a" * 4094, "👍🏽"]


def test_a_grapheme_longer_than_a_part_is_cut_anyway() -> None:
    text = "e" + "\u0301" * 5000
    parts = split_text(text, 100)
    assert "".join(parts) == text and all(len(p) <= 100 for p in parts)


def test_limit_must_hold_a_surrogate_pair() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        split_text("abc", 1)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=700), st.integers(min_value=2, max_value=120))
def test_split_is_lossless_and_within_the_limit(text: str, limit: int) -> None:
    parts = split_text(text, limit)
    assert "".join(parts) == text
    assert all(p and utf16_units(p) <= limit for p in parts)
    for p in parts:
        p.encode("utf-16-le")  # never a lone surrogate
