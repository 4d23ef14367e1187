"""docs/smpp.md as written: its "Configuring binds" example is what the settings loader reads, the
simulator has the options the doc names, and its "Trying it on a laptop" loop works — ``mogateway
smsc-sim`` with the doc's flags, the doc's ``mogateway serve --config mogateway.toml`` (and its
environment) with the example bind changed as the doc says, the MO line typed in the simulator's
terminal, the shortcode's application called, the reply's ``submit_sm`` printed by the simulator.

The test changes only what it must: the ports (2775 and 8080 may be taken here), the application (a
recording one instead of the Quickstart's echo) and the gateway's journal and tokens (the test's, in
the environment). The terminal is a pseudo-terminal: the simulator reads typed MOs only from one."""

from __future__ import annotations

import os
import pty
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    GatewayClient,
    ServeProcess,
    clean_env,
    free_port,
    mogateway_command,
    run_cli,
    serve_settings,
    start_serve,
    wait_until,
)

from markdown_doc import MarkdownDoc
from mogateway.config import ConfigError, load_settings
from mogateway.testing.recorder import Answer, CallbackRecorder

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/smpp.md")

#: A loaded 2-core machine may take far longer than the second these steps take when idle.
TIMEOUT = 30.0


def section(heading: str) -> str:
    """The text of docs/smpp.md under ``## heading``, up to the next heading of that level."""
    return DOC.section(f"## {heading}")


def binds_example() -> str:
    """The TOML block of "Configuring binds"."""
    (block,) = re.findall(r"```toml\n(.*?)```", section("Configuring binds"), flags=re.S)
    return str(block)


def laptop_lines() -> tuple[str, str, str]:
    """The simulator's command, the gateway's command and the MO line to type, from the shell block of
    "Trying it on a laptop" (each without its comment)."""
    (block,) = re.findall(r"```sh\n(.*?)```", section("Trying it on a laptop"), flags=re.S)
    lines = [line for line in block.splitlines() if line.strip()]
    sim = next(line.split("#", 1)[0].strip() for line in lines if "smsc-sim" in line)
    serve = next(line.split("#", 1)[0].strip() for line in lines if "mogateway serve" in line)
    typed = next(line.split("type:", 1)[1].strip() for line in lines if "type:" in line)
    return sim, serve, typed


def for_the_laptop(example: str, sim_port: int) -> str:
    """The example bind changed as "Trying it on a laptop" says (its ``key = "value"`` settings before the
    shell block), and pointed at the simulator's port."""
    prose = section("Trying it on a laptop").split("```", 1)[0]
    changes = dict(re.findall(r'`(\w+) = ("[^"`]*")`', prose))
    assert set(changes) == {"host", "system_id", "password"}, f"the doc's changes changed: {changes}"
    changes["port"] = str(sim_port)
    for key, value in changes.items():
        example, count = re.subn(rf"(?m)^{key} = \S+", f"{key} = {value}", example)
        assert count == 1, f"the example bind has no single {key} line: adapt"
    return example


# ------------------------------------------------------------------------------------ the settings


def test_the_binds_example_is_what_the_settings_loader_reads(tmp_path: Path) -> None:
    """Every key of the example is a setting (a renamed one fails here) with the value the doc shows, and
    the prose's "other optional fields" exist with the defaults it says."""
    config = tmp_path / "mogateway.toml"
    config.write_text(binds_example())
    settings = load_settings(config)
    (bind,) = settings.smpp.binds
    assert (bind.name, bind.host, bind.port, bind.system_id) == (
        "airtel-dl",
        "smsc.airtel.example",
        2775,
        "aggr01",
    )
    assert bind.password.get_secret_value() == "secret" and "secret" not in repr(bind)
    assert (bind.mode.name.lower(), bind.operator, bind.circle) == ("transceiver", "airtel", "delhi")
    assert (bind.throughput, bind.window, bind.enquire_link_s, bind.tls) == (50, 10, 30, False)
    assert (bind.default_alphabet, bind.split) == ("gsm7", "udh")
    assert [(t.tag, t.value) for t in bind.reply_tlv_list()] == [
        (0x1400, b"1101234567890123456"),
        (0x1401, b"1107123456789012345"),
    ]
    assert bind.dlt_tags() == (0x1400, 0x1401, 0x1402) and bind.dlt_tm_id == "1702158080400000123"
    assert (bind.dedupe_window_s, bind.reassembly_timeout_s) == (600, 60)

    prose = section("Configuring binds").split("```", 2)[2]
    optional = dict(re.findall(r"`(\w+)` \((\d+)", prose))
    pairs = re.findall(r"`(\w+)`/`(\w+)` of the [^(`]*\((\d+)/(\d+)\)", prose)
    for first, second, first_default, second_default in pairs:
        optional.update({first: first_default, second: second_default})
    assert set(optional) == {
        "response_timeout_s",
        "registered_delivery",
        "source_ton",
        "source_npi",
        "dest_ton",
        "dest_npi",
    }, "the doc's other optional fields changed: adapt"
    for name, default in optional.items():
        assert getattr(bind, name) == int(default), name

    # "at most 8 characters (SMPP 3.4)": a longer password is refused at start-up, naming the setting.
    config.write_text(binds_example().replace('password = "secret"', 'password = "secret123"'))
    with pytest.raises(ConfigError, match=r"smpp\.binds\.0\.password"):
        load_settings(config)


