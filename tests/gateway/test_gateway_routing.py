"""Routing: shortcode, then the first word as a keyword (case-insensitive); the most specific match wins;
no match is recorded as unroutable; two clients may not claim one route.

One multi-worker gateway serves the module; each test routes shortcodes of its own (``codes``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gateway_harness import Codes, ServeGateway, outcome

from mogateway.testing.recorder import Answer, CallbackRecorder


@pytest.fixture
def bal_app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("balance")) as recorder:
        yield recorder


def reply_of(gw: ServeGateway, shortcode: str, text: str) -> tuple[str, str | None]:
    msg = gw.wait_state(gw.push(shortcode, text)["id"])
    return msg["state"], msg["reply"]


def clients_on(gw: ServeGateway, *shortcodes: str) -> list[dict[str, object]]:
    """The registered clients that route one of ``shortcodes`` (the gateway is shared by the module)."""
    clients = gw.admin("GET", "/v1/clients").json()["clients"]
    return [c for c in clients if {str(s) for s in c["shortcodes"]} & set(shortcodes)]


def test_the_shortcode_picks_the_application(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, bal_app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0], codes[1]], callback_url=app.url, name="a")
    gw.add_client(shortcodes=[codes[2]], callback_url=bal_app.url, name="b")
    assert reply_of(gw, codes[1], "HELLO") == ("replied", "OK")
    assert reply_of(gw, codes[2], "HELLO") == ("replied", "balance")
    assert len(app.calls) == 1 and len(bal_app.calls) == 1


@pytest.mark.parametrize("keyword_first", [True, False], ids=["keyword-registered-first", "default-first"])
def test_the_first_word_keyword_wins_over_the_shortcode_default_case_insensitively(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, bal_app: CallbackRecorder, keyword_first: bool
) -> None:
    register = [
        lambda: gw.add_client(shortcodes=[codes[0]], callback_url=bal_app.url, keywords=["bal"], name="bal"),
        lambda: gw.add_client(shortcodes=[codes[0]], callback_url=app.url, name="default"),
    ]
    for step in register if keyword_first else reversed(register):
        step()
    for text in ("BAL", "bal", "Bal please", "  bAl\tnow"):
        assert reply_of(gw, codes[0], text) == ("replied", "balance"), text
    for text in ("BALANCE", "hello bal", "", "B A L"):
        assert reply_of(gw, codes[0], text) == ("replied", "OK"), text


def test_no_match_is_recorded_as_unroutable_and_listed(
    gw: ServeGateway, codes: Codes, bal_app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=bal_app.url, keywords=["BAL"])
    other_shortcode = gw.wait_state(gw.push(codes[9], "BAL")["id"])
    other_keyword = gw.wait_state(gw.push(codes[0], "HELP me")["id"])
    for msg in (other_shortcode, other_keyword):
        assert msg["state"] == "unroutable"
        assert outcome(msg)["outcome"] == "unroutable"
    assert codes[9] in outcome(other_shortcode)["detail"]
    assert "'help'" in outcome(other_keyword)["detail"]
    listed = gw.admin("GET", "/v1/messages", params={"state": "unroutable", "limit": 1000}).json()["messages"]
    ours = {m["id"] for m in listed if str(m["shortcode"]) in (codes[0], codes[9])}
    assert ours == {other_shortcode["id"], other_keyword["id"]}
    assert bal_app.calls == []


def test_a_removed_client_leaves_its_shortcode_unroutable(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    assert gw.admin("DELETE", f"/v1/clients/{client['id']}").status_code == 204
    assert reply_of(gw, codes[0], "HELLO") == ("unroutable", None)
    assert app.calls == []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"shortcodes": [0]}, {"shortcodes": [0]}),
        ({"shortcodes": [0, 1]}, {"shortcodes": [1, 3]}),
        ({"shortcodes": [0], "keywords": ["BAL"]}, {"shortcodes": [0], "keywords": ["bal"]}),
        (
            {"shortcodes": [0], "keywords": ["BAL", "MINI"]},
            {"shortcodes": [0], "keywords": ["Mini"]},
        ),
    ],
    ids=["two-defaults", "overlapping-shortcodes", "same-keyword-other-case", "one-of-the-keywords"],
)
def test_route_conflicts_are_refused_with_409(
    gw: ServeGateway,
    codes: Codes,
    app: CallbackRecorder,
    first: dict[str, list[Any]],
    second: dict[str, list[Any]],
) -> None:
    """(Shortcodes as indexes into ``codes``.)"""
    first = {**first, "shortcodes": [codes[i] for i in first["shortcodes"]]}
    second = {**second, "shortcodes": [codes[i] for i in second["shortcodes"]]}
    owner = gw.add_client(callback_url=app.url, name="first", **first)
    resp = gw.admin("POST", "/v1/clients", json={"name": "second", "callback_url": app.url, **second})
    assert resp.status_code == 409
    assert resp.headers["content-type"] == "application/problem+json"
    problem = resp.json()
    assert problem["status"] == 409 and owner["id"] in problem["detail"]
    assert [c["id"] for c in clients_on(gw, codes[0], codes[1], codes[3])] == [owner["id"]]


def test_different_keywords_and_a_default_may_share_a_shortcode(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, keywords=["BAL"], name="a")
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, keywords=["MINI"], name="b")
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, name="c")
    assert len(clients_on(gw, codes[0])) == 3


def test_a_patch_that_would_take_anothers_route_is_refused(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, name="a")
    b = gw.add_client(shortcodes=[codes[1]], callback_url=app.url, name="b")
    resp = gw.admin("PATCH", f"/v1/clients/{b['id']}", json={"shortcodes": [codes[1], codes[0]]})
    assert resp.status_code == 409
    assert gw.admin("GET", f"/v1/clients/{b['id']}").json()["shortcodes"] == [codes[1]]
