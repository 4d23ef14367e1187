"""The gateway under test in the crash campaign: a ``mogateway serve`` process on one journal, started
again after every kill, driven only through its settings file, its signals, its HTTP APIs and its log.
"""

from __future__ import annotations

import asyncio
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

import aiohttp
import orjson
from _common import free_port

__all__ = [
    "ADMIN",
    "APP_SECRET",
    "BUSINESS_NUMBER",
    "INGEST",
    "PHONE_NUMBER_ID",
    "SHORTCODE",
    "SYSTEM_ID",
    "GatewayProcess",
    "write_config",
]

ADMIN = "chaos-admin-token-0123456789"
INGEST = "chaos-ingest-token-0123456789"
SHORTCODE = "56767"
#: The SMPP account the gateway binds with, and the simulator's outbox it drains.
SYSTEM_ID = "chaos"
#: The WhatsApp number the gateway serves (the fake Graph API's default cloud number) and the app secret
#: Meta's webhooks are signed with.
PHONE_NUMBER_ID = "106540352242922"
BUSINESS_NUMBER = "919876543210"
APP_SECRET = "chaos-app-secret-0123456789"
_RECOVERY_LINE = re.compile(r"^recovery: (\d+) unfinished")


def write_config(workdir: Path, smsc_port: int, binds: int = 1, graph_url: str | None = None) -> Path:
    """The gateway's TOML settings: the journal in ``workdir``, fixed tokens, ``binds`` binds to the
    simulator (all as :data:`SYSTEM_ID`: it writes each MO to whichever of them has room; with
    ``mogateway serve``'s worker per core, a bind each), info logs as JSON (the log reply channel's lines
    and the recovery count are read from them). With ``graph_url``, a ``[whatsapp]`` table serving
    :data:`BUSINESS_NUMBER` with that (fake) Graph API as the reply target."""
    path = workdir / "gateway.toml"
    sections = "".join(
        f"""
[[smpp.binds]]
name = "{"chaos" if binds == 1 else f"chaos{n}"}"
host = "127.0.0.1"
port = {smsc_port}
system_id = "{SYSTEM_ID}"
password = "{SYSTEM_ID}"
mode = "transceiver"
operator = "airtel"
circle = "delhi"
throughput = 1000000
window = 100
enquire_link_s = 5
"""
        for n in range(binds)
    )
    if graph_url is not None:
        sections += f"""
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "chaos-verify-token"
graph_url = "{graph_url}"

[[whatsapp.numbers]]
phone_number_id = "{PHONE_NUMBER_ID}"
display_phone_number = "{BUSINESS_NUMBER}"
access_token = "rehearsal-token"
"""
    path.write_text(
        f"""database = "{workdir / "journal.db"}"
admin_token = "{ADMIN}"
ingest_token = "{INGEST}"
allow_private_callbacks = true
log_level = "info"
log_format = "json"
{sections}"""
    )
    return path


