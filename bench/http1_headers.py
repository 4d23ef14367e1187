"""CPU per callback POST of the HTTP/1.1 client (src/mogateway/edges/http1.py): as the dispatcher uses
it, with the answer-header capture the portal's "test my endpoint" turns on (``capture_headers=True``),
and, with ``--against REV``, as another revision wrote it.

Why: the capture must cost the dispatcher nothing. It lives in a subclass of the connection (httptools
looks ``on_header`` up once per parser), so the plain client's rows should match the older revision's.

    .venv/bin/python bench/http1_headers.py [--count 5000] [--runs 7] [--against REV]

Client and server share one process and one asyncio loop on loopback, so a row is the CPU of both per
POST: only the differences between rows mean anything. Rows take turns, run after run, and the median
is shown. The modules run as source (``MOGATEWAY_PURE=1`` is set here): ``--against`` loads the other
revision's source beside this one's, and there is no build of it to compare with.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ["MOGATEWAY_PURE"] = "1"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mogateway.edges import http1  # noqa: E402

BODY = b'{"message_id": "01JD7ZK3M4Q9X8V2N6T5R1B0CA", "message": "BAL", "msisdn": "919812345678"}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\nx-request-id: 4711\r\n"
    b"cache-control: no-store\r\ncontent-length: 14\r\n\r\nYour balance 7"
)


class Application(asyncio.Protocol):
    """Answers each request (one per read: the body is the request's last bytes) at once."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if data.endswith(BODY):
            self.transport.write(ANSWER)


def other_revision(rev: str) -> ModuleType:
    """``edges/http1.py`` as ``rev`` wrote it, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/mogateway/edges/http1.py"],
        check=True,
        capture_output=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "http1_other.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("http1_other", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["http1_other"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def cpu_per_post_us(client: Any, url: str, count: int) -> float:
    headers = {"content-type": "application/json", "authorization": "Bearer t"}
    for _ in range(200):  # connect, warm up
        await client.post(url, BODY, headers)
    started = time.process_time()
    for _ in range(count):
        await client.post(url, BODY, headers)
    elapsed = time.process_time() - started
    await client.close()
    return elapsed / count * 1e6


async def main(count: int, runs: int, against: str | None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Application, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/callback"
    rows: dict[str, Callable[[], Any]] = {}
    if against:
        older = other_revision(against)
        rows[f"{against}: plain"] = lambda: older.Http1Client(allow_private=True)
    rows["this tree: plain"] = lambda: http1.Http1Client(allow_private=True)
    rows["this tree: capture_headers"] = lambda: http1.Http1Client(allow_private=True, capture_headers=True)
    figures: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(runs):
        for name, make in rows.items():
            figures[name].append(await cpu_per_post_us(make(), url, count))
    server.close()
    for name, values in figures.items():
        shown = ", ".join(f"{v:.1f}" for v in sorted(values))
        print(f"{name:34s} median {statistics.median(values):5.1f} µs CPU per POST  (runs: {shown})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=5000, help="POSTs per run and row")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--against", help="a git revision whose http1.py runs as a row too")
    options = parser.parse_args()
    asyncio.run(main(options.count, options.runs, options.against))
