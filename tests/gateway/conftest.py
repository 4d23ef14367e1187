"""Fixtures of the gateway tests: a real gateway on loopback and real callback/MT applications.

``gw`` is ``mogateway serve`` with its default number of workers (at least two, see
``gateway_harness.serve_gateway``), shared by the tests of one module: each test registers its clients
on shortcodes of its own (``codes``) and looks only at its own messages, so the tests do not interfere.
Its reply channel is ``http`` pointing at the ``mt`` recorder, so a test can see exactly what was
handed to the reply channel about its messages (and that nothing else ever is): ``calls_for(mt, id)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import Codes, ServeGateway, serve_gateway
from gateway_harness import app as app  # the fixtures app and mt, shared with the other directory
from gateway_harness import mt as mt

from mogateway.testing.recorder import CallbackRecorder

_blocks = itertools.count(1)


@pytest.fixture
def codes() -> Codes:
    return Codes(10_000 + 10 * next(_blocks))


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, mt: CallbackRecorder) -> Iterator[ServeGateway]:
    workdir: Path = tmp_path_factory.mktemp("gw")
    with serve_gateway(workdir, reply_channel="http", reply_http_url=mt.url, reply_max_parts=3) as gateway:
        yield gateway
