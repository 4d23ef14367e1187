"""Fixtures of the CLI tests: a real gateway on loopback whose replies go to a recording MT endpoint, and a
recording callback application.

``gw`` is ``mogateway serve`` with its default number of workers (at least two, see
``gateway_harness.serve_gateway``), shared by the tests of one module: each test registers its clients on
shortcodes of its own (``codes``) and looks only at its own messages, so the tests do not interfere."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from gateway_harness import Codes, ServeGateway, serve_gateway
from gateway_harness import app as app  # the fixtures app and mt, shared with the other directory
from gateway_harness import mt as mt

from mogateway.testing.recorder import CallbackRecorder

_blocks = itertools.count(1)


@pytest.fixture
def codes() -> Codes:
    """Ten shortcodes (and so senders, see the tests) that no other test of the module uses."""
    return Codes(20_000 + 10 * next(_blocks))


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, mt: CallbackRecorder) -> Iterator[ServeGateway]:
    workdir: Path = tmp_path_factory.mktemp("cli")
    with serve_gateway(workdir, reply_channel="http", reply_http_url=mt.url) as gateway:
        yield gateway
