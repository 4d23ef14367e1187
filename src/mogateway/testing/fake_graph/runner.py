"""Running the fake Graph API: in a background thread (tests) or in the foreground (the CLI)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

from mogateway.testing.fake_graph.fixtures import default_fixtures
from mogateway.testing.fake_graph.server import create_app


class FakeGraphServer:
    """The fake on ``127.0.0.1`` in its own thread and event loop; use as a context manager.

    ``url`` is the base to pass as ``--graph-url`` (``https://`` with an ``ssl_context``: TLS, as the
    real Graph API).
    """

    def __init__(
        self,
        fixtures: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.fixtures = fixtures if fixtures is not None else default_fixtures()
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https://`` with TLS)."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> FakeGraphServer:
        """Start serving; returns once the socket listens."""
        self._thread = threading.Thread(target=self._serve, name="fake-graph", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"fake Graph API did not start: {self._error}")
        return self

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        assert self._runner is not None
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    async def _start_site(self) -> None:
        self._runner = web.AppRunner(create_app(self.fixtures), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        if self.port == 0:
            # aiohttp does not expose the bound port; the site's server knows it.
            sockets = getattr(site._server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> FakeGraphServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    fixtures: dict[str, Any],
    host: str,
    port: int,
    on_ready: Callable[[str], None],
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Serve in the foreground until Ctrl-C (``mogateway waba fake-graph``); TLS with ``ssl_context``."""

    async def main() -> None:
        runner = web.AppRunner(create_app(fixtures), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        scheme = "https" if ssl_context is not None else "http"
        on_ready(f"{scheme}://{host}:{port}")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