# ------------------------------------------------------------------------------------ the laptop loop


def test_the_simulator_has_the_options_the_doc_names() -> None:
    """Every ``--option`` the doc gives ``smsc-sim`` (its laptop section and the DLT receipts) is one of
    the simulator's, and ``--split`` takes the three ways the doc lists."""
    sim_command, _, _ = laptop_lines()
    prose = section("Trying it on a laptop").split("```", 2)[2]  # after the shell block
    named = set(re.findall(r"(--[a-z][a-z-]*)", sim_command + prose))
    (dlt,) = re.findall(r"the simulator sends such receipts with `([^`]*)`", DOC.text.replace("\n", " "))
    named |= set(re.findall(r"(--[a-z][a-z-]*)", dlt))
    assert {"--port", "--mo", "--receipt", "--receipt-err", "--split"} <= named, named
    shown = run_cli(ROOT, clean_env(COLUMNS="200"), "smsc-sim", "--help")
    assert shown.returncode == 0, shown.stderr
    offered = set(re.findall(r"(--[a-z][a-z-]*)", shown.stdout))
    assert named <= offered, f"options the doc names that smsc-sim lacks: {named - offered}"
    assert "udh | sar | payload" in shown.stdout


@dataclass
class Terminal:
    """``mogateway smsc-sim`` in a terminal of its own: what is typed goes to its standard input, what it
    prints (on its standard error) is read from a file."""

    process: subprocess.Popen[bytes]
    keyboard: int | None
    output: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def type(self, line: str) -> None:
        assert self.keyboard is not None
        os.write(self.keyboard, line.encode() + b"\n")

    def wait_for(self, pattern: str, what: str, timeout: float = TIMEOUT) -> re.Match[str]:
        """Poll the simulator's output until ``pattern`` shows (in its words, whatever the line breaks
        of its narrow terminal); the match."""
        found: list[re.Match[str]] = []

        def seen() -> bool:
            assert self.process.poll() is None, f"the simulator exited: {self.text()}"
            match = re.search(pattern, " ".join(self.text().split()))  # rich wraps long lines
            found[:] = [match] if match else []
            return bool(match)

        try:
            wait_until(seen, what, timeout=timeout, every=0.05)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe simulator printed:\n{self.text()}") from None
        return found[0]


@contextmanager
def simulator(workdir: Path, command: str, name: str, *, typing: bool) -> Iterator[Terminal]:
    """Run the doc's ``mogateway smsc-sim …`` command; with ``typing``, its standard input is a terminal
    (a pseudo-terminal) the test types into, otherwise nothing (as when started in the background).
    Stopped by its pid when the block ends."""
    argv = shlex.split(command)
    assert argv[0] == "mogateway", command
    keyboard, tty = pty.openpty() if typing else (None, None)
    output = workdir / f"{name}.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [*mogateway_command(), *argv[1:]],
            cwd=workdir,
            env=clean_env(),
            stdin=subprocess.DEVNULL if tty is None else tty,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if tty is not None:
        os.close(tty)
    try:
        yield Terminal(process, keyboard, output)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(TIMEOUT)
        if keyboard is not None:
            os.close(keyboard)


