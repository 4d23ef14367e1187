"""Run a command as the deploy/ systemd unit confines the gateway, without systemd: what the unit's
``PrivateUsers=yes``, ``ProcSubset=pid`` (with ``ProtectProc=invisible``) and
``SystemCallFilter=~@privileged @resources`` do, done by hand, so a test sees whether the gateway still
serves under them.

* ``PrivateUsers=``: a user namespace of its own, where only the user it runs as is mapped (every other
  user's files show as ``nobody``) — ``unshare --user --map-root-user``.
* ``ProcSubset=pid``: a ``/proc`` showing processes only (no ``/proc/meminfo``, ``/proc/sys``...),
  mounted with ``subset=pid,hidepid=invisible`` in mount and PID namespaces of its own.
* ``SystemCallFilter=~@privileged @resources``: a seccomp filter, made with libseccomp through ctypes
  (the library is installed, its headers need not be), answering ``EPERM`` to every system call of
  those groups as ``systemd-analyze syscall-filter`` lists them (``SystemCallErrorNumber=EPERM``), and
  loaded just before the command is executed (filters survive ``exec``).

Run as ``python confined.py <group>... -- <command>...``: this file is also the launcher.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import subprocess
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = 0x00050000


def syscalls_of(group: str, seen: set[str] | None = None) -> set[str]:
    """Every system call of a ``@group``, its nested groups expanded (``systemd-analyze syscall-filter``)."""
    seen = set() if seen is None else seen
    listed = subprocess.run(
        ["systemd-analyze", "syscall-filter", group], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    names: set[str] = set()
    for line in listed.splitlines()[1:]:
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        if item.startswith("@"):
            if item not in seen:
                seen.add(item)
                names |= syscalls_of(item, seen)
        else:
            names.add(item)
    return names


def load_filter(denied: set[str]) -> int:
    """Load a seccomp filter answering EPERM to ``denied`` (names this kernel does not know are
    skipped); how many were denied."""
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    count = 0
    for name in sorted(denied):
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            continue
        if lib.seccomp_rule_add(ctx, SCMP_ACT_ERRNO | errno.EPERM, number, 0) != 0:
            continue  # a pseudo-syscall of another architecture
        count += 1
    if lib.seccomp_load(ctx) != 0:
        raise OSError("seccomp_load failed")
    return count


def confined_command(groups: list[str], command: list[str]) -> list[str]:
    """``command`` run in its own user, mount and PID namespaces with a process-only ``/proc``, under a
    seccomp filter denying ``groups``."""
    mount_proc = 'mount -t proc -o subset=pid,hidepid=invisible proc /proc && exec "$0" "$@"'
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is missing"
    return [
        *(unshare, "--user", "--map-root-user", "--mount", "--pid", "--fork", "--"),
        *("sh", "-c", mount_proc),
        *(sys.executable, os.path.abspath(__file__), *groups, "--", *command),
    ]


if __name__ == "__main__":
    split = sys.argv.index("--")
    wanted, argv = sys.argv[1:split], sys.argv[split + 1 :]
    denied: set[str] = set()
    for group in wanted:
        denied |= syscalls_of(group)
    load_filter(denied)
    os.execvp(argv[0], argv)
