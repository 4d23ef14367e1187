"""The recording callback application itself, driven by a plain HTTP client (so users can trust it)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from mogateway.testing.recorder import Answer, CallbackRecorder


async def test_records_requests_and_answers_in_the_running_loop() -> None:
    async with CallbackRecorder(Answer.text("नमस्ते", charset="utf-8")) as app, httpx.AsyncClient() as http:
        resp = await http.post(app.url, content=b'{"a": 1}', headers={"authorization": "Bearer t"})
        assert (resp.status_code, resp.text) == (200, "नमस्ते")
        assert resp.headers["content-type"] == "text/plain; charset=utf-8"
        (call,) = await app.until_calls(1)
        assert (call.method, call.path, call.json()) == ("POST", "/callback", {"a": 1})
        assert call.headers["authorization"] == "Bearer t"


def test_one_shot_answers_come_first_then_the_default() -> None:
    with CallbackRecorder.in_thread(Answer.text("default")) as app, httpx.Client() as http:
        app.then(Answer.with_status(500, b"boom"), Answer(body=b"raw", content_type=None))
        first, second, third = (http.post(app.url, content=b"x") for _ in range(3))
        assert (first.status_code, first.text) == (500, "boom")
        assert "content-type" not in second.headers and second.text == "raw"
        assert third.text == "default"
        assert len(app.wait_for_calls(3)) == 3


def test_answers_can_depend_on_the_request() -> None:
    with CallbackRecorder.in_thread(lambda call: Answer.text(call.body.decode().upper())) as app:
        assert httpx.post(app.url, content=b"bal").text == "BAL"


def test_hang_up_closes_without_a_status_line() -> None:
    with CallbackRecorder.in_thread(Answer.hang_up()) as app, pytest.raises(httpx.RemoteProtocolError):
        httpx.post(app.url, content=b"x")


def test_trickle_and_delay_take_their_time() -> None:
    with CallbackRecorder.in_thread(Answer.text("abcd", delay_s=0.2, trickle_bytes=1, trickle_s=0.1)) as app:
        started = time.monotonic()
        assert httpx.post(app.url, content=b"x").text == "abcd"
        assert time.monotonic() - started >= 0.5


def test_oversize_and_chunked() -> None:
    with CallbackRecorder.in_thread(Answer.oversize(chunked=True)) as app:
        resp = httpx.post(app.url, content=b"x")
        assert len(resp.content) == 64 * 1024 + 1 and "content-length" not in resp.headers


def test_chunked_requests_are_read() -> None:
    def body() -> object:
        yield b"part one, "
        yield b"part two"

    with CallbackRecorder.in_thread() as app:
        httpx.post(app.url, content=body())  # type: ignore[arg-type]
        assert app.wait_for_calls(1)[0].body == b"part one, part two"


async def test_stop_abandons_a_request_waiting_in_its_delay() -> None:
    app = CallbackRecorder(Answer.late(30))
    await app.start()
    async with httpx.AsyncClient() as http:
        pending = asyncio.create_task(http.post(app.url, content=b"x"))
        await app.until_calls(1)
        await asyncio.wait_for(app.stop(), 2)
        with pytest.raises(httpx.HTTPError):
            await pending
