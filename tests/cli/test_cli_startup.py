"""The CLI starts without the server it drives (cli/__init__.py): listing the commands, or asking one for
its help, loads no web framework, HTTP stack, database driver or gateway package. Each check runs in a
fresh interpreter and reads its ``sys.modules``: what an earlier import in this process loaded would hide
an arrow. (Timings: bench/cli_startup.py, docs/benchmarks.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: What a command that only lists, parses or explains must not load: the server's third-party stacks...
SERVER_LIBRARIES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "uvloop",
    "aiohttp",
    "httpx",
    "asyncpg",
    "nats",
    "pydantic_settings",
    "phonenumbers",
    "jinja2",
    "prometheus_client",
    "cryptography",
)
#: ... and the gateway's own layers above the pure core (the settings' model is pydantic).
SERVER_PACKAGES = (
    "mogateway.api",
    "mogateway.node",
    "mogateway.modes",
    "mogateway.service",
    "mogateway.edges",
    "mogateway.config.settings",
    "mogateway.testing.smsc",
    "mogateway.testing.fake_graph",
    "mogateway.waba.flow",
    "mogateway.simulation",
)


def _loaded_by(code: str) -> list[str]:
    """The server's modules in ``sys.modules`` once ``code`` has run in a fresh interpreter."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)), file=sys.__stderr__)\n"
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert done.stderr.strip(), done
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return [
        m
        for m in modules
        if m.split(".")[0] in SERVER_LIBRARIES
        or any(m == p or m.startswith(p + ".") for p in SERVER_PACKAGES)
    ]


def test_importing_the_cli_loads_no_server() -> None:
    assert _loaded_by("import mogateway.cli") == []


def _help(*args: str) -> str:
    """Run ``mogateway *args --help`` in this interpreter as the console script does (it exits 0)."""
    return (
        "from mogateway.cli import app\n"
        "try:\n"
        f"    app({[*args, '--help']!r}, prog_name='mogateway')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )


@pytest.mark.parametrize(
    "command",
    [
        (),
        ("serve",),
        ("messages", "list"),
        ("clients", "add"),
        ("simulate",),
        ("smsc-sim",),
        ("waba", "migrate"),
        ("secrets", "seal"),
        ("doctor",),
        ("backup",),
        ("top",),
        ("migrate",),
    ],
    ids=lambda c: " ".join(c) or "mogateway",
)
def test_help_loads_no_server(command: tuple[str, ...]) -> None:
    assert _loaded_by(_help(*command)) == []


def test_a_command_loads_what_it_needs_when_it_runs() -> None:
    """The laziness is in the imports only: a command that does its work imports it then."""
    code = (
        "from mogateway.cli import app\n"
        "try:\n"
        "    args = ['messages', 'list', '--url', 'http://127.0.0.1:9', '--token', 't']\n"
        "    app(args, prog_name='mogateway')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 3, exc.code  # Exit.UNREACHABLE: nothing listens on port 9\n"
    )
    assert "httpx" in _loaded_by(code)
