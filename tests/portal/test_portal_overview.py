"""The Overview's two sections agree: "last hour" is part of "today", so none of its counts may exceed
today's, however the traffic moves while the page (or its live update) is read."""

from __future__ import annotations

import re
import threading

import orjson
from console_harness import ServedGateway
from gateway_harness import GatewayClient

from mogateway.testing.recorder import CallbackRecorder

from .portal_harness import tenant

_FIGURE = re.compile(r'data-figure="(hour|today)-([a-z_-]+)">([\d,]+)<')
_MOS = 150


def figures(html: str) -> dict[str, dict[str, int]]:
    """section -> figure -> count, from the Overview's HTML (the page, or its live fragment)."""
    found: dict[str, dict[str, int]] = {"hour": {}, "today": {}}
    for section, name, value in _FIGURE.findall(html):
        found[section][name] = int(value.replace(",", ""))
    assert found["hour"].keys() == found["today"].keys() and "mo-in" in found["today"], html[:2000]
    return found


def test_last_hour_never_counts_more_than_today_while_traffic_arrives(
    gw: ServedGateway, app: CallbackRecorder
) -> None:
    a = tenant(gw, app.url, "Alpha", "56767", mos=0)
    assert a.admin is not None
    pushed = threading.Event()

    def traffic() -> None:
        pusher = GatewayClient(gw.url, keep_alive=False)  # spread over the workers
        try:
            for n in range(_MOS):
                pusher.push("56767", f"VOTE {n}", msisdn=f"91981{n:07d}")
        finally:
            pusher.close()
            pushed.set()

    writer = threading.Thread(target=traffic, daemon=True)
    writer.start()
    reads: list[dict[str, dict[str, int]]] = []
    while not pushed.is_set() or not reads:
        reads.append(figures(a.admin.get("/portal/").text))
        with a.admin.stream("GET", "/portal/live/overview") as live:  # its first event only
            lines = live.iter_lines()
            while not (line := next(lines)).startswith("data: "):
                pass
        reads.append(figures(orjson.loads(line[len("data: ") :])["fragments"]["overview-live"]))
    writer.join()
    for read in reads:
        for name, today in read["today"].items():
            assert read["hour"][name] <= today, (name, read)
    assert reads[-1]["today"]["mo-in"] > 0 and len(reads) > 2
