"""The whole loop over real sockets: SMSC simulator → gateway (SMPP bind) → callback app → reply
submit_sm on the same bind → delivery receipt → the message's timeline says delivered.

The gateway is ``mogateway serve`` as it runs by default (several workers, at least two) with its SMPP
bind in the TOML settings: the bind lives on one of the workers, and the tests look only at public
surfaces (the admin API's messages and binds, /metrics, the simulator's records), never at which
worker holds it. The simulator runs on an event loop of its own in a thread of the test process, so a
test can drive it (inject MOs, drop a session) and read what it received."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ServeGateway, metric, serve_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

T = TypeVar("T")


class SmscThread:
    """The simulator on an event loop of its own (the gateway runs on another)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.smsc = self.run(SimulatedSmsc(system_id="gw", password="pw").start())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.run(self.smsc.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@contextmanager
def smpp_gateway(workdir: Path, *binds: dict[str, Any], **settings: Any) -> Iterator[ServeGateway]:
    """``mogateway serve`` (default workers) in ``workdir`` with these SMPP binds in its TOML settings."""
    with serve_gateway(workdir, smpp={"binds": list(binds)}, **settings) as gateway:
        yield gateway


@pytest.fixture
def smsc() -> Iterator[SmscThread]:
    sim = SmscThread()
    yield sim
    sim.close()


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("Balance: ₹42 {ok}")) as recorder:
        yield recorder


@pytest.fixture
def gw(tmp_path: Path, smsc: SmscThread) -> Iterator[ServeGateway]:
    bind = {
        "name": "airtel-dl",
        "host": "127.0.0.1",
        "port": smsc.smsc.port,
        "system_id": "gw",
        "password": "pw",
        "operator": "airtel",
        "circle": "delhi",
        "reply_tlvs": {"0x1400": "1101234567890123456", "0x1401": "1107123456789012345"},
    }
    with smpp_gateway(tmp_path, bind) as gateway:
        yield gateway


def test_mo_to_reply_to_receipt(gw: ServeGateway, smsc: SmscThread, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=["56767"], callback_url=app.url)
    smsc.run(smsc.smsc.wait_bound(10))
    statuses = smsc.run(smsc.smsc.inject_mo("919810012345", "56767", "BAL please"))
    assert statuses == [0]  # answered only after the MO was stored

    (call,) = app.wait_for_calls(1, timeout=10)
    body = call.json()
    assert (body["shortcode"], body["msisdn"], body["message"]) == (56767, 919810012345, "BAL please")
    assert body["sender"]["operator"] == "airtel" and body["sender"]["circle"] == "delhi"

    (submit,) = smsc.run(smsc.smsc.wait_submits(1, timeout=10))
    assert submit.pdu.source_addr == "56767" and submit.pdu.destination_addr == "919810012345"
    assert submit.pdu.data_coding == 8  # ₹ is not GSM-7
    assert submit.pdu.short_message.decode("utf-16-be") == "Balance: ₹42 {ok}"
    assert [(t.tag, t.value) for t in submit.pdu.tlvs] == [
        (0x1400, b"1101234567890123456"),
        (0x1401, b"1107123456789012345"),
    ]

    resp = gw.admin("GET", "/v1/messages", params={"limit": 5})
    assert resp.status_code == 200, resp.text
    (listed,) = resp.json()["messages"]  # one MO, stored once
    message_id = listed["id"]
    message = gw.wait_state(message_id, frozenset({"delivered"}), timeout=10)
    kinds = [ev["event"] for ev in message["timeline"]]
    assert "reply_submitted" in kinds and "delivery" in kinds

    binds = gw.admin("GET", "/v1/binds").json()["binds"]  # every worker's, whichever holds the bind
    (bind,) = binds
    assert bind["name"] == "airtel-dl" and bind["state"] == "bound"
    assert bind["counters"]["mo_stored"] == 1 and bind["counters"]["receipts"] == 1
    assert "pw" not in str(binds)
    metrics = gw.admin("GET", "/metrics").text  # summed over the workers
    assert metric(metrics, "mogateway_smpp_bind_up", bind="airtel-dl") == 1
    assert metric(metrics, "mogateway_smpp_mo_stored_total", bind="airtel-dl") == 1


def test_redelivered_mo_reaches_the_app_once(
    gw: ServeGateway, smsc: SmscThread, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=["56767"], callback_url=app.url)
    smsc.run(smsc.smsc.wait_bound(10))
    assert smsc.run(smsc.smsc.inject_mo("919810012345", "56767", "once", repeat=3)) == [0, 0, 0]
    app.wait_for_calls(1, timeout=10)
    smsc.run(smsc.smsc.wait_submits(1, timeout=10))
    assert len(app.calls) == 1
