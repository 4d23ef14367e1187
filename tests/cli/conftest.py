"""Fixtures of the CLI tests: a real gateway on loopback whose replies go to a recording MT endpoint, and a
recording callback application.

``gw`` is ``mogateway serve`` with its default number of workers (at least two, see
``gateway_harness.serve_gateway``), shared by the tests of one module: each test registers its clients on
shortcodes of its own (``codes``) and looks only at its own messages, so the tests do not interfere."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from gateway_fixtures import app, codes, mt
from gateway_harness import ServeGateway, serve_gateway

from mogateway.testing.recorder import CallbackRecorder


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, mt: CallbackRecorder) -> Iterator[ServeGateway]:
    workdir: Path = tmp_path_factory.mktemp("cli")
    with serve_gateway(workdir, reply_channel="http", reply_http_url=mt.url) as gateway:
        yield gateway


__all__ = ["app", "codes", "gw", "mt"]  # the shared fixtures are this directory's too
