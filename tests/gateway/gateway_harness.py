"""Real gateways for the behavioural tests.

The default is :func:`serve_gateway`: ``mogateway serve`` as a subprocess, the way an operator runs it —
several worker processes (``max(2, cores)``: at least two even on a one-core machine, because one
worker per core is ``serve``'s default) sharing one port and one journal, settings from a TOML file.
Its client opens a new connection per request, so consecutive calls reach any worker: a test sees what
every worker sees and cannot depend on which one took a request.

:func:`in_process_gateway` (Gateway + create_app on uvicorn configured as ``serve`` configures it, in a
thread with its own event loop) stays for tests about one process's own parts; a test that uses it says
why in its docstring. Its only user is test_gateway_unavailable.py, which takes the journal's writer
away inside the process (no outside act makes a running journal refuse writes at once and then take
them again). Every other end-to-end test — tests/gateway, tests/cli, tests/console, tests/smpp,
tests/whatsapp — runs :func:`serve_gateway` (or a ``mogateway serve`` of its own); a new user of the
in-process gateway needs a reason of that kind, written in its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from mogateway.api.app import create_app
from mogateway.cli.supervisor import STOP_TIMEOUT_S
from mogateway.config import Settings
from mogateway.node import Gateway
from mogateway.testing.recorder import Answer, CallbackRecorder

T = TypeVar("T")

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
INGEST_TOKEN = "ingest-token-for-tests-012345678"

#: States after which nothing more happens to a message (mirrors core.timeline.FINAL_STATES, spelled out
#: so the tests notice if the table changes under them).
FINAL = frozenset(
    {
        "replied",
        "delivered",
        "undelivered",
        "reply_failed",
        "reply_blocked",
        "no_reply",
        "timed_out",
        "http_error",
        "bad_response",
        "failed",
        "unroutable",
        "rejected",
    }
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port_url() -> str:
    """A loopback URL nobody listens on (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/callback"


@dataclass
class GatewayClient:
    """An operator's view of a gateway at ``url``: admin and ingest calls with the right tokens."""

    url: str
    admin_token: str = ADMIN_TOKEN
    ingest_token: str = INGEST_TOKEN
    #: False: a new connection per request (with several workers, each may reach another worker).
    keep_alive: bool = True
    _http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        limits = httpx.Limits() if self.keep_alive else httpx.Limits(max_keepalive_connections=0)
        self._http = httpx.Client(timeout=10.0, limits=limits)

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return self._http.request(method, self.url + path, headers=headers, **kw)

    def admin(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.request(method, path, token=self.admin_token, **kw)

    def ingest(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.request(method, path, token=self.ingest_token, **kw)

    # ------------------------------------------------------------------ common steps

    def add_client(
        self, *, shortcodes: Sequence[str | int], callback_url: str, **fields: Any
    ) -> dict[str, Any]:
        body = {"name": fields.pop("name", "app"), "shortcodes": shortcodes, "callback_url": callback_url}
        body.update(fields)
        resp = self.admin("POST", "/v1/clients", json=body)
        assert resp.status_code == 201, resp.text
        return dict(resp.json())

    def push(
        self, shortcode: str, message: str, msisdn: str = "919810012345", **extra: Any
    ) -> dict[str, Any]:
        resp = self.ingest(
            "POST",
            "/v1/inbound",
            json={"shortcode": shortcode, "msisdn": msisdn, "message": message, **extra},
        )
        assert resp.status_code == 202, resp.text
        return dict(resp.json())

    def message(self, message_id: str) -> dict[str, Any]:
        resp = self.admin("GET", f"/v1/messages/{message_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def wait_state(
        self, message_id: str, states: frozenset[str] = FINAL, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Poll the admin API until the message is in one of ``states``; returns the message."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.message(message_id)
            if msg["state"] in states:
                return msg
            if time.monotonic() > deadline:
                raise AssertionError(f"message {message_id} still {msg['state']} after {timeout} s: {msg}")
            time.sleep(0.02)


def events(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The timeline events of one kind."""
    return [ev for ev in message["timeline"] if ev["event"] == kind]


def wait_until(
    predicate: Callable[[], object], what: str, timeout: float = 10.0, every: float = 0.02
) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(every)


def calls_for(recorder: Any, message_id: str) -> list[Any]:
    """The calls a recorder shared by several tests received about one message: a callback (its
    ``x-mogateway-message-id`` header) or an MT hand-over (``message_id`` in its JSON body)."""
    found = []
    for call in list(recorder.calls):
        if call.headers.get("x-mogateway-message-id") == message_id:
            found.append(call)
            continue
        try:
            body = call.json()
        except ValueError:
            continue
        if isinstance(body, dict) and body.get("message_id") == message_id:
            found.append(call)
    return found


class Codes:
    """Ten shortcodes that no other test uses: ``codes[0]`` … ``codes[9]`` (five digits each)."""

    def __init__(self, base: int) -> None:
        self.base = base

    def __getitem__(self, index: int) -> str:
        assert 0 <= index < 10, index
        return str(self.base + index)


def settle(gw: GatewayClient, app: Any, shortcode: str, timeout: float = 10.0) -> list[Any]:
    """Instead of sleeping for "nothing more happens": push a marker MO to ``shortcode`` and wait for its
    callback. For a client of cap 1 (one worker dispatches it, in order), every callback owed for an
    earlier MO has then been made. Returns the app's calls other than the marker's."""
    marker = gw.push(shortcode, "MARKER")["id"]
    gw.wait_state(marker, timeout=timeout)
    wait_until(lambda: calls_for(app, marker), f"the marker's callback ({marker})", timeout)
    return [c for c in list(app.calls) if c.headers.get("x-mogateway-message-id") != marker]


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with these labels (and any others, e.g. each worker's
    ``worker``) in a Prometheus text exposition; 0 when there is none."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        found, _, rest = series.partition("{")
        if found != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def outcome(message: dict[str, Any]) -> dict[str, Any]:
    """The (last) outcome event of a message."""
    found = events(message, "outcome")
    assert found, f"no outcome in {message['timeline']}"
    return found[-1]


# ------------------------------------------------------------------------------------ in-process


class InProcessGateway(GatewayClient):
    """A Gateway served by uvicorn on its own event loop in a background thread."""

    gateway: Gateway
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run ``coro`` on the gateway's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def gateway_settings(database: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database": str(database),
        "admin_token": ADMIN_TOKEN,
        "ingest_token": INGEST_TOKEN,
        "allow_private_callbacks": True,  # the callback apps of these tests live on 127.0.0.1
        "log_level": "warning",
    }
    values.update(overrides)
    return Settings(**values)


@contextmanager
def in_process_gateway(database: Path, **overrides: Any) -> Iterator[InProcessGateway]:
    """Start a gateway with these settings on a free port; stop it (gracefully) when the block ends.

    uvicorn is configured as ``serve`` configures it (:func:`mogateway.api.server.server_config`): the
    guarded protocol with the settings' limits, and ``X-Forwarded-For`` believed only from the
    ``trusted_proxies`` setting (none by default), not from 127.0.0.1 as uvicorn's own default would."""
    import uvicorn

    from mogateway.api.server import Limits, server_config

    settings = gateway_settings(database, **overrides)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    gateway = Gateway(settings)
    limits = Limits(
        max_connections=settings.max_connections,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        idle_timeout_s=settings.idle_timeout_s,
    )
    config = server_config(
        create_app(gateway, manage_lifecycle=False),
        host="127.0.0.1",
        port=port,
        limits=limits,
        trusted_proxies=settings.trusted_proxies,
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    ready = threading.Event()
    failure: list[BaseException] = []

    async def main() -> None:
        try:
            await gateway.start()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.005)
        ready.set()
        try:
            await serving
        finally:
            await gateway.stop()

    def thread_main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=thread_main, name="gateway", daemon=True)
    thread.start()
    if not ready.wait(20) or failure or not server.started:
        server.should_exit = True
        thread.join(10)
        raise RuntimeError(f"the gateway did not start: {failure[:1]}")
    running = InProcessGateway(url=f"http://127.0.0.1:{port}")
    running.gateway = gateway
    running.loop = loop
    try:
        yield running
    finally:
        running.close()
        server.should_exit = True
        thread.join(15)
        sock.close()


# ------------------------------------------------------------------------------------ applications
# Fixtures of the directories whose tests run against ``gw`` (tests/gateway, tests/cli): their conftest
# takes them from here, so the two applications are written once.


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    """The client application: a recording callback server answering "OK" until told otherwise."""
    with CallbackRecorder.in_thread(Answer.text("OK")) as recorder:
        yield recorder


@pytest.fixture(scope="module")
def mt() -> Iterator[CallbackRecorder]:
    """The operator's MT endpoint behind the ``http`` reply channel (answers 200 with a reference)."""
    answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with CallbackRecorder.in_thread(answer, path="/mt") as recorder:
        yield recorder


# ------------------------------------------------------------------------------------ subprocess


def mogateway_command() -> list[str]:
    """The installed console script (next to this interpreter), so the real entry point is exercised."""
    script = Path(sys.executable).with_name("mogateway")
    return (
        [str(script)] if script.exists() else [sys.executable, "-c", "from mogateway.cli import main; main()"]
    )


def run_cli(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``mogateway *args`` in ``workdir`` as an operator runs it, to its end (a minute at most)."""
    return subprocess.run(
        [*mogateway_command(), *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=60
    )


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any MOGATEWAY_* setting of the developer's shell, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    env.update(extra)
    return env


def serve_settings(workdir: Path, **extra: str) -> dict[str, str]:
    """The MOGATEWAY_* settings of most test gateways: the journal in ``workdir``, the test tokens,
    callbacks to loopback allowed (the applications run there), warnings only; ``extra`` over them."""
    return {
        "MOGATEWAY_DATABASE": str(workdir / "journal.db"),
        "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN,
        "MOGATEWAY_INGEST_TOKEN": INGEST_TOKEN,
        "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true",
        "MOGATEWAY_LOG_LEVEL": "warning",
        **extra,
    }


def serve_env(workdir: Path, **extra: str) -> dict[str, str]:
    """:func:`clean_env` with :func:`serve_settings`: the environment of a test ``mogateway serve``."""
    return clean_env(**serve_settings(workdir, **extra))


@dataclass
class ServeProcess:
    """A ``mogateway serve`` subprocess; stderr goes to a file so it never blocks on a full pipe."""

    process: subprocess.Popen[bytes]
    url: str
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_all_serving(self, timeout: float = 60.0) -> None:
        """Wait until the supervisor says every worker serves (``start_serve`` returns once one answers
        /healthz): what each worker logs while it starts is in :meth:`stderr` after this."""
        deadline = time.monotonic() + timeout
        while "mogateway listening on" not in self.stderr():
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = self.stderr()
                self.kill()  # a failed test leaves no gateway behind
                raise AssertionError(f"the workers did not all start: {said}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL to the gateway and its worker processes at once (its own process group): no shutdown
        code runs anywhere, as in a power cut of the machine."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def kill_worker(self, index: int) -> int:
        """SIGKILL one worker process (the supervisor starts it again); its pid."""
        pid = worker_pids(self.process.pid)[index]
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> int:
        """SIGTERM and wait (a graceful stop); falls back to SIGKILL.

        The wait outlasts the supervisor's own (``STOP_TIMEOUT_S``, after which it kills a worker that
        did not stop and says so in its log): a slow worker shows as that line, not as this SIGKILL."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(STOP_TIMEOUT_S + 10)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode


def worker_pids(supervisor: int) -> dict[int, int]:
    """The worker processes of a ``mogateway serve --workers N`` (index -> pid), from /proc."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat_fields[1]) != supervisor:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if b"--worker-seat" in argv:
            seat = argv[argv.index(b"--worker-seat") + 1].decode()
            found[int(seat.split(":", 1)[0])] = int(entry.name)
    return found


def start_serve(
    workdir: Path,
    env: dict[str, str],
    *,
    log_name: str = "serve",
    timeout: float = 30.0,
    preexec_fn: Callable[[], None] | None = None,
    args: Sequence[str] = (),
) -> ServeProcess:
    """Start ``mogateway serve`` in ``workdir`` on a free port and wait until /healthz answers.

    ``preexec_fn`` runs in the child before the gateway starts (e.g. to lower its resource limits);
    ``args`` are more options of ``serve`` (``--workers 3``); without ``--workers`` (or the setting in
    ``env``) it runs :func:`default_workers`."""
    if "--workers" not in args and "MOGATEWAY_WORKERS" not in env:
        args = (*args, "--workers", str(default_workers()))  # serve's default, at least two
    port = free_port()
    stderr_path = workdir / f"{log_name}.stderr"
    with stderr_path.open("wb") as err:
        process = subprocess.Popen(
            [*mogateway_command(), "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=preexec_fn,
            start_new_session=True,  # its own process group: kill() reaches every worker
        )
    url = f"http://127.0.0.1:{port}"
    running = ServeProcess(process, url, stderr_path)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"mogateway serve exited with {process.returncode}: {running.stderr()}")
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return running
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            running.kill()
            raise RuntimeError(f"mogateway serve did not answer within {timeout} s: {running.stderr()}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------ the default


def default_workers() -> int:
    """The workers of a test gateway: one per core as ``serve`` runs by default, and never fewer than two."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(2, cores)


def toml_value(value: Any) -> str:
    """``value`` as TOML (inline tables and arrays, so any nesting fits on one line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[ " + ", ".join(toml_value(v) for v in value) + " ]"
    raise TypeError(f"no TOML for {value!r}")


def write_settings(path: Path, settings: dict[str, Any]) -> Path:
    path.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items() if v is not None))
    return path


@dataclass
class ServeGateway(GatewayClient):
    """A running ``mogateway serve`` (see :func:`serve_gateway`), with the operator's client calls."""

    serve: ServeProcess | None = None
    workers: int = 1
    config: Path | None = None
    database: Path | None = None

    @property
    def process(self) -> ServeProcess:
        assert self.serve is not None
        return self.serve

    def stderr(self) -> str:
        return self.process.stderr()

    def nodes(self) -> set[str]:
        """The worker names answering ``/healthz`` (each on a new connection)."""
        return {str(self.request("GET", "/healthz").json()["node"]) for _ in range(4 * self.workers)}


def wait_all_workers(url: str, workers: int, timeout: float = 20.0) -> None:
    """Until every worker has answered ``/healthz`` (new connections reach any listening worker)."""
    seen: set[object] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {sorted(map(str, seen))} of {workers} workers answered in {timeout} s")
        with contextlib.suppress(httpx.HTTPError):
            seen.add(httpx.get(url + "/healthz", timeout=2.0).json().get("node"))


@contextmanager
def serve_gateway(
    workdir: Path,
    *,
    workers: int | None = None,
    log_name: str = "serve",
    env: dict[str, str] | None = None,
    **settings: Any,
) -> Iterator[ServeGateway]:
    """``mogateway serve --config <toml> --workers N`` in ``workdir`` (N: :func:`default_workers`), with the
    tests' tokens, a journal ``workdir/journal.db`` and private callbacks allowed unless ``settings`` say
    otherwise; stopped gracefully (SIGTERM) when the block ends."""
    values: dict[str, Any] = {
        "database": str(workdir / "journal.db"),
        "admin_token": ADMIN_TOKEN,
        "ingest_token": INGEST_TOKEN,
        "allow_private_callbacks": True,  # the callback apps of these tests live on 127.0.0.1
        "log_level": "warning",
    }
    values.update(settings)
    count = default_workers() if workers is None else workers
    config = write_settings(workdir / f"{log_name}.toml", values)
    serve = start_serve(
        workdir,
        clean_env(**(env or {})),
        log_name=log_name,
        args=("--config", str(config), "--workers", str(count)),
    )
    running = ServeGateway(
        url=serve.url,
        admin_token=values["admin_token"],
        ingest_token=values["ingest_token"],
        keep_alive=False,
        serve=serve,
        workers=count,
        config=config,
        database=Path(values["database"]) if "://" not in str(values["database"]) else None,
    )
    try:
        if count > 1:
            wait_all_workers(serve.url, count)
        yield running
    finally:
        running.close()
        serve.stop()


def state_from_timeline(message: dict[str, Any]) -> str | None:
    """Fold the message's timeline through core.timeline's table: the state its events lead to.

    Raises IllegalTransition when the gateway recorded an event the table does not allow there.
    """
    from mogateway.core.timeline import Event, EventKind, fold

    views = {"stored", "routed", "attempt"}  # the API's spread-out views of stored data, not events
    events = [
        Event(EventKind(ev["event"]), 0.0, ev) for ev in message["timeline"] if ev["event"] not in views
    ]
    state = fold(events)
    return None if state is None else state.value
