"""Fixtures of the CLI tests: a real gateway on loopback whose replies go to a recording MT endpoint, and a
recording callback application."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from gateway_harness import InProcessGateway, in_process_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("OK")) as recorder:
        yield recorder


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[InProcessGateway]:
    answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with (
        CallbackRecorder.in_thread(answer, path="/mt") as mt,
        in_process_gateway(tmp_path / "journal.db", reply_channel="http", reply_http_url=mt.url) as gateway,
    ):
        yield gateway
