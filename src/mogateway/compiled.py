"""Whether the pure layers run compiled, and the guard that keeps a stale build from running.

``scripts/compile.py`` (which ``scripts/setup.sh`` runs) builds the pure layers — ``core/``, ``smpp/``,
the journal's batch writes and the HTTP/1.1 client — with mypyc, from this very source, into extension
modules beside their ``.py`` files, and writes :data:`MANIFEST`: the digest of every source it compiled.
Python imports an extension module before the source of the same name, so once built they are what
runs (about a tenth less CPU per MO, docs/benchmarks.md §0.15), and the source is the fallback: the same
text, tested in both forms (``scripts/test.sh``).

An extension module does not know when its source changes. So on import of ``mogateway`` (before any of
them is loaded) this module compares every compiled module's source with the digest it was built
from, and runs the whole package from source when any differs, when the build was for another
interpreter, when there is no manifest beside the extension modules or they are not the ones it lists
(a build is moving them in: it writes the manifest last), or when ``MOGATEWAY_PURE`` is set
(to ``1``, or anything but ``0`` or empty). It is all or nothing: compiled modules call each other
directly, so a module run from source would not be called by the compiled ones. It runs from source too
while a build is running (it holds ``.compile.lock``: ``scripts/serve.sh`` starts one in the background
on a first start), and a process that runs from source never loads an extension module, not even one a
build moves in after it started. :data:`STATUS` says which, and why; ``mogateway serve`` logs it and
``mogateway doctor`` shows it, and ``serve``'s workers run as their supervisor does.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["CHOSEN_PURE", "COMPILED", "MANIFEST", "STATUS", "compiled_modules", "source_digest"]

PACKAGE_DIR = Path(__file__).resolve().parent
#: What ``scripts/compile.py`` built: the interpreter's extension suffix and each module's source digest.
MANIFEST = PACKAGE_DIR / "compiled.json"
#: Held by a build while it runs (scripts/compile.py; ``scripts/serve.sh`` starts one in the background).
BUILD_LOCK = PACKAGE_DIR / ".compile.lock"
_EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def source_digest(path: Path) -> str:
    """The digest a module's source is built from and checked against."""
    import hashlib  # here, not at the top: ``import mogateway`` stays cheap for the CLI (cli/__init__.py)

    return hashlib.sha256(path.read_bytes()).hexdigest()


def compiled_modules() -> dict[str, Path]:
    """The modules of this package that have an extension module beside their source: name -> source."""
    found: dict[str, Path] = {}
    for ext in PACKAGE_DIR.rglob(f"*{_EXTENSION_SUFFIX}"):
        source = ext.with_name(ext.name[: -len(_EXTENSION_SUFFIX)] + ".py")
        if source.exists():
            parts = source.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
            found[".".join(parts)] = source
    return found


class _FromSource:
    """Finds every module of this package as its ``.py`` file, ahead of any extension module beside it —
    also one a build (``scripts/setup.sh`` runs it in the background on a first start) puts there while
    this process runs: a process that started on the source never mixes in compiled modules. A meta path
    finder; not a subclass of ``importlib.abc.MetaPathFinder``, whose import costs the CLI's start."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("mogateway."):
            return None
        source = PACKAGE_DIR.parent.joinpath(*fullname.split(".")).with_suffix(".py")
        if not source.is_file():
            return None  # a package (its __init__.py is never compiled) or no such module
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, source)


#: The operator asked for the source (``MOGATEWAY_PURE``), whatever is built.
CHOSEN_PURE = os.environ.get("MOGATEWAY_PURE", "") not in ("", "0")


def _building() -> bool:
    """Whether a build is running now (it holds :data:`BUILD_LOCK`)."""
    try:
        fd = os.open(BUILD_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _decide(sources: dict[str, Path]) -> tuple[bool, str]:
    """Whether to run the extension modules, and the status line that says so (module docstring)."""
    building = "pure Python (a build of the pure layers is running: the next start runs it)"
    if not sources:
        if _building():
            return False, building
        return False, "pure Python (not compiled; scripts/compile.py builds the pure layers)"
    if CHOSEN_PURE:
        return False, f"pure Python (MOGATEWAY_PURE is set; {len(sources)} modules are built)"
    if _building():
        return False, building
    import json

    try:
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
        built: dict[str, str] = manifest["modules"]
        suffix = manifest["suffix"]
    except (OSError, ValueError, KeyError, TypeError):
        return (
            False,
            f"pure Python (no readable {MANIFEST.name} beside the built modules; scripts/compile.py)",
        )
    if suffix != _EXTENSION_SUFFIX:
        return False, f"pure Python (built for another interpreter: {suffix})"
    if set(built) != set(sources):  # read while a build was moving its modules in (scripts/compile.py)
        return False, "pure Python (the build is incomplete or being replaced; scripts/compile.py)"
    changed = sorted(name for name, source in sources.items() if built.get(name) != source_digest(source))
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return (
            False,
            f"pure Python (the source of {changed[0]}{more} changed since the build; scripts/compile.py)",
        )
    return True, f"compiled ({len(sources)} modules built by mypyc)"


def _install() -> tuple[bool, str]:
    sources = compiled_modules()
    compiled, status = _decide(sources)
    if not compiled and not any(isinstance(f, _FromSource) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromSource())
    return compiled, status


#: Whether the built extension modules run (True) or their source (False), and why (module docstring).
COMPILED, STATUS = _install()