def _wait_group_gone(group: int, timeout: float) -> None:
    """Wait until no live process (zombies aside) is left in process group ``group``: the killed
    workers have let go of the journal's lock and their sockets."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                alive = True
                break
        if not alive:
            return
        time.sleep(0.01)


class GatewayProcess:
    """``mogateway serve --config`` on a fresh port at every start; each start logs to its own file."""

    def __init__(self, workdir: Path, config: Path, gateway_src: str = "") -> None:
        self.workdir = workdir
        self.config = config
        self.gateway_src = gateway_src
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.starts = 0
        self.started_at = 0.0
        self.ready = False

    def log_path(self, number: int) -> Path:
        return self.workdir / f"gateway-{number}.log"

    def start(self) -> None:
        self.starts += 1
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
        if self.gateway_src:
            env["PYTHONPATH"] = str(Path(self.gateway_src).resolve())
        command = [sys.executable, "-m", "mogateway", "serve", "--config", str(self.config)]
        command.extend(("--host", "127.0.0.1", "--port", str(port)))
        with self.log_path(self.starts).open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a kill reaches every worker at once
            )
        self.url = f"http://127.0.0.1:{port}"
        self.started_at = time.monotonic()
        self.ready = False

    async def wait_ready(self, session: aiohttp.ClientSession, timeout: float = 60.0) -> float:
        """Wait until /healthz answers; the seconds since the start."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"mogateway serve exited with {self.process.returncode}; see {self.log_path(self.starts)}"
                )
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                async with session.get(self.url + "/healthz", timeout=aiohttp.ClientTimeout(total=1)) as r:
                    if r.status == 200:
                        self.ready = True
                        return time.monotonic() - self.started_at
            if time.monotonic() > deadline:
                raise RuntimeError(f"mogateway serve did not answer within {timeout} s")
            await asyncio.sleep(0.02)

    def _signal(self, signum: int, *, group: bool = True) -> bool:
        """Send ``signum`` to the supervisor and its workers (``group``), or to the supervisor alone."""
        process = self.process
        if process is None or process.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, signum)
            else:
                os.kill(process.pid, signum)
        return True

    def freeze(self) -> None:
        """SIGSTOP: every thread stops where it is (a stall the gateway cannot notice)."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    async def kill(self) -> None:
        """SIGKILL to the process group: no shutdown code runs in the supervisor or any worker, as in a
        power cut of the process."""
        if self._signal(signal.SIGKILL):
            assert self.process is not None
            await asyncio.to_thread(self.process.wait, 30)
            await asyncio.to_thread(_wait_group_gone, self.process.pid, 30.0)

    async def stop(self) -> None:
        """SIGTERM by pid and wait (a graceful stop); SIGKILL if it does not stop within 20 s."""
        self.thaw()  # a stopped process would hold the SIGTERM until then
        if not self._signal(signal.SIGTERM, group=False):  # the supervisor stops its workers
            return
        assert self.process is not None
        try:
            await asyncio.to_thread(self.process.wait, 20)
        except subprocess.TimeoutExpired:
            await self.kill()

    async def admin(self, session: aiohttp.ClientSession, path: str) -> Any:
        """GET an admin API path; the parsed JSON (RuntimeError on any status but 200)."""
        async with session.get(
            self.url + path,
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: {resp.status} {body[:200]!r}")
            return orjson.loads(body)

    async def register_client(
        self, session: aiohttp.ClientSession, callback: str, concurrency: int, whatsapp: bool = False
    ) -> None:
        body = {
            "name": "chaos",
            "shortcodes": [SHORTCODE],
            "whatsapp_numbers": [BUSINESS_NUMBER] if whatsapp else [],
            "callback_url": callback,
            "max_concurrency": concurrency,
            "timeout_s": 30,
        }
        async with session.post(
            self.url + "/v1/clients", json=body, headers={"authorization": f"Bearer {ADMIN}"}
        ) as resp:
            if resp.status != 201:
                raise RuntimeError(f"client registration failed: {resp.status} {await resp.text()}")

    def log_records(self, number: int | None = None) -> Iterator[dict[str, Any]]:
        """The JSON log records of start ``number`` (default: every start); a line cut by a kill is
        skipped."""
        numbers = range(1, self.starts + 1) if number is None else (number,)
        for n in numbers:
            path = self.log_path(n)
            if not path.exists():
                continue
            for raw in path.read_bytes().splitlines():
                if raw.startswith(b"{"):
                    with contextlib.suppress(orjson.JSONDecodeError):
                        yield orjson.loads(raw)

    def all_serving(self, number: int) -> bool:
        """Whether start ``number``'s supervisor said every worker serves (each recovers before it
        serves, so every share of :meth:`recovered` is logged by then; /healthz answers from the first
        worker that serves)."""
        return any(
            str(record.get("msg", "")).startswith("mogateway listening on")
            for record in self.log_records(number)
        )

    def recovered(self, number: int) -> int | None:
        """How many unfinished MOs start ``number`` queued again, over all its workers (each logs its
        own share); None: it logged no recovery."""
        shares = [
            int(found.group(1))
            for record in self.log_records(number)
            if (found := _RECOVERY_LINE.match(str(record.get("msg", ""))))
        ]
        return sum(shares) if shares else None
