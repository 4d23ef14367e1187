"""A copy of ``src/`` with the pure layers compiled by mypyc, for A/B runs (``--gateway-src``).

    python bench/compiled_tree.py --out /tmp/compiled [--python /usr/bin/python3.11]
    python bench/smpp_throughput.py --count 20000 --workers 1 --binds 2 --runs 1 --gateway-src /tmp/compiled

An experiment, not a way to run mogateway: nothing here is built or shipped compiled. It copies ``src/``
to ``--out`` and compiles, in place, the modules that mypyc takes as they are written today: the
pure core (``core/``, ``smpp/``) and the journal's batch writes and HTTP/1.1 client, less
:data:`NOT_COMPILED`. The interpreter that builds must be the one the gateway then runs on (the
extension modules are for its version and ABI); mypyc comes with mypy, and gcc and the interpreter's
headers must be there. ``docs/benchmarks.md`` §0.9 has what it measured and what stops the rest.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
COMPILED = ("mogateway/core", "mogateway/smpp")
ALSO = (
    "mogateway/edges/storage/batches.py",
    "mogateway/edges/storage/schema.py",
    "mogateway/edges/http1.py",
)
#: Modules mypyc does not take as written, and why.
NOT_COMPILED = {
    "mogateway/core/immutable.py": "dataclass_transform sets an attribute on the decorator function",
    "mogateway/core/reassembly.py": "a slotted dataclass of a native class fails at import",
    "mogateway/smpp/session.py": "exceptions that subclass RuntimeError must be non-native classes",
    "mogateway/core/callback_url.py": "UrlRefused subclasses OSError: must be a non-native class",
}


def modules() -> list[str]:
    found = [str(p.relative_to(SRC)) for d in COMPILED for p in sorted((SRC / d).glob("*.py"))]
    return [m for m in [*found, *ALSO] if not m.endswith("__init__.py") and m not in NOT_COMPILED]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the directory to create (it must not exist)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to build for")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        parser.exit(2, f"error: {out} exists; give a new directory\n")
    shutil.copytree(SRC, out)
    mypyc = [args.python, "-m", "mypyc"]
    names = modules()
    done = subprocess.run([*mypyc, *names], cwd=out, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        parser.exit(1, f"error: mypyc failed:\n{tail}\n")
    print(f"{len(names)} modules compiled into {out} (not compiled: {', '.join(sorted(NOT_COMPILED))})")


if __name__ == "__main__":
    main()
