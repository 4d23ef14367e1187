"""Shared by the client tests: the tokens, and a handler served through each adapter on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from fastapi import FastAPI
from flask import Flask

from mogateway.client import CallbackApp, Handler
from mogateway.client.fastapi import callback_router
from mogateway.client.flask import callback_blueprint
from mogateway.testing.callback_apps import serve_asgi, serve_wsgi

TOKEN = "current-token"
OLD_TOKEN = "previous-token"

ADAPTERS = ("asgi", "fastapi", "flask")

Serve = Callable[..., AbstractContextManager[str]]


@contextmanager
def serve_handler(
    kind: str, handler: Handler, tokens: Sequence[str] = (TOKEN, OLD_TOKEN), **options: Any
) -> Iterator[str]:
    """Serve ``handler`` behind adapter ``kind`` (asgi, fastapi, flask); yields the callback URL."""
    if kind == "asgi":
        with serve_asgi(CallbackApp(handler, tokens, **options)) as base:
            yield base + "/sms"
    elif kind == "fastapi":
        app = FastAPI()
        app.include_router(callback_router(handler, tokens, path="/sms", **options))
        with serve_asgi(app) as base:
            yield base + "/sms"
    else:
        flask_app = Flask("test")
        flask_app.register_blueprint(callback_blueprint(handler, tokens, path="/sms", **options))
        with serve_wsgi(flask_app) as base:
            yield base + "/sms"
