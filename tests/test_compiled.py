"""The compiled pure layers (scripts/compile.py, mogateway.compiled): they run by default, never when
their source changed since the build, and they give the same bytes as their pure-Python source.

``scripts/test.sh`` builds them before the suite (``MOGATEWAY_COMPILE_REQUIRED``), runs the whole suite
on them, then the tests of those layers again with ``MOGATEWAY_PURE=1``.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mogateway.smpp.pdu
from mogateway import compiled

SRC = Path(compiled.__file__).resolve().parent.parent

_SHOW = (
    "import json, mogateway.compiled as c, mogateway.smpp.pdu as p; "
    "print(json.dumps([c.COMPILED, c.STATUS, p.__file__]))"
)


def _show(src: Path, **env: str) -> tuple[bool, str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "MOGATEWAY_PURE"} | env
    environ["PYTHONPATH"] = str(src)
    out = subprocess.run(
        [sys.executable, "-c", _SHOW], env=environ, capture_output=True, text=True, check=True
    )
    is_compiled, status, pdu_file = json.loads(out.stdout)
    return is_compiled, status, pdu_file


@pytest.fixture(scope="module")
def built_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``src/`` with the build that the suite runs on (scripts/compile.py made it)."""
    if not compiled.compiled_modules():
        pytest.fail("no compiled modules in src/: run scripts/compile.py (scripts/test.sh does)")
    copy = tmp_path_factory.mktemp("built") / "src"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return copy


def test_the_build_runs_unless_the_source_is_asked_for() -> None:
    """The suite runs on what the default runs: the build; MOGATEWAY_PURE=1 runs the source instead."""
    assert compiled.COMPILED is not compiled.CHOSEN_PURE, compiled.STATUS
    suffix = Path(mogateway.smpp.pdu.__file__).suffix
    assert suffix == (".py" if compiled.CHOSEN_PURE else ".so"), compiled.STATUS


def test_a_source_changed_since_the_build_runs_as_source(built_copy: Path) -> None:
    assert _show(built_copy)[0] is True
    text = built_copy / "mogateway" / "core" / "text.py"
    original = text.read_bytes()
    text.write_bytes(original + b"\n# changed after the build\n")
    try:
        is_compiled, status, pdu_file = _show(built_copy)
    finally:
        text.write_bytes(original)
    # all or nothing: pdu.py did not change, but the compiled modules call one another directly
    assert not is_compiled and pdu_file.endswith("pdu.py")
    assert "mogateway.core.text changed since the build" in status


def test_a_build_without_its_manifest_or_for_another_interpreter_runs_as_source(built_copy: Path) -> None:
    manifest = built_copy / "mogateway" / "compiled.json"
    original = manifest.read_text()
    try:
        data = json.loads(original)
        manifest.write_text(json.dumps(data | {"suffix": ".cpython-399-x86_64-linux-gnu.so"}))
        is_compiled, status, _ = _show(built_copy)
        assert not is_compiled and "another interpreter" in status
        manifest.unlink()
        is_compiled, status, pdu_file = _show(built_copy)
        assert not is_compiled and "compiled.json" in status and pdu_file.endswith(".py")
    finally:
        manifest.write_text(original)
    assert _show(built_copy)[0] is True
    is_compiled, status, _ = _show(built_copy, MOGATEWAY_PURE="1")
    assert not is_compiled and "MOGATEWAY_PURE" in status


#: What the compiled layers compute for one fixed corpus, printed as JSON by a child process.
CORPUS = Path(__file__).with_name("compiled_corpus.py")


