"""``GET /v1/messages``: keyset paging (``next`` / ``before``), and the client and until filters.

On the module's multi-worker gateway, each test on shortcodes of its own."""

from __future__ import annotations

from gateway_harness import Codes, ServeGateway

from mogateway.testing.recorder import CallbackRecorder


def test_pages_follow_next_until_the_end_without_repeats(gw: ServeGateway, codes: Codes) -> None:
    ids = {gw.push(codes[1], f"NOBODY {n}")["id"] for n in range(7)}  # each may reach another worker
    seen: list[str] = []
    before = None
    while True:
        resp = gw.admin(
            "GET",
            "/v1/messages",
            params={"limit": 3, "shortcode": codes[1], **({"before": before} if before else {})},
        )
        assert resp.status_code == 200, resp.text
        page = resp.json()
        seen.extend(m["id"] for m in page["messages"])
        before = page["next"]
        if before is None:
            break
    assert len(seen) == 7 and set(seen) == ids
    bad = gw.admin("GET", "/v1/messages", params={"before": "yesterday"})
    assert bad.status_code == 422 and bad.json()["field"] == "before"


def test_client_and_until_filters(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    mine = gw.push(codes[0], "HI")["id"]
    gw.wait_state(mine)
    gw.push(codes[1], "NOBODY")
    found = gw.admin("GET", "/v1/messages", params={"client": client["id"]}).json()["messages"]
    assert [m["id"] for m in found] == [mine]
    assert gw.admin("GET", "/v1/messages", params={"until": "2000-01-01T00:00:00Z"}).json()["messages"] == []
    bad = gw.admin("GET", "/v1/messages", params={"until": "soon"})
    assert bad.status_code == 422 and bad.json()["field"] == "until"
