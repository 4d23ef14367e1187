"""Build the pure layers of mogateway with mypyc, in place: extension modules beside their source.

    .venv/bin/python scripts/compile.py               # build now (scripts/test.sh, via setup.sh)
    .venv/bin/python scripts/compile.py --require     # a build that cannot be made is an error (CI)
    .venv/bin/python scripts/compile.py --background  # build after this returns (scripts/serve.sh)

mypyc compiles the very source the pure-Python fallback is (``core/``, ``smpp/`` but four modules, the
journal's batch writes and row shapes, the HTTP/1.1 client): about a tenth less CPU per MO
(docs/benchmarks.md §0.15). The build runs in a temporary copy of ``src/``; then the extension modules
are moved beside their sources (each by a rename, so a running gateway keeps the files it loaded) and
``src/mogateway/compiled.json`` records the digest of every source built. ``mogateway.compiled`` runs
them only while every digest still matches, and the source otherwise — so editing a module and
running it never runs an old build of it. Nothing is done when the build is up to date.

One build at a time: a build holds a lock on ``src/mogateway/.compile.lock`` from its check to its
manifest, and a second waits for it (then finds it up to date). ``--background`` is what a first
``scripts/serve.sh`` runs, so that a newcomer's first start does not wait about 100 s for the build: it
returns at once, saying whether the build is up to date, already running, or started; the build then
runs detached, at the lowest CPU and I/O priorities (nice 19, ``ionice -c 3`` where there is one),
logging to ``compile.log`` in the virtual environment, and begins only :data:`BACKGROUND_DELAY_S` after
(holding the lock meanwhile), once the gateway it lets start has started, then installs mypy first when
it is missing. The gateway started meanwhile runs as pure
Python — all of it, even modules it imports after the build moved its extension modules in
(``mogateway.compiled``) — and the next start runs the build.

Without a C compiler, the interpreter's headers or mypy, it says so in one line and leaves mogateway
to run as pure Python (exit 0; exit 1 with ``--require``). ``MOGATEWAY_PURE=1`` skips the build.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "mogateway"
MANIFEST = PACKAGE / "compiled.json"
#: Held (exclusively) by the build running; ``mogateway.compiled`` reads it to say a build is on its way.
LOCK = PACKAGE / ".compile.lock"
#: Where a build started by ``--background`` writes what it did.
BACKGROUND_LOG = Path(sys.prefix) / "compile.log"
#: How long a build started by ``--background`` waits before it begins: the first start (a supervisor and
#: its workers importing everything) takes 3 to 10 s on two shared cores; even at nice 19, mypy's install
#: and mypyc beside it made it take longer (docs/benchmarks.md §0.16).
BACKGROUND_DELAY_S = 30
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
COMPILED_DIRS = ("mogateway/core", "mogateway/smpp")
ALSO = (
    "mogateway/edges/storage/batches.py",
    "mogateway/edges/storage/schema.py",
    "mogateway/edges/http1.py",
)
#: Modules mypyc does not take as written, and why (docs/benchmarks.md §0.9).
NOT_COMPILED = {
    "mogateway/core/immutable.py": "dataclass_transform sets an attribute on the decorator function",
    "mogateway/core/reassembly.py": "a slotted dataclass of a native class fails at import",
    "mogateway/smpp/session.py": "exceptions that subclass RuntimeError must be non-native classes",
    "mogateway/core/callback_url.py": "UrlRefused subclasses OSError: must be a non-native class",
}


def modules() -> list[str]:
    """The sources compiled, relative to ``src/``."""
    found = [str(p.relative_to(SRC)) for d in COMPILED_DIRS for p in sorted((SRC / d).glob("*.py"))]
    return [m for m in [*found, *ALSO] if not m.endswith("__init__.py") and m not in NOT_COMPILED]


def _name(source: str) -> str:
    return source[: -len(".py")].replace("/", ".")


def _digests(root: Path, sources: list[str]) -> dict[str, str]:
    sys.path.insert(0, str(SRC))
    from mogateway.compiled import source_digest  # the one digest the guard checks against

    return {_name(s): source_digest(root / s) for s in sources}


def _up_to_date(sources: list[str]) -> bool:
    try:
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if manifest.get("suffix") != SUFFIX or manifest.get("modules") != _digests(SRC, sources):
        return False
    return all((SRC / (s[: -len(".py")] + SUFFIX)).exists() for s in sources)


def _missing_tool() -> str | None:
    """Why a build cannot be made here (None: it can)."""
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return "mypy (mypyc) is not installed"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}; on Debian: apt-get install gcc)"
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not include.exists():
        return f"no {include} (on Debian: apt-get install python3-dev)"
    return None


def _remove_build() -> None:
    MANIFEST.unlink(missing_ok=True)
    for ext in [*PACKAGE.rglob(f"*{SUFFIX}"), *SRC.glob(f"*__mypyc{SUFFIX}")]:
        ext.unlink()


def build(sources: list[str]) -> None:
    """Compile ``sources`` in a copy of ``src/`` and move the result in place (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="mogateway-compile-") as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(
            SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "compiled.json", "*.egg-info")
        )
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", *sources], cwd=copy, capture_output=True, text=True
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"mypyc failed:\n{tail}")
        digests = _digests(copy, sources)
        _remove_build()
        built = [copy / (s[: -len(".py")] + SUFFIX) for s in sources] + list(copy.glob(f"*__mypyc{SUFFIX}"))
        for ext in built:
            target = SRC / ext.relative_to(copy)
            staged = target.with_name(target.name + ".new")
            shutil.copy2(ext, staged)
            os.replace(staged, target)
    manifest = {"suffix": SUFFIX, "python": sys.version.split()[0], "modules": digests}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _build_lock(*, wait: bool, held: int = -1) -> Iterator[bool]:
    """Hold :data:`LOCK` for one build; without ``wait``, yields False when another build holds it.
    ``held``: a descriptor of it already locked for this build (``--background`` hands one over)."""
    if held >= 0:
        try:
            yield True
        finally:
            os.close(held)
        return
    with open(LOCK, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            print("compile: waiting for the build already running (scripts/compile.py)", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield True  # the kernel lets go when the file is closed, or the process ends however it ends


def _install_mypy() -> None:
    """mypy (mypyc) into this environment, for a build started where only the gateway was installed."""
    try:
        import mypyc  # noqa: F401
    except ImportError:
        uv = Path(sys.prefix) / "bin" / "uv"  # what scripts/setup.sh installs with, when it could
        if uv.exists():
            done = subprocess.run([str(uv), "pip", "install", "-q", "--python", sys.executable, "mypy>=1.10"])
            if done.returncode == 0:
                return
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "mypy>=1.10"],
            check=False,
        )


