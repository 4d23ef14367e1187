"""What ``mogateway serve`` loads at start, in each of its processes (docs/benchmarks.md §7.2).

The supervisor only checks the settings, opens the journal and keeps the workers: it loads no web stack,
and not the node (``mogateway.node``), its modes, the dispatcher, the SMPP binds or the HTTP clients
(docs/benchmarks.md §7.4). A worker loads the server, but not uvicorn's WebSocket library (a handshake
gets its 403 from ``api.websocket_refusal``) nor its reloader's watchfiles (uvicorn's package imports its
command line, click, whatever is done: ``cli/serve.py``), nor the stacks of the parts a deployment may
never use: argon2 (the portal's passwords: one
dummy hash held 64 MiB for a moment, every worker's peak), aiohttp (WhatsApp media, an ``http`` reply
channel), httpx (the console's in-process API), nats-py (a JetStream queue), asyncpg (a PostgreSQL
journal). Each is loaded by the worker that first needs it, and that first request works.

Each process of a real ``serve --workers 2`` is asked for its ``sys.modules`` by a ``sitecustomize`` on
its ``PYTHONPATH`` (a thread that answers a file the test writes), so what one process loaded cannot
hide what another did.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from gateway_harness import (
    ADMIN_TOKEN,
    clean_env,
    free_port,
    mogateway_command,
    serve_gateway,
    wait_until,
    worker_pids,
)

from mogateway.cli.exit_codes import Exit

pytestmark = pytest.mark.slow

#: Loaded by no process of a gateway at start on its defaults (SQLite, in-process queue, log replies).
LAZY = ("argon2", "aiohttp", "httpx", "nats", "asyncpg")
#: ... and by no supervisor: it serves no HTTP (and runs no uvloop loop).
SERVER = ("fastapi", "starlette", "uvicorn", "uvloop", "jinja2", "mogateway.api")
#: ... nor what a node runs: the supervisor opens the journal with ``edges.configured_journal``.
NODE = (
    "mogateway.node",
    "mogateway.modes",
    "mogateway.service.dispatcher",
    "mogateway.edges.smpp",
    "mogateway.edges.http1",
    "prometheus_client",
)
#: Loaded by no worker: the gateway serves no WebSocket and never reloads.
UNUSED_BY_UVICORN = ("websockets", "wsproto", "watchfiles")

_PROBE = """
import json, os, sys, threading, time

def _answer(directory):
    ask = os.path.join(directory, f"ask-{os.getpid()}")
    while True:
        time.sleep(0.02)
        if os.path.exists(ask):
            loaded = sorted(k for k, v in list(sys.modules.items()) if v is not None)
            with open(ask + ".tmp", "w") as out:
                json.dump(loaded, out)
            os.rename(ask + ".tmp", os.path.join(directory, f"{os.getpid()}.json"))
            os.remove(ask)

if os.environ.get("IMPORT_PROBE_DIR"):
    threading.Thread(target=_answer, args=(os.environ["IMPORT_PROBE_DIR"],), daemon=True).start()
"""


def _loaded(directory: Path, pid: int) -> set[str]:
    """The modules process ``pid`` holds now."""
    answer = directory / f"{pid}.json"
    answer.unlink(missing_ok=True)
    (directory / f"ask-{pid}").touch()
    wait_until(answer.exists, f"process {pid}'s modules")
    return set(json.loads(answer.read_text()))


def _of(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The top packages of ``names`` (or ``mogateway.api``-like prefixes) that ``modules`` holds."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def _websocket_handshake(url: str, path: str) -> bytes:
    """What the gateway answers a WebSocket handshake on ``path``, up to its closing the connection."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    head = (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    answer = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


def _form_token(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text[:500]
    return found[1]


def test_serve_loads_the_optional_stacks_at_their_first_use_only(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(_PROBE)
    answers = tmp_path / "answers"
    answers.mkdir()
    env = {"PYTHONPATH": str(probe), "IMPORT_PROBE_DIR": str(answers)}
    with serve_gateway(tmp_path, workers=2, env=env) as gw:
        supervisor = gw.process.process.pid
        workers = sorted(worker_pids(supervisor).values())
        assert len(workers) == 2

        held = _loaded(answers, supervisor)
        assert "mogateway.cli.supervisor" in held  # the probe answers from the gateway's processes
        assert _of(held, LAZY + SERVER + NODE) == []
        for pid in workers:
            held = _loaded(answers, pid)
            assert "mogateway.api.app" in held and "mogateway.api.portal" in held
            assert _of(held, LAZY + UNUSED_BY_UVICORN) == []

        # A WebSocket handshake gets the 403 it always got (when uvicorn handed it to the websockets
        # library, whose application had no WebSocket route), on every path, without loading one.
        for path in ("/healthz", "/v1/inbound", "/nowhere"):
            assert _websocket_handshake(gw.url, path).startswith(b"HTTP/1.1 403 Forbidden\r\n")

        # The console's first page that calls the API, and a portal sign-in: each loads its stack in
        # the worker that takes it, and answers as ever.
        with httpx.Client(base_url=gw.url, timeout=30) as browser:  # one connection: one worker
            csrf = _form_token(browser.get("/console/login"))
            signed = browser.post("/console/login", data={"csrf": csrf, "token": ADMIN_TOKEN})
            assert signed.status_code == 303, signed.text
            gw.add_client(name="lazy", shortcodes=["59111"], callback_url="http://127.0.0.1:9/cb")
            clients = browser.get("/console/clients")
            assert clients.status_code == 200 and "lazy" in clients.text
        with httpx.Client(base_url=gw.url, timeout=30) as browser:
            csrf = _form_token(browser.get("/portal/login"))
            refused = browser.post(
                "/portal/login",
                data={"csrf": csrf, "email": "nobody@example.com", "password": "not it at all", "code": ""},
            )
            assert refused.status_code == 401 and "Wrong e-mail address, password or code." in refused.text
        loaded = [_loaded(answers, pid) for pid in workers]
        assert any("httpx" in held for held in loaded)
        assert any("argon2" in held for held in loaded)
        assert not any(_of(held, ("aiohttp", "nats", "asyncpg", *UNUSED_BY_UVICORN)) for held in loaded)


@pytest.mark.parametrize("rows", [None, "a,b\n"], ids=["missing", "bad-row"])
def test_the_supervisor_refuses_a_bad_numbering_file_in_one_line(tmp_path: Path, rows: str | None) -> None:
    """The supervisor checks the numbering files as a gateway does when it is made, without making one
    (``edges.numbering_settings``): ``serve --workers 2`` stops before any worker starts, with one line
    naming the setting, and the exit code of an invalid setting."""
    series = tmp_path / "series.csv"
    if rows is not None:
        series.write_text(rows)
    env = clean_env(MOGATEWAY_DATABASE=str(tmp_path / "journal.db"), MOGATEWAY_SERIES_CSV=str(series))
    done = subprocess.run(
        [*mogateway_command(), "serve", "--workers", "2", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == Exit.USAGE, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("mogateway: invalid setting series_csv (MOGATEWAY_SERIES_CSV): ")
    assert str(series) in lines[0]
