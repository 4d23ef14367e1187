"""The webhook's POST is answered without FastAPI's layers (``api.whatsapp.WebhookFastPath``) with the
answers FastAPI's handlers give: problem documents for expected failures, a 500 problem (no traceback
in the answer) for an unexpected one; every other request goes to the application."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
from fastapi import FastAPI

from mogateway.api.whatsapp import WEBHOOK_PATH, WebhookFastPath


class _Broken:
    @property
    def settings(self) -> Any:
        raise RuntimeError("secret detail that must not leak")


def _client(gateway: Any) -> httpx.AsyncClient:
    app = FastAPI()
    app.state.gateway = gateway

    @app.get(WEBHOOK_PATH)
    async def handshake() -> dict[str, str]:
        return {"via": "fastapi"}

    transport = httpx.ASGITransport(app=WebhookFastPath(app, app))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")


async def test_without_whatsapp_settings_the_post_is_a_404_problem_and_get_goes_to_the_app() -> None:
    async with _client(SimpleNamespace(settings=SimpleNamespace(whatsapp=None))) as client:
        answer = await client.post(WEBHOOK_PATH, content=b"{}")
        handshake = await client.get(WEBHOOK_PATH)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["status"] == 404
    assert handshake.json() == {"via": "fastapi"}


async def test_an_unexpected_error_is_a_500_problem_without_its_detail() -> None:
    async with _client(_Broken()) as client:
        answer = await client.post(WEBHOOK_PATH, content=b"{}")
    assert answer.status_code == 500 and answer.json()["status"] == 500
    assert "secret detail" not in answer.text
