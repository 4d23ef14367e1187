"""README.md's Quickstart, as written: its commands run in bash against a ``mogateway serve`` started as
the README says (no tokens given: the gateway generates them into ``./mogateway.db`` and the CLI reads
them from there), so the first thing a newcomer types keeps working.

The test changes only what a test must: the ports (8080 and 9000 may be taken here), ``<id>``, the
placeholder for an id the reader copies from the list above it, and how long ``send`` waits."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import ServeProcess, clean_env, free_port, start_serve

ROOT = Path(__file__).resolve().parents[2]


def quickstart_commands() -> str:
    """The shell block of README.md's Quickstart that talks to the running gateway."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    (commands,) = [b for b in blocks if "mogateway clients add" in b]
    return str(commands)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    # The reader's checkout: .venv (the one running these tests) and examples/ beside the journal.
    (tmp_path / ".venv").symlink_to(sys.prefix)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    # As in the README: only callbacks to this machine allowed; tokens, journal and the rest default.
    serve = start_serve(tmp_path, clean_env(MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true"))
    try:
        yield serve
    finally:
        serve.stop()


def test_the_quickstart_runs_as_written(served: ServeProcess, tmp_path: Path) -> None:
    assert (Path(sys.prefix) / "bin" / "activate").exists(), "the tests run from the README's .venv"
    app_port = free_port()
    commands = quickstart_commands()
    assert "127.0.0.1:9000" in commands and "<id>" in commands, "the README's Quickstart changed: adapt"
    commands = commands.replace("127.0.0.1:9000", f"127.0.0.1:{app_port}")
    commands = commands.replace("--port 9000", f"--port {app_port}")
    newest = "import json, sys; print(json.load(sys.stdin)['messages'][0]['id'])"
    first_id = f'mogateway messages list --json | python -c "{newest}"'
    commands = commands.replace("<id>", f"$({first_id})")
    # The application starts in the background as the MO is sent (the gateway retries its connection
    # meanwhile): on a machine busy with the rest of the suite that may take longer than 5 s.
    assert "--wait 5" in commands
    commands = commands.replace("--wait 5", "--wait 30")
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + commands
    env = clean_env(MOGATEWAY_URL=served.url)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.defpath  # what `. .venv/bin/activate` adds is what finds mogateway
    ran = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # The token file the README promises, readable by its owner only, and the client's answer.
    assert stat.S_IMODE((tmp_path / "mogateway.tokens").stat().st_mode) == 0o600
    assert json.loads((tmp_path / "echo.json").read_text())["token"]
    # `send --wait` printed the outcome, `messages show` the timeline with the reply, `list` the row.
    assert "replied" in ran.stdout and "You said: HELLO" in ran.stdout, ran.stdout
    assert "reply_submitted" in ran.stdout and "919812345678" in ran.stdout
    # The reply went to the default `log` channel: the gateway's log shows it.
    assert "You said: HELLO" in served.stderr()
