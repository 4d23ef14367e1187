"""Fixtures of the gateway tests: a real gateway on loopback and real callback/MT applications.

``gw`` is an in-process gateway whose reply channel is ``http`` pointing at the ``mt`` recorder, so a test
can see exactly what was handed to the reply channel (and that nothing else ever is).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import InProcessGateway, in_process_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    """The client application: a recording callback server answering "OK" until told otherwise."""
    with CallbackRecorder.in_thread(Answer.text("OK")) as recorder:
        yield recorder


@pytest.fixture
def mt() -> Iterator[CallbackRecorder]:
    """The operator's MT endpoint behind the ``http`` reply channel (answers 200 with a reference)."""
    answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with CallbackRecorder.in_thread(answer, path="/mt") as recorder:
        yield recorder


@pytest.fixture
def gw(tmp_path: Path, mt: CallbackRecorder) -> Iterator[InProcessGateway]:
    with in_process_gateway(
        tmp_path / "journal.db", reply_channel="http", reply_http_url=mt.url, reply_max_parts=3
    ) as gateway:
        yield gateway
