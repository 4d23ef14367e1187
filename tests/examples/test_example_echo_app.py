"""The quickstart's echo app, run exactly as the docs say (a subprocess), checked with simulate."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from mogateway.core.contract import OutcomeKind
from mogateway.simulation import SimulatedMO, simulate_many

pytestmark = pytest.mark.slow

ECHO_APP = Path(__file__).resolve().parents[2] / "examples" / "echo_app.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_echo_app(**env: str) -> Iterator[str]:
    """examples/echo_app.py in a subprocess with ``env`` added; yields its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(ECHO_APP), "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, "echo_app exited"
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "echo_app did not start"
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def echo_url() -> Iterator[str]:
    with running_echo_app(MOGATEWAY_CLIENT_TOKEN="old-token,new-token") as url:
        yield url


async def test_echo_app_replies_to_both_rotated_tokens(echo_url: str) -> None:
    for token in ("old-token", "new-token"):
        run = await simulate_many(
            echo_url, SimulatedMO("HELLO", token), repeat=3, concurrency=3, deadline_s=10
        )
        assert [x.outcome.reply for x in run.exchanges] == ["You said: HELLO"] * 3
    refused = await simulate_many(
        echo_url, SimulatedMO("HELLO", "stale"), repeat=1, concurrency=1, deadline_s=10
    )
    assert refused.exchanges[0].outcome.kind is OutcomeKind.HTTP_ERROR
    assert refused.exchanges[0].outcome.status == 401


def test_echo_app_refuses_to_start_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MOGATEWAY_CLIENT_TOKEN"}
    result = subprocess.run(
        [sys.executable, str(ECHO_APP), "--port", "1"], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "give --token or set MOGATEWAY_CLIENT_TOKEN" in result.stderr


async def test_echo_app_with_a_signing_secret_refuses_unsigned_callbacks() -> None:
    secret = "echo-signing-secret-0123456789-abcdefghij"
    with running_echo_app(
        MOGATEWAY_CLIENT_TOKEN="tok", MOGATEWAY_SIGNING_SECRET=f"newer-secret,{secret}"
    ) as url:
        signed = await simulate_many(
            url,
            SimulatedMO("HELLO", "tok", signing_secrets=(secret,)),
            repeat=1,
            concurrency=1,
            deadline_s=10,
        )
        assert signed.exchanges[0].outcome.reply == "You said: HELLO"
        unsigned = await simulate_many(
            url, SimulatedMO("HELLO", "tok"), repeat=1, concurrency=1, deadline_s=10
        )
        assert unsigned.exchanges[0].outcome.status == 401
