"""Fixtures of the client tests."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
from client_servers import ADAPTERS, Serve, serve_handler

from mogateway.client import Handler


@pytest.fixture(params=ADAPTERS)
def serve(request: pytest.FixtureRequest) -> Serve:
    """``with serve(handler, budget_s=...) as url:`` runs ``handler`` behind one adapter per test run."""
    kind: str = request.param

    def start(handler: Handler, **options: Any) -> AbstractContextManager[str]:
        return serve_handler(kind, handler, **options)

    return start
