"""docs/waba-migration.md as written: "2. Rehearse against the fake Graph API" runs its two blocks — the
fake in one terminal, the migration in another — and the migration ends with the number CONNECTED, the
reader typing what the tool asks (the confirmation, the code read from the fake's outbox with the doc's
``curl``, the PIN); and "4. Resume": a run stopped with Ctrl-C at the code prompt, then the same
command again, ends the same way without a second migration request or a second register, and so
does a run whose state file was lost.

The migration runs in a pseudo-terminal that is its controlling terminal, as in the doc's "another
terminal": the prompts, the hidden PIN and Ctrl-C (a ``\\x03`` typed, which the terminal turns into
SIGINT) are the real ones. The test changes only the port (8765 may be taken here); the reader's
directory, where the state file goes, is a temporary one."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import clean_env, free_port, wait_until

from markdown_doc import MarkdownDoc

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/waba-migration.md")
TIMEOUT = 60.0
PIN = "135790"  # any 6 digits: two-step verification is off for the clean number
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def section(heading: str) -> str:
    """The text of docs/waba-migration.md under ``heading``, to the next heading of its level."""
    return DOC.section(heading)


def doc_blocks(port: int) -> tuple[str, str, str]:
    """The fake's command, the migration's block and the outbox's curl, with ``port`` for 8765."""
    text = section("## 2. Rehearse against the fake Graph API")
    fake, migration = re.findall(r"```\n(.*?)```", text, flags=re.S)
    (curl,) = re.findall(r"`(curl http://127\.0\.0\.1:8765/__fake/outbox)`", text)
    assert "8765" in fake and "8765" in migration, "the doc's rehearsal changed: adapt the test"
    return tuple(  # type: ignore[return-value]
        s.strip().replace("127.0.0.1:8765", f"127.0.0.1:{port}").replace("--port 8765", f"--port {port}")
        for s in (fake, migration, curl)
    )


def reader_env() -> dict[str, str]:
    """A reader's shell: no MOGATEWAY_* setting of the developer's, mogateway on the PATH."""
    env = clean_env(TERM="xterm")
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}"
    return env


