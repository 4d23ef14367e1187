"""When the journal cannot store, nothing is acknowledged: the source gets 503 and sends again."""

from __future__ import annotations

from pathlib import Path

from gateway_harness import in_process_gateway, serve_gateway


def test_a_push_the_journal_cannot_store_is_refused_with_503_and_kept_nowhere(tmp_path: Path) -> None:
    """In-process on purpose: the test takes the journal's writer away inside the process (no outside
    act makes a running SQLite journal refuse writes at once and then take them again), so it is about
    one process's ingest API and journal, which every worker runs the same."""
    with in_process_gateway(tmp_path / "journal.db") as gw:
        assert (
            gw.ingest(
                "POST",
                "/v1/inbound",
                json={"shortcode": "56767", "msisdn": "919812345678", "message": "FIRST"},
            ).status_code
            == 202
        )
        writer = gw.gateway.journal._writer  # type: ignore[attr-defined]
        gw.gateway.journal._writer = None  # type: ignore[attr-defined]  # the journal stops storing
        try:
            single = gw.ingest(
                "POST",
                "/v1/inbound",
                json={"shortcode": "56767", "msisdn": "919812345678", "message": "LOST?", "id": "src-1"},
            )
            batch = gw.ingest(
                "POST",
                "/v1/inbound/batch",
                json=[{"shortcode": "56767", "msisdn": "919812345678", "message": "B"}],
            )
        finally:
            gw.gateway.journal._writer = writer  # type: ignore[attr-defined]
        for response in (single, batch):
            assert response.status_code == 503
            assert response.headers["content-type"] == "application/problem+json"
            assert "send it again" in response.json()["detail"]
        # the source sends it again once the journal is back: stored once, as a new message
        again = gw.ingest(
            "POST",
            "/v1/inbound",
            json={"shortcode": "56767", "msisdn": "919812345678", "message": "LOST?", "id": "src-1"},
        )
        assert again.status_code == 202 and again.json()["duplicate"] is False


def test_stopping_lets_a_callback_in_flight_finish_and_keeps_the_rest_for_the_next_start(
    tmp_path: Path,
) -> None:
    import sqlite3

    from mogateway.testing.recorder import Answer, CallbackRecorder

    db = tmp_path / "journal.db"
    with CallbackRecorder.in_thread(Answer.text("late but fine", delay_s=0.6)) as app:
        with serve_gateway(tmp_path, log_name="first") as gw:
            # cap 1: one worker dispatches the client, with ONE in flight and TWO waiting in its lane
            gw.add_client(shortcodes=["56767"], callback_url=app.url, max_concurrency=1)
            first = gw.push("56767", "ONE")["id"]
            second = gw.push("56767", "TWO")["id"]
            app.wait_for_calls(1)
        # the gateway stopped (SIGTERM) while ONE was in flight and TWO waited in its lane
        conn = sqlite3.connect(db)
        states = dict(conn.execute("SELECT id, state FROM message_states").fetchall())
        conn.close()
        assert states[first] == "replied"  # drained, not cut off
        assert states[second] == "queued"  # not started: kept for the next start
        with serve_gateway(tmp_path, log_name="second") as gw:
            assert gw.wait_state(second, frozenset({"replied"}))["reply"] == "late but fine"
