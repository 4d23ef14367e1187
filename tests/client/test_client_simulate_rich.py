"""``mogateway simulate`` says whether a JSON answer would become a rich WhatsApp reply, and why not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from test_client_simulate import TOKEN, run, run_json

from mogateway.client import CallbackApp, InboundMessage, WhatsAppAnswer
from mogateway.testing.callback_apps import serve_asgi

RICH = WhatsAppAnswer.buttons("Pay now?", [("pay", "Pay")]) + WhatsAppAnswer.image(
    link="https://x.in/bill.png"
)


def rich(message: InboundMessage) -> WhatsAppAnswer:
    return RICH


class JsonApp:
    """An ASGI app that answers every request 200 ``application/json`` with ``body``."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


def test_a_json_answer_to_whatsapp_is_a_rich_reply_of_its_messages() -> None:
    with serve_asgi(CallbackApp(rich, TOKEN)) as url:
        code, doc = run_json(url, "--token", TOKEN, "--whatsapp", "BILL")
        text_code, output = run(url, "--token", TOKEN, "--whatsapp", "BILL")
    assert code == 0 and text_code == 0, (doc, output)
    assert doc["outcome"] == "reply"
    assert doc["whatsapp"]["rich"] == ["interactive button", "image"]
    assert doc["whatsapp"]["sent"] == list(RICH.messages)
    assert "WhatsApp: a rich reply, 2 messages in order: interactive button, image" in output


def test_an_invalid_json_answer_says_which_rule_it_breaks() -> None:
    body = b'{"whatsapp": {"type": "image", "image": {"caption": "no media"}}}'
    with serve_asgi(JsonApp(body)) as url:
        code, output = run(url, "--token", TOKEN, "--whatsapp", "BILL")
    assert code != 0
    assert "no reply (bad_response): rich answer: whatsapp.image: needs exactly one of id" in output


def test_on_sms_a_json_answer_is_a_bad_response_with_a_hint() -> None:
    with serve_asgi(JsonApp(RICH.body())) as url:
        code, output = run(url, "--token", TOKEN, "BILL")
    assert code != 0
    assert "no reply (bad_response): content type 'application/json'" in output
    assert "rich reply on WhatsApp only (try --whatsapp)" in output
