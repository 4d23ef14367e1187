"""Each adapter (plain ASGI on uvicorn, FastAPI on uvicorn, Flask on werkzeug) through a real server."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest
from client_servers import OLD_TOKEN, TOKEN, Serve

from mogateway.client import InboundMessage
from mogateway.testing.payloads import make_callback


def echo(message: InboundMessage) -> str:
    return f"You said: {message.message}"


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=10)


def problem_of(response: httpx.Response) -> dict[str, object]:
    assert response.headers["content-type"] == "application/problem+json"
    document: dict[str, object] = orjson.loads(response.content)
    assert document["status"] == response.status_code
    return document


def test_reply_is_200_text_plain_utf8(serve: Serve) -> None:
    with serve(echo) as url:
        response = post(url, *make_callback("नमस्ते BAL", token=TOKEN))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.content.decode("utf-8") == "You said: नमस्ते BAL"


def test_rotated_token_is_accepted(serve: Serve) -> None:
    with serve(echo) as url:
        assert post(url, *make_callback("HI", token=OLD_TOKEN)).text == "You said: HI"


def test_handler_sees_the_gateway_message_id(serve: Serve) -> None:
    with serve(lambda m: m.message_id) as url:
        assert post(url, *make_callback("HI", token=TOKEN, message_id="mo-42")).text == "mo-42"


@pytest.mark.parametrize("answer", [None, ""])
def test_no_reply_is_200_with_empty_body(serve: Serve, answer: str | None) -> None:
    with serve(lambda m: answer) as url:
        response = post(url, *make_callback("HI", token=TOKEN))
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic " + TOKEN, TOKEN])
def test_missing_or_wrong_token_is_401(serve: Serve, authorization: str | None) -> None:
    calls: list[InboundMessage] = []
    body, headers = make_callback("HI", token=TOKEN)
    del headers["authorization"]
    if authorization is not None:
        headers["authorization"] = authorization
    with serve(calls.append) as url:
        response = post(url, body, headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "token" in str(problem_of(response)["detail"])
    assert calls == []  # the handler never ran


def test_bad_payload_is_422_naming_the_field(serve: Serve) -> None:
    body, headers = make_callback("HI", token=TOKEN)
    with serve(echo) as url:
        response = post(url, body.replace(b'"msisdn":919812345678', b'"msisdn":12345'), headers)
    assert response.status_code == 422
    document = problem_of(response)
    assert document["field"] == "msisdn"
    assert document["reason"] == "must have 12 digits"


def test_body_over_the_limit_is_413(serve: Serve) -> None:
    with serve(echo, max_body_bytes=1024) as url:
        response = post(url, *make_callback("x" * 2000, token=TOKEN))
        assert response.status_code == 413
        problem_of(response)
        assert post(url, *make_callback("small", token=TOKEN)).status_code == 200


def test_sync_handler_over_budget_answers_no_reply_in_time(serve: Serve) -> None:
    def slow(_: InboundMessage) -> str:
        time.sleep(1.5)
        return "too late"

    with serve(slow, budget_s=0.3) as url:
        started = time.monotonic()
        response = post(url, *make_callback("HI", token=TOKEN))
        took = time.monotonic() - started
    assert response.status_code == 200
    assert response.content == b""
    assert 0.3 <= took < 1.2


def test_async_handler_over_budget_answers_no_reply_in_time(serve: Serve) -> None:
    async def slow(_: InboundMessage) -> str:
        await asyncio.sleep(1.5)
        return "too late"

    with serve(slow, budget_s=0.3) as url:
        started = time.monotonic()
        response = post(url, *make_callback("HI", token=TOKEN))
        took = time.monotonic() - started
    assert (response.status_code, response.content) == (200, b"")
    assert 0.3 <= took < 1.2


def test_async_handler_within_budget_replies(serve: Serve) -> None:
    async def fast(message: InboundMessage) -> str:
        await asyncio.sleep(0.01)
        return message.keyword

    with serve(fast, budget_s=2) as url:
        assert post(url, *make_callback("bal now", token=TOKEN)).text == "BAL"


def test_failing_handler_is_500_without_internals(serve: Serve) -> None:
    def broken(_: InboundMessage) -> str:
        raise RuntimeError("database password is hunter2")

    with serve(broken) as url:
        response = post(url, *make_callback("HI", token=TOKEN))
    assert response.status_code == 500
    assert "hunter2" not in response.text
    problem_of(response)


def test_wrong_return_type_is_500(serve: Serve) -> None:
    with serve(lambda m: 42) as url:
        assert post(url, *make_callback("HI", token=TOKEN)).status_code == 500
