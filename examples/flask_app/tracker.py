"""An order tracker on Flask (WSGI): "TRACK <order id>" answers the order's status.

    python examples/flask_app/tracker.py --port 9000 --token s3cret
    mogateway simulate http://127.0.0.1:9000/sms --token s3cret "TRACK A1001"

Any other message gets the usage text. The orders are an in-memory stand-in for a real shop.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

from flask import Flask

from mogateway.client import InboundMessage, KeywordRouter
from mogateway.client.flask import callback_blueprint

USAGE = "Send TRACK followed by your order number, e.g. TRACK A1001"

ORDERS = {"A1001": "shipped, arriving tomorrow", "A1002": "being packed"}


def track(message: InboundMessage) -> str:
    """Status of the order named after TRACK."""
    order = message.argument.upper()
    if not order:
        return USAGE
    status = ORDERS.get(order)
    return f"Order {order}: {status}" if status else f"No order {order} found. {USAGE}"


def create_app(tokens: Iterable[str] | None = None) -> Flask:
    """The Flask app with the callback at POST /sms."""
    tokens = list(tokens or [t for t in os.environ.get("MOGATEWAY_CLIENT_TOKEN", "").split(",") if t])
    if not tokens:
        raise SystemExit("set MOGATEWAY_CLIENT_TOKEN (or pass tokens) to the bearer token(s) to accept")
    # Signed callbacks (a client registered with signing): the secret(s), newest first; none to skip.
    secrets = [s for s in os.environ.get("MOGATEWAY_SIGNING_SECRET", "").split(",") if s.strip()] or None
    router = KeywordRouter(default=lambda _message: USAGE)
    router.add("TRACK", track)
    app = Flask(__name__)
    app.register_blueprint(callback_blueprint(router, tokens, path="/sms", signing_secrets=secrets))
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Flask order tracker for mogateway.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--token", action="append", default=[], help="token to accept (repeatable)")
    args = parser.parse_args()
    # Flask's development server; in production run create_app under gunicorn or waitress.
    create_app(args.token or None).run(host=args.host, port=args.port, threaded=True)
