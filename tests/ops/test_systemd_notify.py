"""sd_notify spoken to a real datagram socket as ``$NOTIFY_SOCKET``: ``edges.systemd`` on its own (a
path and the abstract namespace), and a real ``mogateway serve`` — ``READY=1`` only once it takes
traffic, ``WATCHDOG=1`` while every worker's event loop answers and not while one is stopped (SIGSTOP),
``STOPPING=1`` when it stops."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, ServeProcess, clean_env, start_serve, worker_pids

from mogateway.cli.supervisor import STALE_S
from mogateway.edges.systemd import Notifier

WATCHDOG_S = 1.0


@contextmanager
def listening(address: str | bytes) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    try:
        yield sock
    finally:
        sock.close()


def receive(sock: socket.socket, timeout: float) -> str | None:
    sock.settimeout(timeout)
    try:
        return sock.recv(4096).decode()
    except TimeoutError:
        return None


def test_notifier_speaks_to_a_path_and_to_the_abstract_namespace(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with listening(path) as sock:
        notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"})
        assert notifier.ready("serving") and notifier.ping()
        assert receive(sock, 2) == f"READY=1\nSTATUS=serving\nMAINPID={os.getpid()}"
        assert receive(sock, 2) == "WATCHDOG=1"
        assert notifier.ping_every_s == 2.0
        notifier.close()
    name = f"mogateway-test-{secrets.token_hex(4)}"
    with listening(b"\0" + name.encode()) as sock:
        notifier = Notifier({"NOTIFY_SOCKET": f"@{name}"})
        assert notifier.stopping()
        assert receive(sock, 2) == "STOPPING=1\nSTATUS=stopping"
        assert notifier.ping_every_s is None  # no watchdog asked for
        notifier.close()
    # The watchdog of another pid is not ours; no socket: nothing sent, nothing raised.
    assert Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}).watchdog_s is None
    assert Notifier({}).send("READY=1") is False
    gone = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody.sock")})
    assert gone.ready("x") is False


class Listener:
    """Every datagram the gateway sends, with when it arrived."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.got: list[tuple[float, str]] = []

    def until(self, wanted: str, timeout: float) -> float:
        """Read until a datagram holds ``wanted``; when it came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = receive(self.sock, max(0.01, min(0.5, deadline - time.monotonic())))
            if text is not None:
                self.got.append((time.monotonic(), text))
                if wanted in text.split("\n"):
                    return self.got[-1][0]
        raise AssertionError(f"no {wanted} within {timeout} s; got {[t for _, t in self.got[-5:]]}")

    def silent_for(self, quiet: float, timeout: float) -> float:
        """Read until no WATCHDOG=1 came for ``quiet`` seconds; when the silence began."""
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            text = receive(self.sock, 0.1)
            now = time.monotonic()
            if text is not None:
                self.got.append((now, text))
                if "WATCHDOG=1" in text:
                    last = now
            elif now - last >= quiet:
                return last
        raise AssertionError(f"the watchdog pings did not stop within {timeout} s")


def serve_notifying(tmp_path: Path, address: str, *args: str) -> tuple[ServeProcess, float]:
    env = clean_env(
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        NOTIFY_SOCKET=address,
        WATCHDOG_USEC=str(int(WATCHDOG_S * 1_000_000)),
    )
    started = time.monotonic()
    return start_serve(tmp_path, env, args=args), started


@pytest.mark.slow
def test_serve_with_workers_is_ready_and_its_watchdog_stops_when_a_loop_stalls(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with listening(path) as sock:
        heard = Listener(sock)
        gateway, _ = serve_notifying(tmp_path, path)  # default workers: one per core
        try:
            ready_at = heard.until("READY=1", 60)
            # READY=1 came once the gateway took traffic: an MO pushed now is accepted.
            resp = httpx.post(
                gateway.url + "/v1/inbound",
                json={"shortcode": "56767", "msisdn": "919810012345", "message": "hi"},
                headers={"authorization": f"Bearer {INGEST_TOKEN}"},
            )
            assert resp.status_code == 202, resp.text
            ready = next(t for _, t in heard.got if "READY=1" in t)
            assert f"MAINPID={gateway.process.pid}" in ready and "workers" in ready
            for _ in range(3):
                heard.until("WATCHDOG=1", 3 * WATCHDOG_S)
            assert ready_at > 0

            workers = worker_pids(gateway.process.pid)
            assert len(workers) >= 1
            stalled = workers[0]
            os.kill(stalled, signal.SIGSTOP)  # its event loop stops; the process is still there
            try:
                stopped_at = time.monotonic()
                heard.silent_for(quiet=3 * WATCHDOG_S, timeout=STALE_S + 15)
                # The supervisor pinged on for at most STALE_S after the loop stopped (plus a ping's wait)
                pings = [at for at, t in heard.got if "WATCHDOG=1" in t and at > stopped_at]
                assert not pings or pings[-1] - stopped_at < STALE_S + 2 * WATCHDOG_S
            finally:
                os.kill(stalled, signal.SIGCONT)
            heard.until("WATCHDOG=1", STALE_S + 5)  # it answers again: so do the pings
            assert gateway.process.poll() is None
            assert worker_pids(gateway.process.pid)[0] == stalled  # the same worker: not restarted
        finally:
            assert gateway.stop() == 0
        heard.until("STOPPING=1", 10)


@pytest.mark.slow
def test_one_process_serve_notifies_on_the_abstract_namespace(tmp_path: Path) -> None:
    name = f"mogateway-test-{secrets.token_hex(4)}"
    with listening(b"\0" + name.encode()) as sock:
        heard = Listener(sock)
        gateway, _ = serve_notifying(tmp_path, f"@{name}", "--workers", "1")
        try:
            heard.until("READY=1", 60)
            assert httpx.get(gateway.url + "/healthz").status_code == 200
            heard.until("WATCHDOG=1", 3 * WATCHDOG_S)
            os.kill(gateway.process.pid, signal.SIGSTOP)  # the only event loop stalls
            try:
                heard.silent_for(quiet=3 * WATCHDOG_S, timeout=10)
            finally:
                os.kill(gateway.process.pid, signal.SIGCONT)
            heard.until("WATCHDOG=1", 5)
        finally:
            # uvicorn ends the process with the SIGTERM it caught, once it has shut down (systemd
            # counts that as a clean stop)
            assert gateway.stop() in (0, -signal.SIGTERM)
        heard.until("STOPPING=1", 10)
