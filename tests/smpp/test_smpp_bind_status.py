"""What a bind's status tells the console: since when it is in its state, its window, and its last error
with the time it happened, kept after the bind recovers."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from test_smpp_esme import RecordingIntake, RecordingJournal, config

from mogateway.edges.smpp.bind import EsmeBind
from mogateway.edges.smpp.inbound import InboundHandler
from mogateway.testing.smsc import SimulatedSmsc


async def _until(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def test_state_since_window_and_last_error_follow_a_reconnect() -> None:
    smsc = await SimulatedSmsc(system_id="gw", password="pw").start()
    port = smsc.port
    cfg = config(port, window=7)
    handler = InboundHandler(cfg, RecordingIntake(), RecordingJournal())
    bind = EsmeBind(cfg, handler, backoff_initial_s=0.05, backoff_max_s=0.2)
    bind.start()
    try:
        assert await bind.wait_bound(5)
        status = bind.status()
        assert status["state"] == "bound" and status["window"] == 7 and status["throughput"] == 1000
        bound_since = status["state_since"]
        assert isinstance(bound_since, float) and bound_since <= time.time()
        assert status["last_failure"] == "" and status["last_error_at"] is None

        before = time.time()
        await smsc.stop()
        await _until(lambda: bind.state != "bound")
        await _until(lambda: bind.status()["last_failure"] != "")
        status = bind.status()
        assert status["state_since"] > bound_since  # type: ignore[operator]
        assert status["last_error_at"] >= before  # type: ignore[operator]

        smsc = await SimulatedSmsc(port=port, system_id="gw", password="pw").start()
        assert await bind.wait_bound(5)
        status = bind.status()
        assert status["last_error"] == ""  # the current error clears once bound again...
        assert status["last_failure"] != "" and status["last_error_at"] is not None  # ...its record stays
    finally:
        await bind.stop()
        await handler.close()
        await smsc.stop()


async def test_an_smsc_outage_is_three_log_lines_however_many_reconnects_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Lost (at once), nothing more while retrying every ~0.1 s within the minute, back (with how long and
    how many attempts failed): one line each, not one per attempt."""
    smsc = await SimulatedSmsc(system_id="gw", password="pw").start()
    port = smsc.port
    cfg = config(port)
    handler = InboundHandler(cfg, RecordingIntake(), RecordingJournal())
    bind = EsmeBind(cfg, handler, backoff_initial_s=0.05, backoff_max_s=0.1)
    caplog.set_level(logging.INFO, logger="mogateway.smpp")
    bind.start()
    try:
        assert await bind.wait_bound(5)
        await smsc.stop()
        await _until(lambda: bind._failed_attempts >= 12)  # a dozen failed reconnects, then it comes back
        smsc = await SimulatedSmsc(port=port, system_id="gw", password="pw").start()
        assert await bind.wait_bound(5)
    finally:
        await bind.stop()
        await handler.close()
        await smsc.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    lost = [m for m in warnings if ": lost: " in m]
    back = [m for m in warnings if ": back after " in m]
    assert len(lost) == 1 and len(back) == 1, warnings
    assert len(warnings) == 2, warnings  # no line per failed attempt
    attempts = int(back[0].split("(")[1].split()[0])
    assert attempts >= 5, back  # it did retry many times, silently
