"""Telling systemd how the gateway is: ``sd_notify`` spoken directly, with no library.

A unit with ``Type=notify`` gives the service a datagram socket in ``$NOTIFY_SOCKET`` (a path, or an
abstract-namespace name written with a leading ``@``). The gateway sends ``READY=1`` once it takes
traffic, ``STATUS=...`` lines for ``systemctl status``, ``STOPPING=1`` when it stops, and — when the unit
sets ``WatchdogSec=`` (systemd passes it as ``$WATCHDOG_USEC``, for the pid in ``$WATCHDOG_PID``) —
``WATCHDOG=1`` at half that interval. The pings are sent from the loop whose health they vouch for
(the event loop of a single process; the supervisor only while every worker's loop answers), so a loop
that stalls stops them and systemd restarts the service.

Without ``$NOTIFY_SOCKET`` (not under systemd, or another ``Type=``) every call does nothing.
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["Notifier"]

log = logging.getLogger("mogateway")


class Notifier:
    """The service manager's notification socket, read from the environment once."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_s = _watchdog_seconds(env)
        self._sock: socket.socket | None = None
        self._failed = False

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def ping_every_s(self) -> float | None:
        """How often to send ``WATCHDOG=1`` (half the watchdog's interval), None without a watchdog."""
        return None if self.watchdog_s is None or not self.enabled else self.watchdog_s / 2

    def send(self, *fields: str) -> bool:
        """Send ``KEY=value`` fields in one datagram; False when there is no socket or it failed (said
        once in the log, never raised: the gateway serves whether systemd hears it or not)."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(fields).encode(), self.address)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                log.warning(
                    "cannot notify the service manager at %s: %s", os.environ.get("NOTIFY_SOCKET"), exc
                )
            return False
        self._failed = False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def ping(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1", "STATUS=stopping")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _address(value: str) -> str | bytes | None:
    """The socket address ``$NOTIFY_SOCKET`` names: a file system path, or ``@name`` for the abstract
    namespace (a leading NUL byte). Anything else (empty, a vsock address) is not for us."""
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def _watchdog_seconds(env: dict[str, str] | os._Environ[str]) -> float | None:
    """``$WATCHDOG_USEC`` in seconds when it is meant for this process (``$WATCHDOG_PID`` unset or
    ours), else None."""
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and (not pid.isdigit() or int(pid) != os.getpid()):
        return None
    return int(usec) / 1_000_000
