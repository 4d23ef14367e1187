"""What the fault tests share: a small file system of their own (a tmpfs), a ``mogateway serve`` on it,
and the operator's view of the outcome (messages by state, callbacks per MO, the log)."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from mogateway.testing.recorder import RecordedCall

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
# The final states, spelled out once for every test directory (the fault tests take them from here).
from gateway_harness import FINAL as FINAL

ADMIN_TOKEN = "admin-token-for-faults-0123456789"
INGEST_TOKEN = "ingest-token-for-faults-01234567"


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the block (root only: the test is skipped otherwise)."""
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        for _ in range(50):  # a process that still has a file open there is being stopped
            if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def grow(where: Path, size: str) -> None:
    """Give the tmpfs at ``where`` more room, with nothing stopped (as an operator would)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serve:
    """``mogateway serve`` (default workers) as a subprocess in its own process group."""

    def __init__(self, workdir: Path, settings: dict[str, str], *, args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "serve.stderr"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
        env.update(
            MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
            MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
            MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
            MOGATEWAY_LOG_LEVEL="warning",
        )
        env.update(settings)
        script = Path(sys.executable).with_name("mogateway")
        with self.log_path.open("wb") as err:
            self.process = subprocess.Popen(
                [str(script), "serve", "--host", "127.0.0.1", "--port", str(self.port), *args],
                cwd=workdir,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        self.http = httpx.Client(timeout=30.0)
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"serve exited: {self.log()}"
            with contextlib.suppress(httpx.HTTPError):
                if self.http.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"serve did not start: {self.log()}"
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.http.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def admin(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        return self.http.request(method, self.url + path, headers=headers, **kw)

    def push(self, items: list[dict[str, Any]]) -> httpx.Response:
        headers = {"authorization": f"Bearer {INGEST_TOKEN}"}
        return self.http.post(self.url + "/v1/inbound/batch", json=items, headers=headers)

    def readyz(self) -> httpx.Response:
        """``/readyz`` over a connection of its own: the kernel hands it to any worker (each answers
        for itself), where a kept-alive connection would always ask the same one."""
        return httpx.get(self.url + "/readyz", timeout=10.0)

    def messages(self) -> list[dict[str, Any]]:
        """Every message the journal holds (the admin API, page by page)."""
        listed: list[dict[str, Any]] = []
        before = None
        for _ in range(10_000):
            params: dict[str, Any] = {"limit": 1000}
            if before:
                params["before"] = before
            resp = self.admin("GET", "/v1/messages", params=params)
            assert resp.status_code == 200, resp.text
            page = resp.json()
            listed.extend(page["messages"])
            before = page.get("next")
            if not before:
                return listed
        raise AssertionError("more than 10,000 pages")


def wait_for(what: str, check: Any, timeout: float) -> Any:
    """Poll ``check()`` until it returns something true (returned); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def callbacks_per_message(calls: list[RecordedCall]) -> collections.Counter[str]:
    return collections.Counter(call.headers.get("x-mogateway-message-id", "") for call in calls)


def log_lines(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]


class TcpCut:
    """A TCP forwarder on loopback to ``target`` that a test can cut (every connection through it closed,
    new ones refused) and restore: PostgreSQL going away and coming back, without touching the shared
    server. Runs on an event loop in a thread of its own."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        import asyncio
        import threading

        self._target = (target_host, target_port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._server: Any = None
        self._writers: set[Any] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="tcp-cut")
        self._thread.start()
        self.restore()

    def _call(self, coro: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _pipe(self, reader: Any, writer: Any) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: Any, writer: Any) -> None:
        import asyncio

        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)

    async def _start(self) -> None:
        import asyncio
        import socket

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self._server = await asyncio.start_server(self._serve, sock=sock)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()  # a reset, as when the server's host goes away
        self._writers.clear()

    def cut(self) -> None:
        self._call(self._stop())

    def restore(self) -> None:
        self._call(self._start())

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
