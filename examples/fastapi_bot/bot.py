"""A keyword bot on FastAPI: BAL (balance), HELP, STOP (unsubscribe), anything else gets the help text.

    MOGATEWAY_CLIENT_TOKEN=s3cret uvicorn --factory examples.fastapi_bot.bot:create_app --port 9000
    # or: python examples/fastapi_bot/bot.py --port 9000 --token s3cret
    mogateway simulate http://127.0.0.1:9000/sms --token s3cret "BAL"

The accounts are an in-memory stand-in for the bank's system; what matters here is the wiring.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Iterable

import uvicorn
from fastapi import FastAPI

from mogateway.client import InboundMessage, KeywordRouter
from mogateway.client.fastapi import callback_router

HELP_TEXT = "Send BAL for your balance, STOP to unsubscribe, HELP for this text."


class Bank:
    """Balances in paise by msisdn, and who unsubscribed (a real bot would use its own database)."""

    def __init__(self, balances: dict[str, int] | None = None) -> None:
        self.balances = dict(balances or {})
        self.unsubscribed: set[str] = set()


def build_router(bank: Bank) -> KeywordRouter:
    """The bot's keywords; the router is the handler given to the endpoint."""
    router = KeywordRouter(default=lambda _message: HELP_TEXT)

    @router.keyword("BAL", "BALANCE")
    def balance(message: InboundMessage) -> str:
        paise = bank.balances.get(message.msisdn)
        if paise is None:
            return "No account is linked to this number. Send HELP for help."
        return f"Your balance is Rs {paise // 100:,}.{paise % 100:02d}"

    @router.keyword("HELP")
    def help_(_message: InboundMessage) -> str:
        return HELP_TEXT

    @router.keyword("STOP", "UNSUBSCRIBE")
    async def stop(message: InboundMessage) -> str:
        await asyncio.sleep(0)  # where a real bot would await its database
        bank.unsubscribed.add(message.msisdn)
        return "You are unsubscribed and will get no more messages. Send HELP to learn more."

    return router


def create_app(tokens: Iterable[str] | None = None, bank: Bank | None = None) -> FastAPI:
    """The FastAPI app: the callback at POST /sms, a health check at GET /healthz."""
    tokens = list(tokens or [t for t in os.environ.get("MOGATEWAY_CLIENT_TOKEN", "").split(",") if t])
    if not tokens:
        raise SystemExit("set MOGATEWAY_CLIENT_TOKEN (or pass tokens) to the bearer token(s) to accept")
    # Signed callbacks (a client registered with signing): the secret(s), newest first; none to skip.
    secrets = [s for s in os.environ.get("MOGATEWAY_SIGNING_SECRET", "").split(",") if s.strip()] or None
    bank = bank or Bank({"919812345678": 1_234_550})
    app = FastAPI(title="Keyword bot")
    app.include_router(callback_router(build_router(bank), tokens, path="/sms", signing_secrets=secrets))

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="FastAPI keyword bot for mogateway.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--token", action="append", default=[], help="token to accept (repeatable)")
    args = parser.parse_args()
    uvicorn.run(create_app(args.token or None), host=args.host, port=args.port)
