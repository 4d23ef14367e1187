"""Fixtures shared by the test directories that drive a served gateway (``tests/gateway``, ``tests/cli``):
a recording client application, the operator's recording MT endpoint behind the ``http`` reply channel,
and shortcodes of a test's own. Each directory's ``conftest`` imports them and builds its own ``gw``.
(A module of its own: ``conftest`` is a name every test directory has, so importing from one is
ambiguous.)"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from gateway_harness import Codes

from mogateway.testing.recorder import Answer, CallbackRecorder

__all__ = ["app", "codes", "mt"]

_blocks = itertools.count(1)


@pytest.fixture
def codes() -> Codes:
    """Ten shortcodes (and so senders, see the tests) that no other test of the session uses."""
    return Codes(10_000 + 10 * next(_blocks))


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    """The client application: a recording callback server answering "OK" until told otherwise."""
    with CallbackRecorder.in_thread(Answer.text("OK")) as recorder:
        yield recorder


@pytest.fixture(scope="module")
def mt() -> Iterator[CallbackRecorder]:
    """The operator's MT endpoint behind the ``http`` reply channel (answers 200 with a reference)."""
    answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with CallbackRecorder.in_thread(answer, path="/mt") as recorder:
        yield recorder
