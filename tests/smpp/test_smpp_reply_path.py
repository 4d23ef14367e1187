"""The reply path when the SMSC misbehaves, over real sockets: replies wait out an outage without holding
callback capacity, a reply cut off between submit_sm and its answer is recorded as possibly sent and
not sent again (unless the operator asks for at-least-once replies), and an SMSC that redelivers after
a SIGKILL creates no second message.

Each test runs ``mogateway serve`` as it runs by default (several workers, at least two) with the bind in
its TOML settings; the bind lives on one worker, and the tests read only public surfaces (the admin API,
/metrics summed over the workers, the simulator's records)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, events, metric, state_from_timeline
from test_smpp_end_to_end import SmscThread, smpp_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

SC = "56767"


def bind_for(smsc: SmscThread) -> dict[str, object]:
    return {
        "name": "airtel-dl",
        "host": "127.0.0.1",
        "port": smsc.smsc.port,
        "system_id": "gw",
        "password": "pw",
        "operator": "airtel",
        "throughput": 1000,
    }


@pytest.fixture
def smsc() -> Iterator[SmscThread]:
    sim = SmscThread()
    yield sim
    sim.close()


def listed(gw: GatewayClient, **params: object) -> list[dict[str, object]]:
    resp = gw.admin("GET", "/v1/messages", params={"limit": 1000, **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["messages"])


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_replies_wait_out_an_smsc_outage_without_holding_callbacks(tmp_path: Path, smsc: SmscThread) -> None:
    count = 20
    with (
        CallbackRecorder.in_thread(Answer.late(0.5, "thanks")) as app,
        smpp_gateway(tmp_path, bind_for(smsc)) as gw,
    ):
        gw.add_client(shortcodes=[SC], callback_url=app.url, max_concurrency=2)
        smsc.run(smsc.smsc.wait_bound(10))
        statuses = [smsc.run(smsc.smsc.inject_mo(f"9198100{n:05d}", SC, f"MO {n}"))[0] for n in range(count)]
        assert statuses == [0] * count  # acknowledged: stored
        port = smsc.smsc.port
        smsc.run(smsc.smsc.stop())  # the SMSC goes away while the callbacks are still running
        outage_began = time.monotonic()

        # Replies wait for a bind: recorded as waiting, counted, state still answered.
        wait_until(lambda: len(listed(gw, state="answered")) == count, 30, "replies waiting")
        waiting = listed(gw, state="answered")[0]
        shown = gw.message(str(waiting["id"]))
        assert events(shown, "reply_waiting") and not events(shown, "reply_failed")
        assert metric(gw.admin("GET", "/metrics").text, "mogateway_replies_waiting") == count

        # Meanwhile the same client's callbacks go on at full speed: waiting replies hold none of its
        # two lanes (over HTTP these replies use the log channel).
        pushed_at = time.monotonic()
        ids = [gw.push(SC, f"HTTP {n}", msisdn=f"9198200{n:05d}")["id"] for n in range(6)]
        for message_id in ids:
            gw.wait_state(message_id, frozenset({"replied"}), timeout=10)
        assert time.monotonic() - pushed_at < 6  # 6 callbacks of 0.5 s over 2 lanes: ~1.5 s

        # The SMSC comes back on the same port after ~6 s: every waiting reply goes out, once.
        time.sleep(max(0.0, 6 - (time.monotonic() - outage_began)))
        smsc.smsc = smsc.run(SimulatedSmsc(port=port, system_id="gw", password="pw").start())
        submits = smsc.run(smsc.smsc.wait_submits(count, timeout=60))
        wait_until(lambda: not listed(gw, state="answered"), 20, "replies still waiting")
        time.sleep(0.5)
        assert len(smsc.smsc.submits) == count
        expected = sorted(f"9198100{n:05d}" for n in range(count))
        assert sorted(s.pdu.destination_addr for s in submits) == expected
        for message in listed(gw, shortcode=SC):
            if str(message["msisdn"]).startswith("9198100"):
                shown = gw.message(str(message["id"]))
                assert shown["state"] in ("replied", "delivered"), shown["state"]
                assert state_from_timeline(shown) == shown["state"]
                assert len(events(shown, "reply_submitted")) == 1


@pytest.mark.parametrize("at_least_once", [False, True])
def test_a_reply_cut_off_before_its_answer_is_possibly_sent_and_not_sent_again(
    tmp_path: Path, smsc: SmscThread, at_least_once: bool
) -> None:
    with (
        CallbackRecorder.in_thread(Answer.text("your balance is 42")) as app,
        smpp_gateway(tmp_path, bind_for(smsc), reply_at_least_once=at_least_once) as gw,
    ):
        gw.add_client(shortcodes=[SC], callback_url=app.url)
        smsc.run(smsc.smsc.wait_bound(10))
        smsc.smsc.drop_after_submit = 1  # take the submit_sm, then close the session without answering
        assert smsc.run(smsc.smsc.inject_mo("919810012345", SC, "BAL")) == [0]
        smsc.run(smsc.smsc.wait_submits(1, timeout=10))
        (message,) = listed(gw)
        message_id = str(message["id"])
        if not at_least_once:
            shown = gw.wait_state(message_id, frozenset({"reply_unknown"}), timeout=15)
            (unknown,) = events(shown, "reply_unknown")
            assert events(shown, "reply_sending") and "possibly sent" in unknown["detail"]
            smsc.smsc._bound.clear()
            smsc.run(smsc.smsc.wait_bound(20))  # the bind is back...
            time.sleep(2)
            assert len(smsc.smsc.submits) == 1  # ...and the reply was not sent a second time
            assert gw.message(message_id)["state"] == "reply_unknown"
        else:
            smsc.run(smsc.smsc.wait_submits(2, timeout=30))  # at-least-once: sent again after the rebind
            shown = gw.wait_state(message_id, frozenset({"replied", "delivered"}), timeout=15)
            assert len(events(shown, "reply_sending")) == 2 and events(shown, "reply_waiting")
            assert state_from_timeline(shown) == shown["state"]


def test_an_mo_redelivered_after_a_sigkill_is_the_same_message(tmp_path: Path, smsc: SmscThread) -> None:
    """No SMSC message id: the content hash is what recognises a redelivery, and the gateway keeps it
    in its journal, so a restart does not forget it."""
    texts = [f"VOTE {n}" for n in range(30)]
    with CallbackRecorder.in_thread(Answer.text("ok")) as app:
        with smpp_gateway(tmp_path, bind_for(smsc), log_name="first") as gw:
            gw.add_client(shortcodes=[SC], callback_url=app.url)
            smsc.run(smsc.smsc.wait_bound(10))
            for text in texts:
                assert smsc.run(smsc.smsc.inject_mo("919810012345", SC, text)) == [0]
            app.wait_for_calls(len(texts), timeout=20)
            finished = frozenset({"replied", "delivered"})
            wait_until(lambda: all(m["state"] in finished for m in listed(gw)), 20, "replies recorded")
            # SIGKILL, every worker at once; nothing in flight: any callback after the restart would be
            # a second message.
            gw.process.kill()
        smsc.smsc._bound.clear()
        with smpp_gateway(tmp_path, bind_for(smsc), log_name="second") as gw:
            smsc.run(smsc.smsc.wait_bound(20))
            # The SMSC never saw our answers (as far as it knows): it delivers everything again.
            for text in texts:
                assert smsc.run(smsc.smsc.inject_mo("919810012345", SC, text)) == [0]
            time.sleep(1.0)
            assert len(app.calls) == len(texts)  # no callback for a redelivery
            assert len(listed(gw, shortcode=SC)) == len(texts)  # no second journal row
            (bind,) = gw.admin("GET", "/v1/binds").json()["binds"]  # whichever worker holds it
            assert bind["counters"]["mo_duplicates"] == len(texts)
    assert len({c.headers["x-mogateway-message-id"] for c in app.calls}) == len(texts)


def test_an_outage_longer_than_the_validity_fails_the_reply_and_says_why(
    tmp_path: Path, smsc: SmscThread
) -> None:
    with (
        CallbackRecorder.in_thread(Answer.late(0.3, "thanks")) as app,
        smpp_gateway(tmp_path, bind_for(smsc), reply_validity_s=2) as gw,
    ):
        gw.add_client(shortcodes=[SC], callback_url=app.url)
        smsc.run(smsc.smsc.wait_bound(10))
        assert smsc.run(smsc.smsc.inject_mo("919810012345", SC, "BAL")) == [0]
        smsc.run(smsc.smsc.stop())
        (message,) = listed(gw)
        shown = gw.wait_state(str(message["id"]), frozenset({"reply_failed"}), timeout=15)
        (failed,) = events(shown, "reply_failed")
        assert failed["detail"].startswith("expired after 2 s waiting")
        metrics = gw.admin("GET", "/metrics").text  # summed over the workers
        assert metric(metrics, "mogateway_replies_total", channel="smpp", result="expired") == 1
