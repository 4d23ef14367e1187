"""The console on a default gateway: several worker processes behind one port (SO_REUSEPORT), each new
connection reaching either of them. A session made through one worker is honoured by every worker and
after a restart; signing out through one ends it on all; the sign-in throttle counts over all of them;
the Binds page shows every bind in detail, whichever worker holds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from console_harness import WORKERS, ServedGateway, fresh_get, served_gateway, worker_of
from gateway_harness import ADMIN_TOKEN, free_port

#: New connections per check: each lands on a worker by the hash of its address and port, so the
#: chance that all of them miss one of two workers is 2^-39.
CONNECTIONS = 40


def _sign_in(url: str, token: str = ADMIN_TOKEN) -> tuple[httpx.Response, str]:
    """The sign-in form fetched and sent on one new connection: the answer to the POST, and the worker
    that gave it (asked on the same connection)."""
    with httpx.Client(base_url=url, timeout=10) as client:
        form = client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf, form.text[:300]
        answer = client.post("/console/login", data={"csrf": csrf[1], "token": token})
        return answer, str(client.get("/healthz").json()["node"])


def _session(url: str) -> str:
    answer, _ = _sign_in(url)
    assert answer.status_code == 303, answer.text[:300]
    return str(answer.cookies["mogateway_console"])


def _pages_on_fresh_connections(gw: ServedGateway, cookie: str | None) -> tuple[list[int], set[str]]:
    """The status of /console/clients on :data:`CONNECTIONS` new connections, and the workers that
    served the pages (those that answered 200)."""
    statuses: list[int] = []
    workers: set[str] = set()
    for _ in range(CONNECTIONS):
        page = fresh_get(gw.url + "/console/clients", cookie)
        statuses.append(page.status_code)
        if page.status_code == 200:
            workers.add(worker_of(page))
    return statuses, workers


def test_a_session_made_through_one_worker_is_honoured_by_every_worker_and_after_a_restart(
    gw: ServedGateway,
) -> None:
    cookie = _session(gw.url)
    statuses, workers = _pages_on_fresh_connections(gw, cookie)
    assert statuses == [200] * CONNECTIONS
    assert len(workers) == WORKERS, workers  # every worker served the session

    gw.restart()
    statuses, workers = _pages_on_fresh_connections(gw, cookie)
    assert statuses == [200] * CONNECTIONS  # a restart signs nobody out
    assert len(workers) == WORKERS, workers


def test_signing_out_through_one_worker_ends_the_session_on_every_worker(gw: ServedGateway) -> None:
    cookie = _session(gw.url)
    with httpx.Client(base_url=gw.url, cookies={"mogateway_console": cookie}, timeout=10) as client:
        page = client.get("/console/clients")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert page.status_code == 200 and csrf
        out = client.post("/console/logout", data={"csrf": csrf[1]}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
    statuses, _ = _pages_on_fresh_connections(gw, cookie)
    assert statuses == [303] * CONNECTIONS  # every worker sends the old cookie to sign in
    stream = fresh_get(gw.url + "/console/live/overview", cookie)
    assert stream.status_code == 401


def test_the_sign_in_throttle_counts_failures_over_every_worker(gw: ServedGateway) -> None:
    failed_on: list[str] = []
    for _ in range(5):  # each attempt on a new connection: the failures land on either worker
        wrong, worker = _sign_in(gw.url, "guess-" * 4)
        assert wrong.status_code == 401
        failed_on.append(worker)
    refused_on: set[str] = set()
    for _ in range(CONNECTIONS // 2):
        locked, worker = _sign_in(gw.url)  # even the right token now waits, whichever worker is asked
        assert locked.status_code == 429, (worker, locked.text[:300])
        assert "Too many failed sign-ins" in locked.text
        assert "mogateway_console=" not in locked.headers.get("set-cookie", "")
        refused_on.add(worker)
    assert len(refused_on) == WORKERS, refused_on  # 5 failures in all, not 5 per worker
    print("failures by worker:", {w: failed_on.count(w) for w in sorted(set(failed_on))})


def test_every_worker_shows_every_bind_in_detail(tmp_path: Path) -> None:
    config = "".join(
        f'[[smpp.binds]]\nname = "{name}"\nhost = "127.0.0.1"\nport = {free_port()}\n'
        'system_id = "gw"\npassword = "pw"\n'
        for name in ("airtel-dl", "jio-mh", "vi-ka")
    )
    with served_gateway(tmp_path / "gateway", config=config) as gw:
        cookie = _session(gw.url)
        workers: set[str] = set()
        for _ in range(CONNECTIONS // 2):
            page = fresh_get(gw.url + "/console/binds", cookie)
            workers.add(worker_of(page))
            for name in ("airtel-dl", "jio-mh", "vi-ka"):  # each held by one worker, shown by all
                assert page.text.count(f'id="bind-{name}"') == 1, (worker_of(page), name)
            assert "held by" not in page.text and page.text.count('data-label="Connects"') == 3
        assert len(workers) == WORKERS