def _start_in_background(sources: list[str]) -> int:
    """Start this build detached, at nice 19, and say so (module docstring). The lock passes to it
    without a moment free: a gateway started right after this returns sees a build running."""
    lock_fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        print(
            f"compile: a build is running in the background (log: {BACKGROUND_LOG}); "
            "mogateway runs as pure Python until it is done"
        )
        return 0
    idle_io = ["ionice", "-c", "3"] if shutil.which("ionice") else []
    command = [sys.executable, str(Path(__file__).resolve()), "--install-mypy"]
    command += ["--after", str(BACKGROUND_DELAY_S), "--lock-fd", str(lock_fd)]
    with open(BACKGROUND_LOG, "ab") as log:
        subprocess.Popen(
            [*idle_io, *command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(lock_fd,),
            start_new_session=True,  # not stopped by the terminal's Ctrl-C that stops the gateway
            preexec_fn=lambda: os.nice(19),
        )
    os.close(lock_fd)  # the build holds the lock through its copy of the descriptor
    print(
        f"compile: building the pure layers with mypyc in the background ({len(sources)} modules, about "
        f"100 s on two cores; log: {BACKGROUND_LOG}): this start runs pure Python, the next the build"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require", action="store_true", help="fail when the build cannot be made")
    parser.add_argument("--background", action="store_true", help="build detached, after returning")
    parser.add_argument("--install-mypy", action="store_true", help="pip-install mypy when it is missing")
    parser.add_argument("--lock-fd", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--after", type=float, default=0.0, help="seconds to wait, holding the lock, first")
    args = parser.parse_args()
    if os.environ.get("MOGATEWAY_PURE", "") not in ("", "0"):
        print("compile: skipped (MOGATEWAY_PURE is set): mogateway runs as pure Python")
        return 0
    sources = modules()
    if _up_to_date(sources):
        print(f"compile: up to date ({len(sources)} modules)")
        return 0
    if args.background:
        return _start_in_background(sources)
    with _build_lock(wait=True, held=args.lock_fd):
        time.sleep(args.after)  # a start during the wait runs the source, and says a build is running
        if _up_to_date(sources):  # built by the build this one waited for
            print(f"compile: up to date ({len(sources)} modules)")
            return 0
        if args.install_mypy:
            _install_mypy()
        return _build_or_say_why(sources, args.require)


def _build_or_say_why(sources: list[str], require: bool) -> int:
    why = _missing_tool()
    if why is None:
        try:
            build(sources)
        except (RuntimeError, OSError) as exc:
            why = str(exc)
        else:
            left = f"not compiled: {len(NOT_COMPILED)}, see scripts/compile.py"
            print(f"compile: {len(sources)} modules built by mypyc ({left})")
            return 0
    print(f"compile: {why}; mogateway runs as pure Python (about a tenth more CPU per MO)", file=sys.stderr)
    return 1 if require else 0


if __name__ == "__main__":
    sys.exit(main())
