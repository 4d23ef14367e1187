"""``mogateway serve``: run the gateway (API, dispatcher, binds) until interrupted."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mogateway.cli.common import fail
from mogateway.cli.exit_codes import Exit

if TYPE_CHECKING:  # the server is imported when the command runs, not to list it (cli/__init__.py)
    from mogateway.config import Settings
    from mogateway.node import WorkerSeat

__all__ = ["register"]


async def _run(settings: Settings, seat: WorkerSeat | None = None, ready_fd: int = -1) -> int:
    """Run one gateway process: the whole gateway, or (with ``seat``) one of its workers, which tells
    the supervisor on ``ready_fd`` once it serves."""
    import asyncio

    _without_a_reloader()
    import uvicorn

    from mogateway.api.app import create_app
    from mogateway.api.server import Limits, connection_cap, raise_open_files_limit, server_config
    from mogateway.api.websocket_refusal import WebSocketRefusal
    from mogateway.cli.heap import settle_heap
    from mogateway.cli.supervisor import interpreter, listening_socket
    from mogateway.config import ConfigError
    from mogateway.core.ports import SecretKeyError
    from mogateway.node import Gateway

    open_files, before = raise_open_files_limit()
    cap = connection_cap(settings.max_connections, open_files)

    try:
        gateway = Gateway(settings, seat)
    except ConfigError as exc:
        fail(str(exc), Exit.USAGE)
    try:
        await gateway.start()
    except (ConfigError, SecretKeyError) as exc:
        await _quiet_stop(gateway)
        fail(str(exc), Exit.USAGE)
    except (OSError, sqlite3.Error, RuntimeError, ValueError, ImportError) as exc:
        await _quiet_stop(gateway)
        fail(f"cannot start: {exc}", Exit.FAILED)
    sockets = None
    if seat is not None:
        try:
            sockets = [listening_socket(settings.host, settings.port, reuse_port=True)]
        except OSError as exc:
            await _quiet_stop(gateway)
            fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}", Exit.FAILED)
    # Said once the gateway could start, so that a start that fails says only why.
    logging.getLogger("mogateway").log(
        logging.DEBUG if seat is not None and seat.index > 0 else logging.INFO,
        "open files limit %d%s; at most %d HTTP connections%s",
        open_files,
        f" (raised from {before})" if open_files != before else "",
        cap,
        f" (max_connections {settings.max_connections} kept to half the limit)"
        if cap < settings.max_connections
        else "",
    )
    limits = Limits(
        max_connections=cap,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        idle_timeout_s=settings.idle_timeout_s,
    )
    config = server_config(
        create_app(gateway, manage_lifecycle=False),
        host=settings.host,
        port=settings.port,
        limits=limits,
        trusted_proxies=settings.trusted_proxies,
        lifespan="off",
        ws=WebSocketRefusal,  # no WebSocket library loaded: a handshake gets the 403 it always got
        access_log=False,
        log_config=None,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    _keep_running_after_a_stop_signal(server)
    settle_heap()  # what start-up built lives as long as the process: out of the collector's way
    if seat is None:
        logging.getLogger("mogateway").info(
            "mogateway listening on http://%s:%d (journal %s, queue %s, %s)",
            settings.host,
            settings.port,
            settings.database,
            settings.queue,
            interpreter(),
        )
    if ready_fd >= 0:
        announce = asyncio.create_task(_announce(server, ready_fd))
    else:
        announce = asyncio.create_task(_notify_systemd(server, settings))
    try:
        await server.serve(sockets=sockets)
    finally:
        announce.cancel()
        await gateway.stop()
    return 0 if server.started else 1


def _without_a_reloader() -> None:
    """Keep watchfiles out of a process that serves (about 0.9 MiB each).

    Importing anything of uvicorn runs its package's ``__init__``, which imports ``uvicorn.main`` (its
    command line) and with it its reloaders, the first of which imports watchfiles when it is installed
    (``uvicorn[standard]`` installs it). The gateway never reloads. Python refuses to import a module
    whose ``sys.modules`` entry is None, and uvicorn then falls back to its stat-based reloader, which
    imports nothing (and is never run either). ``uvicorn.main`` imports click unconditionally: click is
    loaded whatever is done here, short of replacing uvicorn's package ``__init__``. Only before uvicorn
    is imported, and only where nothing loaded watchfiles already."""
    if "uvicorn" not in sys.modules:
        sys.modules.setdefault("watchfiles", None)  # type: ignore[arg-type]  # None: "not installed"


#: A worker's heartbeat to its supervisor, from its event loop (supervisor.py: the systemd watchdog).
HEARTBEAT_S = 1.0


def _keep_running_after_a_stop_signal(server: Any) -> None:
    """uvicorn (0.29+) raises the SIGTERM/SIGINT it caught again once it has shut down, which ends the
    process before the gateway stops: callbacks in flight were cut off instead of drained, binds never
    unbound. Forget the signal: the gateway's own stop follows, and the process exits when it is done."""
    capture = server.capture_signals

    @contextlib.contextmanager
    def capture_and_forget() -> Iterator[None]:
        with capture():
            try:
                yield
            finally:
                server._captured_signals.clear()

    server.capture_signals = capture_and_forget


