"""The Flask order tracker on a real WSGI server (werkzeug, threaded)."""

from __future__ import annotations

from types import ModuleType

import httpx
import pytest

from mogateway.testing.callback_apps import serve_wsgi
from mogateway.testing.payloads import make_callback, make_message

TOKEN = "tracker-token"


def test_track_handler_alone(flask_tracker: ModuleType) -> None:
    assert flask_tracker.track(make_message("TRACK a1001")) == "Order A1001: shipped, arriving tomorrow"
    assert flask_tracker.track(make_message("TRACK")) == flask_tracker.USAGE


def test_tracker_over_http(flask_tracker: ModuleType) -> None:
    with serve_wsgi(flask_tracker.create_app([TOKEN])) as base:

        def send(text: str, token: str = TOKEN) -> httpx.Response:
            body, headers = make_callback(text, token=token)
            return httpx.post(base + "/sms", content=body, headers=headers, timeout=10)

        found = send("track A1002")
        assert (found.status_code, found.text) == (200, "Order A1002: being packed")
        assert found.headers["content-type"] == "text/plain; charset=utf-8"
        assert send("TRACK Z9").text == f"No order Z9 found. {flask_tracker.USAGE}"
        assert send("hi").text == flask_tracker.USAGE
        assert send("TRACK A1001", token="nope").status_code == 401
        body, headers = make_callback("TRACK A1001", token=TOKEN)
        bad = httpx.post(base + "/sms", content=body[:-5], headers=headers)
        assert bad.status_code == 422 and bad.json()["field"] == "body"


def test_tracker_verifies_signatures_when_given_a_secret(
    flask_tracker: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOGATEWAY_SIGNING_SECRET", "tracker-signing-secret-0123456789-abcdef")
    with serve_wsgi(flask_tracker.create_app([TOKEN])) as base:
        body, headers = make_callback(
            "TRACK A1001", token=TOKEN, signing_secret="tracker-signing-secret-0123456789-abcdef"
        )
        assert httpx.post(base + "/sms", content=body, headers=headers).text.startswith("Order A1001")
        unsigned = httpx.post(base + "/sms", content=body, headers={"authorization": f"Bearer {TOKEN}"})
        assert unsigned.status_code == 401 and unsigned.json()["reason"] == "missing"