@contextmanager
def terminal_2(workdir: Path, sim_port: int) -> Iterator[ServeProcess]:
    """The doc's terminal 2: its ``mogateway serve --config mogateway.toml`` (with the environment the doc
    gives it) and the doc's example bind changed as the doc says; the journal and tokens are the test's,
    in the environment, and the port a free one. Stopped (SIGTERM to its pid) when the block ends."""
    _, command, _ = laptop_lines()
    argv = shlex.split(command)
    doc_env = {}
    while "=" in argv[0]:
        key, _, value = argv.pop(0).partition("=")
        doc_env[key] = value
    assert argv[:2] == ["mogateway", "serve"], "the doc's gateway command changed: adapt"
    (workdir / "mogateway.toml").write_text(for_the_laptop(binds_example(), sim_port))
    settings = serve_settings(workdir, **doc_env)
    if "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS" not in doc_env:  # the doc's, not the test harness's
        del settings["MOGATEWAY_ALLOW_PRIVATE_CALLBACKS"]
    serve = start_serve(workdir, clean_env(**settings), args=argv[2:], timeout=60)
    try:
        yield serve
    finally:
        serve.stop()


def test_the_laptop_loop_runs_as_written(tmp_path: Path) -> None:
    """Terminal 1 then terminal 2, as the doc starts them: the MO typed in the simulator's terminal
    reaches the shortcode's application as the example bind says (its operator and circle), the reply
    comes back to the simulator as a ``submit_sm`` with the bind's reply TLVs, and the simulator's receipt
    makes the message delivered. Then the same with an MO given by ``--mo`` instead of typed, to a
    simulator started again on the same port."""
    sim_command, _, typed = laptop_lines()
    assert " --port 2775 " in f" {sim_command} ", "the doc's simulator command changed: adapt"
    sim_port = free_port()
    sim_command = sim_command.replace("--port 2775", f"--port {sim_port}")
    msisdn, shortcode, text = typed.split(" ", 2)
    with ExitStack() as stack:
        app = stack.enter_context(CallbackRecorder.in_thread(Answer.text("Help: send BAL for your balance")))
        terminal_1 = stack.enter_context(simulator(tmp_path, sim_command, "terminal-1", typing=True))
        terminal_1.wait_for(r"type: <msisdn> <shortcode> <text\.\.\.>", "the simulator asks for MOs")
        serve = stack.enter_context(terminal_2(tmp_path, sim_port))
        gateway = GatewayClient(serve.url, keep_alive=False)
        stack.callback(gateway.close)
        gateway.add_client(shortcodes=[shortcode], callback_url=app.url)
        terminal_1.wait_for(r"bound gw as \S*transceiver", "the example bind bound to the simulator")

        terminal_1.type(typed)
        terminal_1.wait_for(
            rf"injected MO {msisdn} -> {shortcode} \(1 part\(s\)\), answers \[0\]",
            "the simulator says the gateway took the MO",
        )
        (call,) = app.wait_for_calls(1, timeout=TIMEOUT)
        body = call.json()
        assert (str(body["msisdn"]), str(body["shortcode"]), body["message"]) == (msisdn, shortcode, text)
        assert (body["sender"]["operator"], body["sender"]["circle"]) == ("airtel", "delhi")
        # The reply as the simulator prints every submit_sm: GSM-7, the bind's reply_tlvs shown.
        terminal_1.wait_for(
            rf"submit_sm \w+: {shortcode} -> {msisdn} dc=0 "
            r"0x1400=1101234567890123456 0x1401=1107123456789012345",
            "the reply's submit_sm at the simulator",
        )
        (message,) = gateway.admin("GET", "/v1/messages", params={"limit": 5}).json()["messages"]
        assert message["origin"] == "smpp:airtel-dl"
        gateway.wait_state(message["id"], frozenset({"delivered"}), timeout=TIMEOUT)
        terminal_1.type("quit")  # as the simulator's prompt says
        assert terminal_1.process.wait(TIMEOUT) == 0, terminal_1.text()

        # "accepts --mo 'msisdn,shortcode,text' to inject MOs without typing": started again on the
        # port, with nothing to read, it injects the MO once the bind is back (after the bind's backoff,
        # a few seconds: twice the usual wait for it).
        again = f"{sim_command} --mo '{msisdn},{shortcode},BAL'"
        terminal_1 = stack.enter_context(simulator(tmp_path, again, "terminal-1-again", typing=False))
        terminal_1.wait_for(
            rf"injected MO {msisdn} -> {shortcode} \(1 part\(s\)\), answers \[0\]",
            "the --mo MO taken by the gateway once the bind came back",
            timeout=2 * TIMEOUT,
        )
        second = app.wait_for_calls(2, timeout=TIMEOUT)[1].json()
        assert (str(second["msisdn"]), second["message"]) == (msisdn, "BAL")
        terminal_1.wait_for(rf"submit_sm \w+: {shortcode} -> {msisdn} dc=0", "the second reply")
