"""The FastAPI keyword bot: its handlers alone, then the whole app on uvicorn."""

from __future__ import annotations

from types import ModuleType

import httpx

from mogateway.testing.callback_apps import serve_asgi
from mogateway.testing.payloads import make_callback, make_message

TOKEN = "bot-token"
CUSTOMER = "919812345678"


def test_handlers_without_http(fastapi_bot: ModuleType) -> None:
    # The quickest test an application can have: build a message, call the router.
    bank = fastapi_bot.Bank({CUSTOMER: 150_075})
    router = fastapi_bot.build_router(bank)
    assert router(make_message("BAL", msisdn=CUSTOMER)) == "Your balance is Rs 1,500.75"
    assert router(make_message("HELP")) == fastapi_bot.HELP_TEXT
    assert router(make_message("what?")) == fastapi_bot.HELP_TEXT


def test_bot_over_http(fastapi_bot: ModuleType) -> None:
    bank = fastapi_bot.Bank({CUSTOMER: 1_234_550})
    with serve_asgi(fastapi_bot.create_app([TOKEN], bank)) as base:

        def send(text: str, msisdn: str = CUSTOMER, token: str = TOKEN) -> httpx.Response:
            body, headers = make_callback(text, msisdn=msisdn, token=token)
            return httpx.post(base + "/sms", content=body, headers=headers, timeout=10)

        balance = send("bal")
        assert (balance.status_code, balance.text) == (200, "Your balance is Rs 12,345.50")
        assert balance.headers["content-type"] == "text/plain; charset=utf-8"
        assert send("Balance please").text == "Your balance is Rs 12,345.50"
        assert send("BAL", msisdn="919900000001").text.startswith("No account is linked")
        assert send("HELP").text == fastapi_bot.HELP_TEXT
        assert send("hello").text == fastapi_bot.HELP_TEXT
        assert send("STOP").text.startswith("You are unsubscribed")
        assert CUSTOMER in bank.unsubscribed
        assert send("BAL", token="wrong").status_code == 401
        assert httpx.get(base + "/healthz").json() == {"status": "ok"}