async def _announce(server: Any, ready_fd: int) -> None:
    """Tell the supervisor this worker serves (it waits for every worker before it says so), then beat
    on the same pipe every :data:`HEARTBEAT_S` from the event loop: a loop that stalls stops beating."""
    import asyncio

    try:
        while not server.started:
            await asyncio.sleep(0.01)
        os.write(ready_fd, b"ready\n")
        os.set_blocking(ready_fd, False)  # a supervisor that stalls must not stall this loop
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                os.write(ready_fd, b".")
            except BlockingIOError:
                pass  # the supervisor has not read for a while: the beats it has are enough
            except BrokenPipeError:
                return  # the supervisor is gone (this worker is told to stop)
    finally:
        os.close(ready_fd)


async def _notify_systemd(server: Any, settings: Settings) -> None:
    """One process serving on its own: ``READY=1`` to systemd once it takes traffic, ``WATCHDOG=1`` from
    this event loop, ``STOPPING=1`` once the server begins to stop (edges.systemd); nothing when not
    started by systemd."""
    import asyncio

    from mogateway.edges.systemd import Notifier

    notifier = Notifier()
    if not notifier.enabled:
        return
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        notifier.ready(f"serving on {settings.host}:{settings.port}")
        every = notifier.ping_every_s
        pinged = 0.0
        while not server.should_exit:
            now = time.monotonic()
            if every is not None and now - pinged >= every:
                notifier.ping()
                pinged = now
            await asyncio.sleep(0.1)
        # uvicorn ends the process with the signal it caught once it has shut down: say it now
        notifier.stopping()
    finally:
        notifier.close()


async def _quiet_stop(gateway: Any) -> None:
    try:
        await gateway.stop()
    except Exception:
        pass


def _worker_count(settings: Settings, requested: int | None) -> int:
    """How many worker processes to run: as asked (option, then setting), 0 meaning one per core; one
    where workers cannot share the journal (an in-memory database) or the port (not Linux)."""
    from mogateway.cli.supervisor import worker_count

    count = worker_count(requested if requested is not None else settings.workers)
    if settings.database in (":memory:", "sqlite://:memory:") or not sys.platform.startswith("linux"):
        return 1
    return count


def _hold_journal(settings: Settings) -> None:
    """Hold the SQLite journal's lock for as long as this process lives (``edges.journal_hold``), so
    that ``mogateway restore`` refuses to replace it under the gateway. The descriptor is never closed:
    the kernel lets go when the process ends, however it ends."""
    from mogateway.edges.journal_hold import HeldElsewhere, JournalHold, sqlite_path

    path = sqlite_path(settings.database)
    if path is None:
        return
    try:
        JournalHold(path).take(exclusive=False)
    except HeldElsewhere as exc:
        fail(f"cannot start: {exc}", Exit.FAILED)
    except OSError as exc:
        fail(f"cannot start: the journal's lock file {path}-serve.lock: {exc.strerror or exc}", Exit.FAILED)


def _parse_seat(value: str, count: int) -> WorkerSeat:
    from mogateway.node import WorkerSeat

    index, _, directory = value.partition(":")
    if not index.isdigit() or not directory or not 0 <= int(index) < count:
        fail(f"--worker-seat {value!r} is not <index>:<directory> for {count} workers", Exit.USAGE)
    return WorkerSeat(int(index), count, directory)


def _event_loop_runner() -> Any:
    """uvloop's ``run`` where it is installed, asyncio's otherwise: for the processes that serve (the
    supervisor runs no event loop of uvloop's, and does not load it)."""
    try:
        import uvloop

        return uvloop.run
    except ImportError:
        import asyncio

        return asyncio.run


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        config: Path | None = typer.Option(None, "--config", "-c", help="TOML settings file."),
        host: str | None = typer.Option(None, "--host", help="Address to listen on (default 127.0.0.1)."),
        port: int | None = typer.Option(None, "--port", help="Port to listen on (default 8080)."),
        workers: int | None = typer.Option(
            None,
            "--workers",
            "-w",
            min=0,
            max=256,
            help="Worker processes (default: the workers setting; 0 = one per core).",
        ),
        worker_seat: str | None = typer.Option(None, "--worker-seat", hidden=True),
        ready_fd: int = typer.Option(-1, "--ready-fd", hidden=True),
    ) -> None:
        """Run the gateway on its embedded default (SQLite journal, in-process queue) or as configured."""
        from mogateway.config import ConfigError, load_settings
        from mogateway.logs import setup_logging
        from mogateway.service.private_files import serve_umask

        serve_umask()  # what it writes (journal, exports) is its user's alone (service/private_files.py)
        try:
            settings = load_settings(config, host=host, port=port)
        except ConfigError as exc:
            fail(str(exc), Exit.USAGE)
        if worker_seat is not None:  # one worker, started by the supervisor
            from mogateway.cli.supervisor import die_with_supervisor

            die_with_supervisor()
            seat = _parse_seat(worker_seat, workers or 1)
            setup_logging(settings.log_level, settings.log_format, worker=f"w{seat.index}")
            raise typer.Exit(_event_loop_runner()(_run(settings, seat, ready_fd)))
        setup_logging(settings.log_level, settings.log_format)
        _hold_journal(settings)
        count = _worker_count(settings, workers)
        if count == 1:
            raise typer.Exit(_event_loop_runner()(_run(settings)))
        from mogateway.cli.supervisor import SupervisorError, supervise

        argv: list[str] = []
        if config is not None:
            argv += ["--config", str(config)]
        if host is not None:
            argv += ["--host", host]
        if port is not None:
            argv += ["--port", str(port)]
        try:
            code = supervise(settings, count, argv)
        except SupervisorError as exc:
            if str(exc):
                fail(str(exc), exc.code)
            raise typer.Exit(exc.code) from None
        raise typer.Exit(code)
