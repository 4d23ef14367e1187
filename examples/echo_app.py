"""Quickstart: the smallest callback application. It answers every SMS with "You said: <message>".

    python examples/echo_app.py --port 9000 --token s3cret        # or MOGATEWAY_CLIENT_TOKEN=s3cret
    mogateway simulate http://127.0.0.1:9000/ --token s3cret "HELLO"

Several tokens (comma-separated, or --token repeated) are accepted at once, for rotation. For a client
registered with signing, set MOGATEWAY_SIGNING_SECRET (comma-separated during a rotation): callbacks
without a valid x-mogateway-signature are then refused with 401.
"""

from __future__ import annotations

import argparse
import os

import uvicorn

from mogateway.client import CallbackApp, InboundMessage


def echo(message: InboundMessage) -> str:
    """The whole application: one handler, one reply."""
    return f"You said: {message.message}"


def build_app(
    tokens: list[str], budget_s: float = 25.0, signing_secrets: list[str] | None = None
) -> CallbackApp:
    """The ASGI application (``uvicorn`` can also import it through a factory)."""
    return CallbackApp(echo, tokens, budget_s=budget_s, signing_secrets=signing_secrets or None)


def _tokens(values: list[str]) -> list[str]:
    return [t.strip() for value in values for t in value.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    parser = argparse.ArgumentParser(description="Echo callback application for mogateway.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9000, help="port to listen on (default 9000)")
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        help="bearer token to accept (repeatable; default: env MOGATEWAY_CLIENT_TOKEN, comma-separated)",
    )
    parser.add_argument("--budget", type=float, default=25.0, help="seconds before answering no reply")
    args = parser.parse_args(argv)
    tokens = _tokens(args.token or [os.environ.get("MOGATEWAY_CLIENT_TOKEN", "")])
    if not tokens:
        parser.error("give --token or set MOGATEWAY_CLIENT_TOKEN")
    # A secret is read from the environment, not the command line (which every user can see in ps).
    secrets = _tokens([os.environ.get("MOGATEWAY_SIGNING_SECRET", "")])
    uvicorn.run(build_app(tokens, args.budget, secrets), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
