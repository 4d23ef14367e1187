"""The CLI starts without the server it drives (cli/__init__.py): listing the commands, or asking one for
its help, loads no web framework, HTTP stack, database driver or gateway package. Each check runs in a
fresh interpreter and reads its ``sys.modules``: what an earlier import in this process loaded would hide
an arrow. (Timings: bench/cli_startup.py, docs/benchmarks.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


#: Prints the modules imported (a ``None`` entry only blocks an import: mogateway/__init__.py).
_PRINT_MODULES = (
    "print(json.dumps(sorted(k for k, v in sys.modules.items() if v is not None)), file=sys.__stderr__)\n"
)


def _loaded_by(code: str) -> list[str]:
    """The server's modules in ``sys.modules`` once ``code`` has run in a fresh interpreter."""
    probe = f"import json, sys\n{code}\n{_PRINT_MODULES}"
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
        "    app(['secrets', 'new-key'], prog_name='mogateway')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    assert "mogateway.edges.storage.sealing" in _loaded_by(code)


def test_doctor_on_the_defaults_loads_no_http_client_database_driver_or_queue_client(tmp_path: Path) -> None:
    """What kept ``mogateway doctor`` above 0.3 s (docs/benchmarks.md §0.20): httpx (and the TLS context
    each client loads) to ask the gateway, and asyncpg through a redaction helper. It asks over the
    standard library's ``http.client`` and loads asyncpg and nats-py only when the settings name them."""
    code = (
        "import os\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "from mogateway.cli import app\n"
        "try:\n"
        "    app(['doctor', '--url', 'http://127.0.0.1:9'], prog_name='mogateway')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    loaded = _loaded_by(code)
    assert "mogateway.config.settings" in loaded  # it ran its checks
    assert [m for m in loaded if m.split(".")[0] in ("httpx", "asyncpg", "nats", "aiohttp")] == []


def _modules_loaded_by(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\n{_PRINT_MODULES}"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stderr.strip(), done
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return modules


def test_the_root_help_loads_no_command_module() -> None:
    """``mogateway --help`` lists the commands from ``cli.COMMANDS``; a command's help loads only its
    own module (and the modules it imports), never another command's."""
    from mogateway.cli import COMMAND_MODULES

    commands = {f"mogateway.cli.{m}" for m in COMMAND_MODULES}
    assert commands & set(_modules_loaded_by(_help())) == set()
    loaded = commands & set(_modules_loaded_by(_help("messages", "list")))
    assert loaded == {"mogateway.cli.messages"}


def test_no_command_builds_pydantic_adapters_for_its_options() -> None:
    """What made every command 0.14 s slower (typer 0.29, pyproject.toml): running a command or asking
    for its help loads no pydantic at all."""
    for code in (_help("doctor"), _help("clients", "add")):
        assert [m for m in _modules_loaded_by(code) if m.split(".")[0] == "pydantic"] == []


def test_the_summaries_are_the_commands_own() -> None:
    """``cli.COMMANDS`` names exactly the commands the modules register, each with the module that adds
    it and its short help (its first sentence): the lazy root's listing cannot drift from the commands."""
    from mogateway.cli import COMMAND_MODULES, COMMANDS, load_commands

    registered = {
        name: (module, command)
        for module in COMMAND_MODULES
        for name, command in load_commands(module).items()
    }
    assert sorted(registered) == sorted(name for name, _, _ in COMMANDS)
    for name, module, summary in COMMANDS:
        owner, command = registered[name]
        assert owner == module, name
        assert command.get_short_help_str(limit=1000) == summary, name


def test_the_root_help_lists_every_command_and_a_wrong_name_is_a_usage_error() -> None:
    from mogateway.cli import COMMANDS

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "COLUMNS": "200"}
        command = [sys.executable, "-m", "mogateway", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env)

    shown = run("--help")
    assert shown.returncode == 0, shown.stderr
    for name, _, summary in COMMANDS:
        assert f"  {name}  " in shown.stdout and summary in shown.stdout
    wrong = run("mesages", "list")
    assert wrong.returncode == 2 and "Did you mean 'messages'" in wrong.stderr


def test_the_server_loads_no_terminal_renderer() -> None:
    """A worker's start imports the whole server; httpx's command-line client (rich, pygments), which
    ``import httpx`` loads when they are installed, is not part of it (mogateway/__init__.py)."""
    loaded = _modules_loaded_by("import mogateway.api.app, mogateway.node, httpx")
    assert [m for m in loaded if m.split(".")[0] in ("rich", "pygments")] == []


def test_the_console_made_at_first_use_reads_the_terminal_width_when_printing() -> None:
    """The CLI's console is made when first used (cli/common.py), possibly inside a CliRunner that sets
    COLUMNS for one invocation: later prints must read COLUMNS again, as a console made at import did."""
    code = (
        "import os\n"
        "from mogateway.cli.common import console\n"
        "os.environ['COLUMNS'] = '50'\n"
        "first = console.width\n"
        "os.environ['COLUMNS'] = '120'\n"
        "print(first, console.width)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["50", "120"]
