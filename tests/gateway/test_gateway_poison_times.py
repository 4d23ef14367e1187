"""Times a source may claim, and times no stored row may use to break the admin API.

Intake refuses a ``received_at`` before 2000-01-01T00:00:00Z or more than a day ahead (422, field
``received_at``; in a batch only that item). Rows an older version stored with such a time still list and
show: the API's time formatting is total.

On ``mogateway serve`` with several workers: the module's tests share one, each on a shortcode of its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from gateway_harness import ADMIN_TOKEN, Codes, ServeGateway, serve_gateway
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.testing.recorder import CallbackRecorder

SC = "56767"
POISON = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999+00:00"]


def mo(shortcode: str = SC, **extra: Any) -> dict[str, Any]:
    return {"shortcode": shortcode, "msisdn": "919810012345", "message": "HELLO", **extra}


def iso_z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def assert_listings_work(gw: ServeGateway, shortcode: str = SC) -> list[dict[str, Any]]:
    """Every listing answers; returns the messages to ``shortcode`` (each shown on its own)."""
    for query in ("", "?state=rejected", "?state=failed", f"?shortcode={shortcode}", "?msisdn=919810012345",
                  "?since=1970-01-01T00:00:00Z", "?limit=1000"):  # fmt: skip
        resp = gw.admin("GET", "/v1/messages" + query)
        assert resp.status_code == 200, (query, resp.text)
    query = f"/v1/messages?limit=1000&shortcode={shortcode}"
    listed: list[dict[str, Any]] = gw.admin("GET", query).json()["messages"]
    for message in listed:
        assert gw.admin("GET", f"/v1/messages/{message['id']}").status_code == 200
    return listed


@pytest.mark.parametrize("when", POISON)
def test_a_poison_time_is_refused_with_422_and_the_rejection_recorded(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, when: str
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    resp = gw.ingest("POST", "/v1/inbound", json=mo(codes[0], received_at=when))
    assert resp.status_code == 422, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    problem = resp.json()
    assert (problem["field"], problem["state"]) == ("received_at", "rejected")
    assert "2000-01-01" in problem["reason"]
    shown = gw.message(problem["id"])
    assert shown["state"] == "rejected" and shown["rejection"]["field"] == "received_at"
    assert shown["received_at"].startswith(str(datetime.now(UTC).year))  # kept at the arrival time
    assert [m["id"] for m in assert_listings_work(gw, codes[0])] == [problem["id"]]
    assert app.calls == []


def test_the_bounds(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    now = datetime.now(UTC)
    accepted = ["2000-01-01T00:00:00Z", iso_z(now + timedelta(hours=23)), iso_z(now - timedelta(days=3650))]
    refused = ["1999-12-31T23:59:59.999Z", iso_z(now + timedelta(hours=25)), "1970-01-01T00:00:00Z"]
    for when in accepted:
        resp = gw.ingest("POST", "/v1/inbound", json=mo(codes[0], received_at=when))
        assert resp.status_code == 202, (when, resp.text)
        assert gw.wait_state(resp.json()["id"])["state"] == "replied"
    for when in refused:
        resp = gw.ingest("POST", "/v1/inbound", json=mo(codes[0], received_at=when))
        assert resp.status_code == 422 and resp.json()["field"] == "received_at", (when, resp.text)


def test_in_a_batch_only_the_poisoned_items_are_rejected(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    sc = codes[0]
    items = [
        mo(sc, id=f"{sc}-a"),
        mo(sc, id=f"{sc}-b", received_at=POISON[0]),
        mo(sc, id=f"{sc}-c"),
        mo(sc, id=f"{sc}-d", received_at=POISON[1]),
    ]
    resp = gw.ingest("POST", "/v1/inbound/batch", json=items)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["accepted"], body["rejected"]) == (2, 2)
    states = [(r["state"], r.get("field")) for r in body["results"]]
    assert states == [
        ("queued", None),
        ("rejected", "received_at"),
        ("queued", None),
        ("rejected", "received_at"),
    ]
    for result in (body["results"][0], body["results"][2]):
        assert gw.wait_state(result["id"])["state"] == "replied"
    assert len(assert_listings_work(gw, codes[0])) == 4
    assert len(app.calls) == 2


# ------------------------------------------------------------------------ rows of an older version

#: (id, received_at, as the API shows it) as an older gateway stored them: year 0 (from
#: 0001-01-01T00:00:00+14:00), 9999-12-31T23:59:59.999999 (a float that rounds to year 10000), infinity.
OLD_ROWS = [
    ("old-year-0", -62135596800.0 - 14 * 3600, "0000-12-31T10:00:00.000Z"),
    ("old-year-10000", 253402300799.999999, "+10000-01-01T00:00:00.000Z"),
    ("old-infinite", float("inf"), None),
]


@pytest.fixture
def journal_with_old_rows(tmp_path: Path) -> Iterator[Path]:
    journal = tmp_path / "old.db"
    with serve_gateway(tmp_path, database=str(journal), log_name="schema"):
        pass  # creates the schema
    db = sqlite3.connect(journal)
    with db:
        for message_id, received_at, _ in OLD_ROWS:
            db.execute(
                "INSERT INTO messages (id, origin, source_id, shortcode, msisdn, message, received_at, "
                "stored_at, cc, ndc, sn, operator, circle) VALUES "
                "(?, 'http', NULL, ?, '919810012345', 'HELLO', ?, ?, 91, 9810, 12345, 'airtel', 'delhi')",
                (message_id, SC, received_at, 1_700_000_000.0),
            )
            db.execute(
                "INSERT INTO message_states (id, state, updated_at) VALUES (?, 'failed', ?)",
                (message_id, 1_700_000_001.0),
            )
            db.execute(
                "INSERT INTO events (message_id, at, kind, data) VALUES (?, ?, 'received', ?)",
                (message_id, received_at, orjson.dumps({"stored_at": 1_700_000_000.0}).decode()),
            )
            db.execute(
                "INSERT INTO events (message_id, at, kind, data) VALUES (?, ?, 'outcome', ?)",
                (
                    message_id,
                    1_700_000_001.0,
                    orjson.dumps({"outcome": "failed", "detail": "year 0"}).decode(),
                ),
            )
    db.close()
    yield journal


def test_rows_with_times_out_of_any_calendar_still_list_and_show(journal_with_old_rows: Path) -> None:
    with serve_gateway(journal_with_old_rows.parent, database=str(journal_with_old_rows)) as gw:
        listed = {m["id"]: m for m in assert_listings_work(gw)}
        assert set(listed) == {message_id for message_id, _, _ in OLD_ROWS}
        for message_id, _, shown in OLD_ROWS:
            assert listed[message_id]["received_at"] == shown
            one = gw.message(message_id)
            assert one["received_at"] == shown and one["timeline"][0]["at"] == shown
            assert one["stored_at"] == "2023-11-14T22:13:20.000Z"
        env = {"MOGATEWAY_URL": gw.url, "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN}
        for args in (
            ["messages", "list"],
            *(["messages", "show", message_id] for message_id, _, _ in OLD_ROWS),
        ):
            result = CliRunner().invoke(cli, args, env=env)
            assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
