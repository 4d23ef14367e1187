"""Run Kannel 1.4.5 (Debian ``kannel``: bearerbox + smsbox) against an SMSC and a callback URL.

    async with Kannel(smsc_ports=[...], url="http://127.0.0.1:8080/kannel", workdir=tmp, window=100) as k:
        ...                      # bearerbox is bound to each SMSC, smsbox is connected

The configuration is ``kannel.conf.in`` next to this file, filled in with free 127.0.0.1 ports and files
in ``workdir``. Both processes are started here and stopped by their pid (SIGTERM, then SIGKILL after a
bounded wait). Nothing is installed or left running.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from string import Template

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import free_port, start, stop, wait_port

__all__ = ["Kannel", "KannelMissing", "kannel_version"]

#: One ``group = smsc`` of the configuration: a transceiver bind to one simulator.
SMSC_GROUP = """\
group = smsc
smsc = smpp
smsc-id = sim{index}
host = 127.0.0.1
port = {port}
transceiver-mode = true
smsc-username = {system_id}
smsc-password = {smsc_password}
system-type = ""
# Same window as mogateway's bind (submit_sm awaiting a response); no throughput cap, like the bench's.
max-pending-submits = {window}
enquire-link-interval = 30
reconnect-delay = 1
"""

TEMPLATE = Path(__file__).with_name("kannel.conf.in")


class KannelMissing(RuntimeError):
    """bearerbox/smsbox are not installed (``apt-get install kannel``)."""


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    if found is None:
        raise KannelMissing(f"{name} not found: install the Debian package 'kannel' (apt-get install kannel)")
    return found


def kannel_version() -> str:
    """The version line bearerbox prints, e.g. "Kannel bearerbox version `1.4.5'."."""
    out = subprocess.run([_binary("bearerbox"), "--version"], capture_output=True, text=True, timeout=10)
    lines = (out.stdout + out.stderr).splitlines()
    return next((line.strip() for line in lines if "version" in line), "unknown")


class Kannel:
    """bearerbox + smsbox for one benchmark run."""

    def __init__(
        self,
        *,
        smsc_ports: list[int],
        url: str,
        workdir: Path,
        system_id: str = "bench",
        smsc_password: str = "bench",
        window: int = 100,
        max_pending_requests: int = 512,
        log_level: int = 2,
    ) -> None:
        self.workdir = workdir
        self.admin_port = free_port()
        self.smsbox_port = free_port()
        self.sendsms_port = free_port()
        self.password = secrets.token_hex(8)
        self.config = workdir / "kannel.conf"
        self.config.write_text(
            Template(TEMPLATE.read_text()).substitute(
                admin_port=self.admin_port,
                smsbox_port=self.smsbox_port,
                sendsms_port=self.sendsms_port,
                password=self.password,
                dir=workdir,
                log_level=log_level,
                smsc_groups="\n".join(
                    SMSC_GROUP.format(
                        index=index,
                        port=port,
                        system_id=system_id,
                        smsc_password=smsc_password,
                        window=window,
                    )
                    for index, port in enumerate(smsc_ports)
                ),
                max_pending=max_pending_requests,
                url=url,
            )
        )
        self.bearerbox: subprocess.Popen[bytes] | None = None
        self.smsbox: subprocess.Popen[bytes] | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in (self.bearerbox, self.smsbox) if p is not None]

    def status(self) -> str:
        """bearerbox's status page (text)."""
        url = f"http://127.0.0.1:{self.admin_port}/status.txt?password={self.password}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode("latin-1"))

    async def start(self, timeout: float = 30.0) -> Kannel:
        # -v 4: only panics on the console; the log files in workdir have the rest.
        self.bearerbox = start(
            [_binary("bearerbox"), "-v", "4", str(self.config)], log=self.workdir / "bearerbox.out"
        )
        await asyncio.to_thread(wait_port, self.smsbox_port, timeout)
        self.smsbox = start([_binary("smsbox"), "-v", "4", str(self.config)], log=self.workdir / "smsbox.out")
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                status = await asyncio.to_thread(self.status)
            except OSError:
                status = ""
            if "smsbox:" in status and "online" in status.split("SMSC connections", 1)[-1]:
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kannel not ready after {timeout} s; status:\n{status}\n{self.logs()}")
            await asyncio.sleep(0.2)

    def _check_alive(self) -> None:
        for name, proc in (("bearerbox", self.bearerbox), ("smsbox", self.smsbox)):
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}\n{self.logs()}")

    def logs(self, lines: int = 15) -> str:
        """The last lines of Kannel's log files (for error messages)."""
        out = []
        for name in ("bearerbox.out", "bearerbox.log", "smsbox.out", "smsbox.log"):
            path = self.workdir / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name}\n" + "\n".join(tail))
        return "\n".join(out)

    async def stop(self) -> None:
        """smsbox first, then bearerbox; each by its pid, SIGKILL after 10 s."""
        for proc in (self.smsbox, self.bearerbox):
            if proc is not None:
                await asyncio.to_thread(stop, proc)

    async def __aenter__(self) -> Kannel:
        try:
            return await self.start()
        except BaseException:
            await self.stop()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
