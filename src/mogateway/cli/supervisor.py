"""``mogateway serve --workers N``: one gateway as N worker processes, and the process that keeps them.

Python runs one thread of Python at a time, so one process uses one core. The supervisor runs N copies
of the gateway (``mogateway serve`` with a worker seat, see ``mogateway.node``) that share the work:

* **HTTP**: every worker listens on the one port (``SO_REUSEPORT``); the kernel spreads connections
  over them.
* **SMPP**: bind ``j`` is held by worker ``j mod N`` (``core.workers``).
* **Journal**: on the embedded default all write the one SQLite file, taking turns per group commit;
  each MO is dispatched by the worker that owns it and the others tell it about the MOs they store
  for it. With PostgreSQL and JetStream the workers are simply N nodes of the cluster.

Before it starts the workers, the supervisor opens the journal once (creating or upgrading it, and
generating the tokens on a first start), checks that the port is free, and gives every unfinished MO
to the worker the plan names now (the number of workers or a client's cap may have changed since the
last run). For that it loads the settings, the journal and the owner rule only
(``edges.configured_journal``, ``edges.numbering_settings``, ``edges.workers.owners``), never the node
it does not run: no web stack, dispatcher, binds or HTTP clients (``tests/cli/test_serve_imports.py``).
It then starts the workers and waits until each one serves — if one fails while starting,
it stops the others and exits with that worker's exit code, its reason already said on stderr.

The workers' sockets and their journal lock live in a directory of their own under the system's temporary
directory, which the supervisor holds an ``flock`` on while it lives: the kernel lets go of it however
the supervisor ends, so a start removes the directories no live supervisor holds (one SIGKILLed, or
whose machine lost power), and crashes do not pile them up.

Under systemd (``Type=notify``, ``edges.systemd``) the supervisor says ``READY=1`` once every worker
serves. Each worker beats on its ready pipe every second from its event loop; the supervisor sends the
watchdog's ``WATCHDOG=1`` only while every serving worker beat within :data:`STALE_S`, so a worker whose
loop stalls stops the pings and systemd restarts the gateway after ``WatchdogSec``.

While running it starts a worker again when one exits (after a pause that grows if it keeps failing
straight away); the restarted worker recovers the MOs it owns. SIGTERM or SIGINT stops every worker
the ordinary way (they finish what is in flight for a few seconds) and then the supervisor. The
workers ask the kernel to stop them if the supervisor dies (Linux), so none is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mogateway import compiled
from mogateway.cli.exit_codes import Exit
from mogateway.config import Settings
from mogateway.core.clients import RoutingTable
from mogateway.core.workers import WorkerPlan
from mogateway.edges.systemd import Notifier

__all__ = [
    "SupervisorError",
    "interpreter",
    "listening_socket",
    "supervise",
    "sweep_worker_directories",
    "worker_count",
]

log = logging.getLogger("mogateway")

#: How long a worker has to start serving.
START_TIMEOUT_S = 120.0
#: How long the workers have to stop after SIGTERM before they are killed.
STOP_TIMEOUT_S = 20.0
#: A worker that ran at least this long before it exited is started again at once.
STEADY_S = 10.0
#: A worker whose loop has not beaten (cli/serve.py, every second) for this long is stalled: the
#: supervisor stops vouching for the gateway to systemd's watchdog.
STALE_S = 5.0
#: The workers' directory: its name's prefix, and the file its supervisor holds locked while it lives.
DIRECTORY_PREFIX = "mogateway-workers-"
HELD_BY = "supervisor.lock"


class SupervisorError(Exception):
    """The gateway cannot start; the text says why (empty: a worker said it already), ``code`` is the
    exit code."""

    def __init__(self, text: str, code: int) -> None:
        super().__init__(text)
        self.code = code


def worker_count(configured: int) -> int:
    """The number of workers: ``configured``, or one per core for 0."""
    if configured > 0:
        return configured
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def interpreter() -> str:
    """The Python this process runs on, for the start-up line: its version and the interpreter's file
    (a virtual environment's ``python`` resolved to the one it links to), and whether the pure layers
    run compiled (``mogateway.compiled``). How that interpreter was built changes the CPU per MO by up to
    a quarter (docs/scaling.md, "The Python it runs on"); the compiled layers take about a tenth off."""
    return f"Python {platform.python_version()} {os.path.realpath(sys.executable)}, {compiled.STATUS}"


def listening_socket(host: str, port: int, *, reuse_port: bool, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port``, shared with the other workers when ``reuse_port``."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


# ------------------------------------------------------------------------------------------ before


async def _prepare(settings: Settings, count: int) -> tuple[int, int]:
    """Open the journal once (schema, tokens) and give each unfinished MO to the worker the plan names.
    Returns (unfinished MOs, how many changed worker)."""
    from mogateway.edges.configured_journal import load_tokens, open_journal
    from mogateway.edges.numbering_settings import sender_resolver_for
    from mogateway.edges.workers.owners import owner_rule

    sender_resolver_for(settings)  # the files a gateway checks when it is made: said once, here
    journal = open_journal(settings)
    await journal.open()
    try:
        await load_tokens(settings, journal)
        if settings.queue != "local":
            return 0, 0  # a shared queue dispatches: no owners
        plan = WorkerPlan(count, len(settings.smpp.binds))
        owner_of = owner_rule(plan, settings, RoutingTable(await journal.list_clients()).route)
        total = moved = 0
        after = ""
        while True:
            records = await journal.unfinished(1000, after=after)
            if not records:
                break
            changes: dict[str, int] = {}
            for r in records:
                owner = owner_of(r.message)
                if owner != r.owner:
                    changes[r.message.id] = owner
            await journal.reassign(changes)
            total += len(records)
            moved += len(changes)
            after = records[-1].id
        return total, moved
    finally:
        await journal.close()


def _check_port(settings: Settings) -> None:
    """Fail now, in one line, when something else listens on the port (a second gateway included:
    without SO_REUSEPORT this bind fails on any listener)."""
    try:
        sock = listening_socket(settings.host, settings.port, reuse_port=False, backlog=1)
    except OSError as exc:
        raise SupervisorError(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}", Exit.FAILED
        ) from None
    sock.close()


# ------------------------------------------------------------------------------------------ running


def _worker_environment() -> dict[str, str]:
    """The workers run as this process does (``mogateway.compiled``): on the source when it does, even if a
    build (started in the background by ``scripts/serve.sh``) finished since it started, so that the
    start-up line it printed stays true for every worker, restarted ones included."""
    environment = dict(os.environ)
    if not compiled.COMPILED:
        environment["MOGATEWAY_PURE"] = "1"
    return environment


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes] | None = None
    ready_fd: int = -1
    ready: bool = False
    beat_at: float = 0.0
    announced: bool = False
    stalled: bool = False
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0
    exit_codes: list[int] = field(default_factory=list)


class _Supervisor:
    def __init__(self, settings: Settings, count: int, argv: Sequence[str], directory: str) -> None:
        self.settings = settings
        self.count = count
        self.argv = list(argv)
        self.directory = directory
        self.workers = [_Worker(i) for i in range(count)]
        self.stopping = False

    def spawn(self, worker: _Worker, *, again: bool = True) -> None:
        read_fd, write_fd = os.pipe()
        command = [
            sys.executable,
            "-m",
            "mogateway",
            "serve",
            *self.argv,
            "--workers",
            str(self.count),
            "--worker-seat",
            f"{worker.index}:{self.directory}",
            "--ready-fd",
            str(write_fd),
        ]
        try:
            worker.process = subprocess.Popen(command, pass_fds=(write_fd,), env=_worker_environment())
        finally:
            os.close(write_fd)
        worker.ready_fd = read_fd
        worker.ready = False
        worker.announced = not again
        worker.stalled = False
        worker.started_at = time.monotonic()

    def _read_ready(self, worker: _Worker) -> None:
        """The worker wrote on its pipe ("ready" once it serves, then a beat a second from its event
        loop) or closed it (it exited)."""
        try:
            data = os.read(worker.ready_fd, 4096)
        except OSError:
            data = b""
        if not data:
            os.close(worker.ready_fd)
            worker.ready_fd = -1
            return
        if b"ready" in data:
            worker.ready = True
        worker.beat_at = time.monotonic()

    def _read_beats(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the workers' pipes and read what they wrote."""
        fds = {w.ready_fd: w for w in self.workers if w.ready_fd >= 0}
        if not fds:
            time.sleep(timeout)
            return
        with contextlib.suppress(InterruptedError):
            readable, _, _ = select.select(list(fds), [], [], timeout)
            for fd in readable:
                self._read_ready(fds[fd])

    def loops_answer(self) -> bool:
        """Whether every serving worker's event loop beat lately (one starting again is not counted:
        the supervisor restarts it itself). Says once in the log when one stops and starts again."""
        now = time.monotonic()
        answering = True
        for worker in self.workers:
            if worker.process is None or not worker.ready:
                continue
            stalled = now - worker.beat_at > STALE_S
            if stalled != worker.stalled:
                worker.stalled = stalled
                if stalled:
                    log.warning(
                        "worker %d (pid %d): its event loop has not answered for %.0f s",
                        worker.index,
                        worker.process.pid,
                        now - worker.beat_at,
                    )
                else:
                    log.info("worker %d answers again", worker.index)
            answering = answering and not stalled
        return answering

    def start_all(self) -> None:
        """Start every worker and wait until each serves (raises SupervisorError if one cannot)."""
        for worker in self.workers:
            self.spawn(worker, again=False)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(w.ready for w in self.workers):
            if self.stopping:
                raise SupervisorError("", Exit.OK)
            for worker in self.workers:
                assert worker.process is not None
                code = worker.process.poll()
                if code is not None and not worker.ready:
                    if worker.ready_fd >= 0:
                        self._read_ready(worker)
                    if code > 0:
                        raise SupervisorError("", code)  # its reason is on stderr already
                    raise SupervisorError(f"worker {worker.index} was killed while starting", Exit.FAILED)
            waiting = [w.ready_fd for w in self.workers if w.ready_fd >= 0 and not w.ready]
            if time.monotonic() > deadline:
                raise SupervisorError(f"the workers did not start within {START_TIMEOUT_S:g} s", Exit.FAILED)
            if waiting:
                with contextlib.suppress(InterruptedError):
                    readable, _, _ = select.select(waiting, [], [], 0.2)
                    for worker in self.workers:
                        if worker.ready_fd in readable:
                            self._read_ready(worker)
            else:
                time.sleep(0.05)

    def watch(self, notifier: Notifier | None = None) -> None:
        """Start again the workers that exit, until asked to stop; ping systemd's watchdog (when it has
        one) while every worker's loop answers."""
        every = notifier.ping_every_s if notifier is not None else None
        pinged = 0.0
        while not self.stopping:
            now = time.monotonic()
            if notifier is not None and every is not None and now - pinged >= every and self.loops_answer():
                notifier.ping()
                pinged = now
            for worker in self.workers:
                process = worker.process
                if process is None:
                    if now >= worker.restart_at:
                        self.spawn(worker)
                    continue
                code = process.poll()
                if code is None:
                    if worker.ready and not worker.announced:
                        worker.announced = True
                        log.info("worker %d serves again (pid %d)", worker.index, process.pid)
                    continue
                if worker.ready_fd >= 0:
                    os.close(worker.ready_fd)
                    worker.ready_fd = -1
                lived = now - worker.started_at
                worker.failures = 0 if lived >= STEADY_S else worker.failures + 1
                pause = 0.0 if worker.failures == 0 else min(30.0, 0.5 * 2 ** (worker.failures - 1))
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                log.warning(
                    "worker %d stopped (%s) after %.1f s; starting it again%s",
                    worker.index,
                    how,
                    lived,
                    f" in {pause:g} s" if pause else "",
                )
                worker.process = None
                worker.restart_at = now + pause
            self._read_beats(0.1)

    def stop_all(self) -> None:
        running = [w.process for w in self.workers if w.process is not None and w.process.poll() is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not stop in %g s; killing it", process.pid, STOP_TIMEOUT_S)
                process.kill()
                process.wait()
        for worker in self.workers:
            if worker.ready_fd >= 0:
                os.close(worker.ready_fd)
                worker.ready_fd = -1


def supervise(settings: Settings, count: int, argv: Sequence[str]) -> int:
    """Run the gateway as ``count`` workers until SIGTERM or SIGINT; the exit code.

    ``argv``: the ``serve`` options to give every worker (config file, host, port). Raises
    :class:`SupervisorError` when the gateway cannot start.
    """
    from mogateway.config import ConfigError
    from mogateway.core.ports import SecretKeyError

    _check_port(settings)
    try:
        total, moved = asyncio.run(_prepare(settings, count))
    except (ConfigError, SecretKeyError) as exc:
        raise SupervisorError(str(exc), Exit.USAGE) from None
    except Exception as exc:  # the journal cannot be opened: one line, not a traceback
        raise SupervisorError(f"cannot start: {exc}", Exit.FAILED) from None
    if moved:
        log.info("%d of %d unfinished MOs given to another worker (%d workers now)", moved, total, count)
    swept = sweep_worker_directories(tempfile.gettempdir())
    if swept:
        log.info("removed %d workers' directories left by supervisors that are gone", swept)
    directory, held = _hold_worker_directory()
    supervisor = _Supervisor(settings, count, argv, directory)
    notifier = Notifier()

    def stop(signum: int, _frame: object) -> None:
        supervisor.stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            supervisor.start_all()
        except SupervisorError:
            supervisor.stop_all()
            raise
        log.info(
            "mogateway listening on http://%s:%d (%d workers, journal %s, queue %s, %s)",
            settings.host,
            settings.port,
            count,
            settings.database,
            settings.queue,
            interpreter(),
        )
        notifier.ready(f"serving on {settings.host}:{settings.port} with {count} workers")
        supervisor.watch(notifier)
        notifier.stopping()
        log.info("stopping %d workers", count)
        supervisor.stop_all()
        return Exit.OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        notifier.close()
        shutil.rmtree(directory, ignore_errors=True)
        os.close(held)


def _hold_worker_directory() -> tuple[str, int]:
    """A new directory for the workers' sockets and lock, and the descriptor of its :data:`HELD_BY`
    file, locked for as long as this process lives (closing it, or dying, lets go)."""
    directory = tempfile.mkdtemp(prefix=DIRECTORY_PREFIX)
    taking = os.path.join(directory, HELD_BY + ".new")
    fd = os.open(taking, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(taking, os.path.join(directory, HELD_BY))  # seen by a sweep only once locked
    return directory, fd


def sweep_worker_directories(root: str) -> int:
    """Remove the workers' directories under ``root`` whose supervisor is gone: their :data:`HELD_BY`
    file can be locked. One without that file is left alone (being created, or made by a mogateway
    from before the file). How many were removed."""
    removed = 0
    candidates: list[str] = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        candidates = [e.path for e in entries if e.name.startswith(DIRECTORY_PREFIX) and e.is_dir()]
    for directory in candidates:
        try:
            fd = os.open(os.path.join(directory, HELD_BY), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its supervisor lives
        else:
            shutil.rmtree(directory, ignore_errors=True)
            removed += 1
        finally:
            os.close(fd)
    return removed


def die_with_supervisor() -> None:
    """Ask the kernel to send this worker SIGTERM when its supervisor dies (Linux), and exit now if it
    already has."""
    parent = os.getppid()
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)
