"""Recovery at start, at the sizes that broke it: a backlog many times the recovery page, left behind
by a SIGKILL or a plain SIGTERM (a deploy), is dispatched in full after one restart; answered MOs whose
reply was never handed over get it once.

Recovery used to page by last change and stop after the first page, so a backlog of 3,000 needed three
restarts and a larger one was never finished (issue: "Accepted MOs stranded after a restart").
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

import pytest
from gateway_harness import (
    GatewayClient,
    serve_env,
    start_serve,
)

from mogateway.core.message import Message, Sender, id_for_source
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.testing.recorder import Answer, CallbackRecorder

SC = "56767"
#: Larger than the recovery page (1,000) ten times over, and than any batch size in the code.
BACKLOG = 10_500
UNFINISHED = ("queued", "answered", "replying")

pytestmark = pytest.mark.slow


def _env(tmp_path: Path) -> dict[str, str]:
    return serve_env(tmp_path)


def _unfinished(gw: GatewayClient) -> int:
    return sum(
        len(gw.admin("GET", "/v1/messages", params={"state": s, "limit": 1000}).json()["messages"])
        for s in UNFINISHED
    )


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_backlog_ten_pages_long_is_dispatched_in_full_after_one_restart(tmp_path: Path, how: str) -> None:
    env = _env(tmp_path)
    items = [
        {"shortcode": SC, "msisdn": "919810012345", "message": f"MO {i}", "id": f"src-{i}"}
        for i in range(BACKLOG)
    ]
    accepted: dict[str, str] = {}
    # The application holds every call: 64 in flight, everything else waits in the gateway.
    with CallbackRecorder.in_thread(Answer.late(120, "held")) as app:
        first = start_serve(tmp_path, env, log_name="first")
        gw = GatewayClient(first.url)
        try:
            gw.add_client(shortcodes=[SC], callback_url=app.url, max_concurrency=64)
            for start in range(0, BACKLOG, 500):
                chunk = items[start : start + 500]
                resp = gw.ingest("POST", "/v1/inbound/batch", json=chunk)
                assert resp.status_code == 200, resp.text
                for item, result in zip(chunk, resp.json()["results"], strict=True):
                    assert result["state"] == "queued"
                    accepted[item["id"]] = result["id"]
            app.wait_for_calls(64, timeout=30)
        finally:
            gw.close()
            if how == "SIGKILL":
                first.kill()
            else:
                first.stop()
        assert len(accepted) == BACKLOG

        app.answer = Answer.text("ok")
        second = start_serve(tmp_path, env, log_name="second")
        gw = GatewayClient(second.url)
        try:
            deadline = time.monotonic() + 120
            while len({c.headers["x-mogateway-message-id"] for c in app.calls}) < BACKLOG:
                assert time.monotonic() < deadline, f"{len(app.calls)} calls of {BACKLOG}"
                time.sleep(0.2)
            while _unfinished(gw):
                assert time.monotonic() < deadline
                time.sleep(0.2)
        finally:
            gw.close()
            second.stop()

    ids_by_source: dict[str, set[str]] = collections.defaultdict(set)
    for call in app.calls:
        ids_by_source["src-" + call.json()["message"].split()[1]].add(call.headers["x-mogateway-message-id"])
    assert set(ids_by_source) == set(accepted)  # every accepted MO reached the application...
    assert all(ids_by_source[s] == {i} for s, i in accepted.items())  # ...under its one id


def test_answered_messages_get_their_reply_once_after_a_restart(tmp_path: Path) -> None:
    """MOs whose answer was recorded but whose reply was never handed over (a crash in between): more
    of them than one recovery page. After a restart each has exactly one reply_submitted."""
    count = 2_300
    path = tmp_path / "journal.db"

    async def prepare() -> list[str]:
        journal = SqliteJournal(path)
        await journal.open()
        try:
            now = time.time()
            news = [
                Message(
                    id=id_for_source(f"http:a{i}"),
                    source_id=f"a{i}",
                    shortcode=SC,
                    msisdn="919810012345",
                    text=f"MO {i}",
                    received_at=now,
                    sender=Sender(91, 9810, 12345),
                )
                for i in range(count)
            ]
            await journal.store(news)
            outcome = {"outcome": "reply", "reply": "thanks", "parts": 1}
            await journal.apply(
                [Change(m.id, Event(EventKind.OUTCOME, now, outcome), reply_text="thanks") for m in news]
            )
            return [m.id for m in news]
        finally:
            await journal.close()

    ids = asyncio.run(prepare())
    serve = start_serve(tmp_path, _env(tmp_path))
    gw = GatewayClient(serve.url)
    try:
        deadline = time.monotonic() + 60
        while _unfinished(gw):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        replies = collections.Counter()
        for message_id in ids:
            shown = gw.admin("GET", f"/v1/messages/{message_id}").json()
            assert shown["state"] == "replied", shown
            replies[message_id] = sum(1 for e in shown["timeline"] if e["event"] == "reply_submitted")
        assert set(replies.values()) == {1}
    finally:
        gw.close()
        serve.stop()