def _corpus(src: Path, pure: bool) -> list[object]:
    environ = {k: v for k, v in os.environ.items() if k != "MOGATEWAY_PURE"}
    environ["PYTHONPATH"] = str(src)
    if pure:
        environ["MOGATEWAY_PURE"] = "1"
    done = subprocess.run([sys.executable, str(CORPUS)], env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result: list[object] = json.loads(done.stdout)
    return result


def test_the_build_and_its_source_compute_the_same(built_copy: Path) -> None:
    compiled_out, pure_out = _corpus(built_copy, pure=False), _corpus(built_copy, pure=True)
    assert compiled_out[0] is True and pure_out[0] is False
    assert len(compiled_out) > 300
    for n, (a, b) in enumerate(zip(compiled_out[1:], pure_out[1:], strict=True), 1):
        assert a == b, f"item {n} differs: compiled {a!r}, pure {b!r}"


def test_a_process_on_the_source_never_loads_a_build_moved_in_after_it_started(
    built_copy: Path, tmp_path: Path
) -> None:
    """A first ``scripts/serve.sh`` starts the gateway on the source while the build runs in the background:
    modules it imports after the build moved its extension modules in still come from the source."""
    package = built_copy / "mogateway"
    stash = tmp_path / "stash"
    built = [p for p in built_copy.rglob("*.so")] + [package / "compiled.json"]
    for path in built:  # the state of a fresh clone: no build yet
        target = stash / path.relative_to(built_copy)
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
    child = (
        "import json, shutil, sys\n"
        "from pathlib import Path\n"
        "import mogateway.compiled as c\n"
        f"stash, src = Path({str(stash)!r}), Path({str(built_copy)!r})\n"
        "for path in stash.rglob('*'):\n"
        "    if path.is_file():\n"
        "        shutil.copy2(path, src / path.relative_to(stash))\n"
        "import mogateway.smpp.pdu as p\n"
        "print(json.dumps([c.COMPILED, p.__file__]))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "MOGATEWAY_PURE"}
    environ["PYTHONPATH"] = str(built_copy)
    done = subprocess.run([sys.executable, "-c", child], env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    is_compiled, pdu_file = json.loads(done.stdout)
    assert not is_compiled and pdu_file.endswith("pdu.py")
    assert _show(built_copy)[0] is True  # the next start runs the build


def test_a_start_while_a_build_runs_says_so_and_runs_the_source(built_copy: Path) -> None:
    import fcntl

    with open(built_copy / "mogateway" / ".compile.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as scripts/compile.py holds it while it builds
        is_compiled, status, pdu_file = _show(built_copy)
    assert not is_compiled and pdu_file.endswith("pdu.py")
    assert "a build of the pure layers is running" in status
    assert _show(built_copy)[0] is True


def test_serve_workers_run_as_their_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supervisor that started on the source (a build was running) starts its workers, restarted ones
    included, on the source too, even once the build is in place: its start-up line stays true."""
    from mogateway.cli import supervisor

    monkeypatch.delenv("MOGATEWAY_PURE", raising=False)
    monkeypatch.setattr(compiled, "COMPILED", False)
    assert supervisor._worker_environment()["MOGATEWAY_PURE"] == "1"
    monkeypatch.setattr(compiled, "COMPILED", True)
    assert "MOGATEWAY_PURE" not in supervisor._worker_environment()


def test_one_build_at_a_time(tmp_path: Path) -> None:
    """While a build holds its lock, ``--background`` (what a first scripts/serve.sh runs) starts no
    second one, and a build in the foreground (scripts/test.sh) waits for it rather than race it."""
    import fcntl

    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "compiled.json", "*.egg-info", ".compile.lock")
    shutil.copytree(SRC, root / "src", ignore=ignore)  # a fresh clone: nothing built
    (root / "scripts").mkdir()
    shutil.copy2(SRC.parent / "scripts" / "compile.py", root / "scripts" / "compile.py")
    script = str(root / "scripts" / "compile.py")
    environ = {k: v for k, v in os.environ.items() if k != "MOGATEWAY_PURE"}
    with open(root / "src" / "mogateway" / ".compile.lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a build is running
        background = subprocess.run(
            [sys.executable, script, "--background"], env=environ, capture_output=True, text=True, timeout=120
        )
        foreground = subprocess.Popen(
            [sys.executable, script],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert foreground.stdout is not None
            with selectors.DefaultSelector() as selector:  # a build that does not wait would not say so
                selector.register(foreground.stdout, selectors.EVENT_READ)
                ready = selector.select(timeout=60)
            first_line = foreground.stdout.readline() if ready else ""
        finally:
            foreground.kill()
            foreground.wait()
    assert background.returncode == 0, background.stderr
    assert "a build is running in the background" in background.stdout
    assert "waiting for the build already running" in first_line
    assert not list((root / "src").rglob("*.so"))
