"""Intake over the real ingest API: validation, recorded rejections, dedup, batches, limits, tokens.

The gateway is ``mogateway serve`` with several workers, shared by the module: each test routes
shortcodes (and source ids) of its own; an MO without a route is only ever rejected or unroutable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, Codes, ServeGateway, serve_gateway, settle

from mogateway.testing.recorder import CallbackRecorder

SC = "56767"


def mo(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"shortcode": SC, "msisdn": "919810012345", "message": "HELLO"}
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def assert_problem(resp: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    doc: dict[str, Any] = resp.json()
    assert doc["status"] == status and doc["title"] and doc["detail"] and doc["type"]
    if field is not None:
        assert doc["field"] == field
        assert field in doc["detail"]
    return doc


# ------------------------------------------------------------------------------------ rejections


@pytest.mark.parametrize(
    ("msisdn", "why"),
    [
        ("14155550123", "country code 1"),
        ("+447700900123", "country code 44"),
        ("911234567890", "not a mobile"),
    ],
)
def test_a_non_indian_or_non_mobile_number_is_refused_and_recorded(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, msisdn: str, why: str
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, max_concurrency=1)
    doc = assert_problem(
        gw.ingest("POST", "/v1/inbound", json=mo(shortcode=codes[0], msisdn=msisdn)), 422, "msisdn"
    )
    assert why in doc["reason"]
    assert doc["state"] == "rejected"
    recorded = gw.message(doc["id"])
    assert recorded["state"] == "rejected"
    assert recorded["rejection"] == {"field": "msisdn", "reason": doc["reason"]}
    assert [ev["event"] for ev in recorded["timeline"]] == ["rejected"]
    params = {"state": "rejected", "shortcode": codes[0]}
    listed = gw.admin("GET", "/v1/messages", params=params).json()["messages"]
    assert [m["id"] for m in listed] == [doc["id"]]
    assert settle(gw, app, codes[0]) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (mo(message=None), "message"),
        (mo(message=12345), "message"),
        (mo(msisdn=None), "msisdn"),
        (mo(shortcode="5676A"), "shortcode"),
        (mo(received_at="yesterday"), "received_at"),
        (mo(received_at="2022-08-08T10:20:30"), "received_at"),  # no offset: no defined instant
        (mo(received_at=1659954030), "received_at"),
        (mo(operator=7), "operator"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_bad_field_is_a_422_naming_it_and_is_recorded(
    gw: ServeGateway, body: dict[str, Any], field: str
) -> None:
    doc = assert_problem(gw.ingest("POST", "/v1/inbound", json=body), 422, field)
    assert gw.message(doc["id"])["rejection"]["field"] == field


def test_a_body_that_is_not_an_object_is_a_422(gw: ServeGateway) -> None:
    assert_problem(gw.ingest("POST", "/v1/inbound", json=["HELLO"]), 422, "body")


def test_a_body_that_is_not_json_is_a_400(gw: ServeGateway) -> None:
    resp = gw.ingest("POST", "/v1/inbound", content=b"{nope", headers={"content-type": "application/json"})
    assert_problem(resp, 400)


# ------------------------------------------------------------------------------------ duplicates


def test_the_same_source_id_twice_is_one_message_and_one_callback(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, max_concurrency=1)
    source = f"smsc-{codes[0]}"
    first = gw.push(codes[0], "HELLO", id=source)
    assert first["duplicate"] is False
    gw.wait_state(first["id"])
    second = gw.push(codes[0], "HELLO again, changed", id=source)
    assert second == {"id": first["id"], "state": "replied", "duplicate": True}
    listed = gw.admin("GET", "/v1/messages", params={"shortcode": codes[0]}).json()["messages"]
    assert len(listed) == 1 and listed[0]["message"] == "HELLO"
    assert len(settle(gw, app, codes[0])) == 1


def test_a_duplicate_while_the_first_is_in_flight_is_still_one_callback(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    """(Each push on a new connection: the three may reach different workers.)"""
    from mogateway.testing.recorder import Answer

    app.answer = Answer.late(0.5, "slow")
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, max_concurrency=1)
    ids = {gw.push(codes[0], "HELLO", id=f"smsc-{codes[0]}")["id"] for _ in range(3)}
    assert len(ids) == 1
    gw.wait_state(ids.pop())
    assert len(settle(gw, app, codes[0])) == 1


def test_a_rejected_message_sent_again_is_the_same_rejection(gw: ServeGateway, codes: Codes) -> None:
    first = gw.ingest("POST", "/v1/inbound", json=mo(msisdn="14155550123", id=f"x-{codes[0]}")).json()
    again = gw.ingest("POST", "/v1/inbound", json=mo(msisdn="14155550123", id=f"x-{codes[0]}"))
    doc = assert_problem(again, 422, "msisdn")
    assert (doc["id"], doc["duplicate"], doc["reason"]) == (first["id"], True, first["reason"])


# ------------------------------------------------------------------------------------ batch


def test_a_batch_answers_one_result_per_item_in_order(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw.add_client(shortcodes=[codes[0]], callback_url=app.url, max_concurrency=1)
    sc, b = codes[0], f"b{codes[0]}-"
    items = [
        mo(shortcode=sc, id=b + "1", message="first"),
        mo(shortcode=sc, id=b + "2", msisdn="14155550123"),
        mo(shortcode=sc, id=b + "1", message="first again"),
        42,
        mo(shortcode=sc, id=b + "3", message=None),
        mo(shortcode=sc, id=b + "4", message="second", msisdn="+91 98100 12345"),
    ]
    resp = gw.ingest("POST", "/v1/inbound/batch", json=items)
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    r = doc["results"]
    assert len(r) == len(items)
    assert (r[0]["state"], r[0]["duplicate"]) == ("queued", False)
    assert (r[1]["state"], r[1]["field"]) == ("rejected", "msisdn")
    assert (r[2]["id"], r[2]["duplicate"]) == (r[0]["id"], True)
    assert (r[3]["state"], r[3]["field"]) == ("invalid", "body")
    assert (r[4]["state"], r[4]["field"]) == ("rejected", "message")
    assert (r[5]["state"], r[5]["duplicate"]) == ("queued", False)
    assert (doc["accepted"], doc["rejected"], doc["duplicates"]) == (2, 3, 1)
    app.wait_for_calls(2)
    calls = settle(gw, app, codes[0])
    assert sorted(c.json()["message"] for c in calls) == ["first", "second"]
    assert {c.headers["x-mogateway-message-id"] for c in calls} == {r[0]["id"], r[5]["id"]}


# ------------------------------------------------------------------------------------ limits


@pytest.fixture(scope="module")
def small_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    workdir = tmp_path_factory.mktemp("small")
    with serve_gateway(workdir, max_body_bytes=2048, max_batch_bytes=4096, max_batch_items=5) as g:
        yield g


def test_an_oversized_single_body_is_413(small_gw: ServeGateway) -> None:
    resp = small_gw.ingest("POST", "/v1/inbound", json=mo(message="x" * 3000))
    assert_problem(resp, 413)


def test_an_oversized_body_without_content_length_is_413_too(small_gw: ServeGateway) -> None:
    def stream() -> Iterator[bytes]:
        yield b'{"shortcode": "56767", "msisdn": "919810012345", "message": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    before = small_gw.admin("GET", "/v1/messages").json()["messages"]
    resp = small_gw.ingest(
        "POST", "/v1/inbound", content=stream(), headers={"content-type": "application/json"}
    )
    assert_problem(resp, 413)
    assert small_gw.admin("GET", "/v1/messages").json()["messages"] == before  # nothing stored


def test_the_batch_has_its_own_larger_body_limit(small_gw: ServeGateway) -> None:
    items = [mo(message="y" * 600) for _ in range(5)]  # ~3.5 KiB: over the single limit, under the batch one
    assert small_gw.ingest("POST", "/v1/inbound/batch", json=items).status_code == 200
    assert_problem(small_gw.ingest("POST", "/v1/inbound/batch", json=[mo(message="z" * 5000)]), 413)
    assert_problem(small_gw.ingest("POST", "/v1/inbound/batch", json=[mo()] * 6), 413)


def test_the_default_single_body_limit_is_64_kib(gw: ServeGateway) -> None:
    assert_problem(gw.ingest("POST", "/v1/inbound", json=mo(message="x" * 70_000)), 413)


# ------------------------------------------------------------------------------------ tokens


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/inbound", mo()),
        ("POST", "/v1/inbound/batch", [mo()]),
        ("GET", "/v1/clients", None),
        ("GET", "/v1/messages", None),
        ("GET", "/metrics", None),
    ],
)
@pytest.mark.parametrize("header", [None, "Bearer wrong-token-0123456789", "Basic abc", "Bearer"])
def test_missing_or_wrong_tokens_are_401(
    gw: ServeGateway, method: str, path: str, body: Any, header: str | None
) -> None:
    headers = {} if header is None else {"authorization": header}
    resp = gw.request(method, path, json=body, headers=headers)
    assert_problem(resp, 401)
    assert resp.headers["www-authenticate"].startswith("Bearer")


def test_admin_and_ingest_tokens_are_not_interchangeable(gw: ServeGateway) -> None:
    assert_problem(gw.request("POST", "/v1/inbound", token=ADMIN_TOKEN, json=mo()), 401)
    assert_problem(gw.request("POST", "/v1/inbound/batch", token=ADMIN_TOKEN, json=[mo()]), 401)
    assert_problem(gw.request("GET", "/v1/clients", token=INGEST_TOKEN), 401)
    assert_problem(gw.request("GET", "/v1/messages", token=INGEST_TOKEN), 401)
    assert_problem(gw.request("GET", "/metrics", token=INGEST_TOKEN), 401)
    assert gw.request("POST", "/v1/inbound", token=INGEST_TOKEN, json=mo()).status_code == 202
    assert gw.request("GET", "/v1/clients", token=ADMIN_TOKEN).status_code == 200
