"""The FastAPI dependency: a route of the user's own, the same statuses as the ready router."""

from __future__ import annotations

import httpx
import orjson
from client_servers import TOKEN
from fastapi import Depends, FastAPI, Response

from mogateway.client import InboundMessage
from mogateway.client.fastapi import install_problem_responses, message_dependency, reply_response
from mogateway.testing.callback_apps import serve_asgi
from mogateway.testing.payloads import make_callback


def build_app() -> FastAPI:
    app = FastAPI()
    install_problem_responses(app)
    verified = message_dependency([TOKEN], max_body_bytes=2048)

    @app.post("/sms")
    async def sms(message: InboundMessage = Depends(verified)) -> Response:
        return reply_response(None if message.keyword == "QUIET" else f"{message.sender.sn_digits} said hi")

    return app


def test_dependency_route_statuses() -> None:
    with serve_asgi(build_app()) as base:
        url = base + "/sms"
        ok = httpx.post(
            url,
            content=make_callback("hi", msisdn="919812012345", token=TOKEN)[0],
            headers=make_callback(token=TOKEN)[1],
        )
        assert (ok.status_code, ok.text) == (200, "012345 said hi")
        assert ok.headers["content-type"] == "text/plain; charset=utf-8"

        quiet = httpx.post(
            url, content=make_callback("quiet", token=TOKEN)[0], headers=make_callback(token=TOKEN)[1]
        )
        assert (quiet.status_code, quiet.content) == (200, b"")

        body, headers = make_callback("hi", token="wrong")
        refused = httpx.post(url, content=body, headers=headers)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["www-authenticate"] == "Bearer"

        body, headers = make_callback("hi", token=TOKEN)
        bad = httpx.post(url, content=body.replace(b'"cc":91', b'"cc":1'), headers=headers)
        assert bad.status_code == 422
        assert orjson.loads(bad.content)["field"] == "sender.cc"

        big = httpx.post(url, content=make_callback("x" * 4000, token=TOKEN)[0], headers=headers)
        assert big.status_code == 413