@dataclass
class Terminal:
    """A bash script in a pseudo-terminal of its own (its controlling terminal, 120 columns)."""

    process: subprocess.Popen[bytes]
    master: int
    raw: bytearray = field(default_factory=bytearray)
    seen: int = 0  # how much of the screen :meth:`expect` has consumed

    @classmethod
    def start(cls, script: str, cwd: Path, env: dict[str, str]) -> Terminal:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

        def take_terminal() -> None:  # in the child, after setsid: the pty becomes its terminal
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            process = subprocess.Popen(
                ["bash", "-c", script],
                cwd=cwd,
                env=env,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                preexec_fn=take_terminal,
            )
        finally:
            os.close(slave)
        return cls(process, master)

    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace"))

    def _read(self, wait: float) -> None:
        ready, _, _ = select.select([self.master], [], [], wait)
        if ready:
            with contextlib.suppress(OSError):  # EIO: every writer of the terminal has ended
                self.raw += os.read(self.master, 65536)

    def expect(self, text: str, timeout: float = TIMEOUT) -> None:
        """Wait until ``text`` shows after what earlier calls found."""
        deadline = time.monotonic() + timeout
        while text not in self.screen()[self.seen :]:
            if time.monotonic() > deadline:
                raise AssertionError(f"not on the screen within {timeout} s: {text!r}\n{self.screen()}")
            self._read(0.1)
        self.seen += self.screen()[self.seen :].index(text) + len(text)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait_echo_off(self, timeout: float = TIMEOUT) -> None:
        """Wait until the program turns the terminal's echo off for a hidden answer: keys typed before
        that would be shown, then thrown away (getpass flushes the input as it hides it)."""
        wait_until(
            lambda: not termios.tcgetattr(self.master)[3] & termios.ECHO,
            "the terminal's echo turned off",
            timeout=timeout,
        )

    def wait(self, timeout: float = TIMEOUT) -> int:
        """The script's exit status, once it ends (the screen read to its last byte)."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {timeout} s:\n{self.screen()}")
            self._read(0.1)
        self._read(0.2)
        return int(self.process.returncode)

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        os.close(self.master)


@dataclass
class Rehearsal:
    """The fake (the doc's first terminal) and what the doc's second terminal types."""

    workdir: Path
    migration: str
    curl: str
    url: str
    fake_log: Path

    @contextlib.contextmanager
    def terminal(self) -> Iterator[Terminal]:
        term = Terminal.start(self.migration, self.workdir, reader_env())
        try:
            yield term
        finally:
            term.close()

    def code(self) -> str:
        """The last code sent, read as the doc says: its ``curl`` of the outbox."""
        read = subprocess.run(
            ["bash", "-c", self.curl], env=reader_env(), capture_output=True, text=True, timeout=TIMEOUT
        )
        assert read.returncode == 0, read.stderr
        return str(json.loads(read.stdout)["data"][-1]["code"])

    def state(self) -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(self.url + "/__fake/state", timeout=10.0).json()
        return got

    def requests(self, method: str, path_end: str) -> list[dict[str, Any]]:
        log = httpx.get(self.url + "/__fake/requests", timeout=10.0).json()["data"]
        return [r for r in log if r["method"] == method and r["path"].endswith(path_end)]

    def migration_requests(self) -> int:
        """``POST /<WABA>/phone_numbers`` calls with ``migrate_phone_number``: migrations requested."""
        return len(
            [r for r in self.requests("POST", "/phone_numbers") if r["params"].get("migrate_phone_number")]
        )


@pytest.fixture
def rehearsal(tmp_path: Path) -> Iterator[Rehearsal]:
    """The doc's first terminal: the fake Graph API, answering before the test types anything; stopped
    as its terminal's Ctrl-C stops it."""
    port = free_port()
    fake_line, migration, curl = doc_blocks(port)
    log = tmp_path / "fake-graph.log"
    with log.open("ab") as out:
        fake = subprocess.Popen(
            ["bash", "-c", fake_line],
            cwd=tmp_path,
            env=reader_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert fake.poll() is None, log.read_text()
        try:
            return httpx.get(url + "/__fake/state", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, "the fake Graph API answers", timeout=TIMEOUT, every=0.1)
        yield Rehearsal(tmp_path, migration, curl, url, log)
    finally:
        if fake.poll() is None:
            os.killpg(fake.pid, signal.SIGINT)  # Ctrl-C in its terminal
            try:
                fake.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(fake.pid, signal.SIGKILL)
                fake.wait(10)


def finish(term: Terminal, rehearsal: Rehearsal) -> None:
    """Type the code from the outbox at the prompt and the PIN when asked; the run ends CONNECTED."""
    term.expect("Code sent by SMS:")
    term.type(rehearsal.code() + "\n")
    term.expect("code verified")
    term.expect("Two-step PIN (6 digits)")
    term.wait_echo_off()
    term.type(PIN + "\n")
    status = term.wait()
    assert status == 0, term.screen()
    assert PIN not in term.screen(), "the PIN is read hidden"
    assert re.search(r"status\s*│\s*CONNECTED", term.screen()), term.screen()


def assert_migrated(rehearsal: Rehearsal) -> None:
    """The number as the fake Graph API holds it: on the destination WABA with the id in the state file,
    connected on the Cloud API, the PIN typed its two-step PIN."""
    saved = json.loads((rehearsal.workdir / "rehearsal.json").read_text())
    assert list(saved["completed"])[-1] == "done", saved
    held = rehearsal.state()["numbers"]["919876543210"]
    assert held["home_waba"] == "102290129340398" and held["phone_id"] == saved["phone_number_id"], held
    assert held["status"] == "CONNECTED" and held["platform_type"] == "CLOUD_API", held
    assert held["two_step_pin"] == PIN


def test_the_rehearsal_runs_as_written_and_the_number_ends_connected(rehearsal: Rehearsal) -> None:
    # What the doc says the fake prints: the token, the destination WABA and the numbers.
    wait_until(lambda: "…213" in rehearsal.fake_log.read_text(), "the fake's banner", timeout=TIMEOUT)
    said = rehearsal.fake_log.read_text()
    for fact in ("rehearsal-token", "102290129340398", "+91 98765 43210", "…211", "PIN 246810", "…212"):
        assert fact in said, said
    with rehearsal.terminal() as term:
        term.expect("Request the migration")
        term.expect(
            "into WABA 102290129340398 now? [y/N]"
        )  # the choices are shown (rich took them for markup)
        term.type("y\n")
        finish(term, rehearsal)
    assert_migrated(rehearsal)
    assert oct((rehearsal.workdir / "rehearsal.json").stat().st_mode & 0o777) == "0o600"
    assert "rehearsal-token" not in (rehearsal.workdir / "rehearsal.json").read_text()
    assert rehearsal.migration_requests() == 1 and len(rehearsal.requests("POST", "/register")) == 1


def test_after_ctrl_c_the_same_command_again_continues_where_it_stopped(rehearsal: Rehearsal) -> None:
    with rehearsal.terminal() as term:
        term.expect("now?")
        term.type("y\n")
        term.expect("Code sent by SMS:")
        term.type("\x03")  # Ctrl-C at the code prompt
        assert term.wait() == 130, term.screen()
    saved = json.loads((rehearsal.workdir / "rehearsal.json").read_text())
    assert "migration_requested" in saved["completed"] and "registered" not in saved["completed"]

    # "Run the same command again": no second migration, no second code asked for; then register once.
    with rehearsal.terminal() as term:
        term.expect("already requested: phone number id " + str(saved["phone_number_id"]))
        finish(term, rehearsal)
    assert rehearsal.migration_requests() == 1
    assert len(rehearsal.requests("POST", "/request_code")) == 1
    assert len(rehearsal.requests("POST", "/register")) == 1
    assert_migrated(rehearsal)


def test_with_the_state_file_lost_the_run_finds_the_number_and_continues(rehearsal: Rehearsal) -> None:
    with rehearsal.terminal() as term:
        term.expect("now?")
        term.type("y\n")
        term.expect("Code sent by SMS:")
        term.type("\x03")
        assert term.wait() == 130, term.screen()
    pnid = json.loads((rehearsal.workdir / "rehearsal.json").read_text())["phone_number_id"]
    (rehearsal.workdir / "rehearsal.json").unlink()

    # Graph is asked how far the number is (it is on the WABA already): the run continues with its id.
    with rehearsal.terminal() as term:
        term.expect(f"already on WABA 102290129340398: resuming with id {pnid}")
        finish(term, rehearsal)
    assert json.loads((rehearsal.workdir / "rehearsal.json").read_text())["phone_number_id"] == pnid
    assert len(rehearsal.requests("POST", "/register")) == 1
    assert_migrated(rehearsal)
