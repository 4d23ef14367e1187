"""Mutated webhooks, at the pure level (many examples): any JSON body parses, and every message that
still has a sender and an id is taken — one unreadable item never sinks the others."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mogateway.core.whatsapp import parse_webhook
from mogateway.testing.fake_graph import webhooks as wh

from .webhook_mutations import expected_wamids, mutate, mutations, valid_body


def test_the_valid_body_gives_every_message_and_status() -> None:
    body = valid_body("v")
    hook = parse_webhook(wh.encode(body))
    assert [m.wamid for m in hook.messages] == expected_wamids(body) and len(hook.messages) == 7
    assert len(hook.statuses) == 2 and hook.unread == ()


@settings(max_examples=1500, deadline=None)
@given(mutations)
def test_a_mutated_body_gives_each_message_that_still_has_a_sender_and_an_id(ops: Any) -> None:
    body = mutate(valid_body("m"), ops)
    hook = parse_webhook(json.dumps(body).encode())  # never raises: it is JSON
    assert [m.wamid for m in hook.messages] == expected_wamids(body)
    for m in hook.messages:
        assert (m.sender.isdigit() or m.user_id) and isinstance(m.text, str) and m.timestamp >= 0
        assert isinstance(m.raw, dict) and m.raw.get("id") == m.wamid
    for u in hook.unread:
        assert u.kind in {"body", "change", "number", "message", "status"} and u.reason


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
    )
)
def test_any_json_at_all_parses(data: Any) -> None:
    parse_webhook(json.dumps(data).encode())
