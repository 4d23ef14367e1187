"""Callbacks per second on one kept-alive connection to an application that writes its answer in two writes
without TCP_NODELAY (Python's ``http.server``), with and without TCP_QUICKACK on the gateway's side.

Why: such an application sends its headers at once and holds its body back (Nagle's algorithm) until the
headers are acknowledged; on a kept-alive connection Linux delays that ACK (up to 40 ms), so every
callback waits ~40 ms and a client with ``max_concurrency = 1`` drains about 22 MOs/s. The callback
client (src/mogateway/edges/http1.py) sets TCP_QUICKACK after writing a request and after each read.

    .venv/bin/python bench/callback_nagle.py [--count 200] [--runs 3] [--loop uvloop|asyncio]

The application runs in a process of its own (``--serve PORT``, started and stopped by the bench), so
the two sides do not share a GIL. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mogateway.edges.http1 import Http1Client

BODY = b'{"message_id": "01JD7ZK3M4Q9X8V2N6T5R1B0CA", "message": "BAL", "msisdn": "919812345678"}'


class TwoWrites(BaseHTTPRequestHandler):
    """Answers every POST with a short text/plain reply: headers in one write, the body in another."""

    protocol_version = "HTTP/1.1"  # keep-alive

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        answer = b"Your balance is Rs 42.00"
        self.send_response(200)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()  # first write: the status line and headers
        self.wfile.write(answer)  # second write: the body

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(port: int) -> None:
    HTTPServer(("127.0.0.1", port), TwoWrites).serve_forever()


async def callbacks(url: str, count: int, quick_ack: bool) -> float:
    """Callbacks per second, ``count`` in a row on one connection (after one to open it)."""
    client = Http1Client(allow_private=True, quick_ack=quick_ack)
    headers = {"content-type": "application/json"}
    try:
        await client.post(url, BODY, headers)
        started = time.perf_counter()
        for _ in range(count):
            answer = await client.post(url, BODY, headers)
            assert answer.status == 200, answer
        return count / (time.perf_counter() - started)
    finally:
        await client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200, help="callbacks per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the application's process
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    run: Callable[[Coroutine[Any, Any, float]], float] = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        run = uvloop.run
    port = free_port()
    app = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        deadline = time.monotonic() + 10
        while True:  # until the application listens (bounded)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or app.poll() is not None:
                    raise SystemExit("the application did not start") from None
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mo"
        results: dict[bool, list[float]] = {False: [], True: []}
        for n in range(args.runs):
            for quick_ack in (False, True):
                rate = run(callbacks(url, args.count, quick_ack))
                results[quick_ack].append(rate)
                print(f"run {n + 1}: TCP_QUICKACK {'on ' if quick_ack else 'off'} {rate:8,.0f} callbacks/s")
        for quick_ack, rates in results.items():
            median = statistics.median(rates)
            print(
                f"median, TCP_QUICKACK {'on ' if quick_ack else 'off'}: {median:8,.0f} callbacks/s "
                f"({1000 / median:.2f} ms each, {args.count} in a row on one connection, {args.loop})"
            )
    finally:
        app.terminate()
        app.wait(10)


if __name__ == "__main__":
    main()
