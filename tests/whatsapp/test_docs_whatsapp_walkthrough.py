"""docs/whatsapp.md as written: the blocks of "A rehearsal on one machine" (the fake Graph API, the
migration, ``mogateway.toml``, ``mogateway serve``, the client, the last migration step and a signed
webhook) run in bash and Python as a reader runs them, and the message reaches a client application
whose answer reaches the fake Graph API; the commands of "Trying a client application: ``mogateway
simulate --whatsapp``" say what the section shows.

The test changes only what a test must: the ports (8765, 8080 and 9000 may be taken here), the
placeholders (``…`` for the options of the first migration run, the code the reader reads from the
outbox, the ``phone_number_id`` they copy from the state file) and, where the doc says "in another
terminal", a process of its own started in the background and waited for."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from markdown_doc import MarkdownDoc, fenced_blocks
from mogateway.cli.supervisor import STOP_TIMEOUT_S
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import clean_env, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/whatsapp.md")
TIMEOUT = 60.0


def section(heading: str) -> str:
    """The text of docs/whatsapp.md under ``heading``, to the next heading of its level."""
    return DOC.section(heading)


blocks = fenced_blocks


def commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    found = []
    for line in joined.splitlines():
        # A comment starts at a '#' after blanks (none of these commands has a '#' of its own).
        line = re.split(r"\s#", line, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            found.append(line)
    return found


@dataclass
class Ports:
    graph: int
    gateway: int
    app: int

    def apply(self, text: str) -> str:
        text = text.replace("127.0.0.1:8765", f"127.0.0.1:{self.graph}")
        text = text.replace("--port 8765", f"--port {self.graph}")
        text = text.replace("127.0.0.1:8080", f"127.0.0.1:{self.gateway}")
        text = text.replace("--port 8080", f"--port {self.gateway}")
        return text.replace("127.0.0.1:9000", f"127.0.0.1:{self.app}")


def reader_env(**extra: str) -> dict[str, str]:
    """A reader's shell: no MOGATEWAY_* setting of the developer's, mogateway on the PATH (the .venv
    running these tests), plus ``extra``."""
    env = clean_env(**extra)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}"
    return env


def run_each(workdir: Path, env: dict[str, str], lines: list[str]) -> tuple[list[int], str]:
    """Run ``lines`` in one bash, as typed one after the other; each line's exit status and the output."""
    marker = "__exit_status__"
    script = "".join(f"{line}\necho {marker} $?\n" for line in lines)
    ran = subprocess.run(
        ["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=180
    )
    statuses = [int(s) for s in re.findall(rf"^{marker} (\d+)$", ran.stdout, flags=re.M)]
    output = re.sub(rf"^{marker} \d+\n", "", ran.stdout, flags=re.M) + ran.stderr
    return statuses, output


@dataclass
class Background:
    """A command the doc runs in a terminal of its own, in its own process group (its pid's)."""

    process: subprocess.Popen[bytes]
    log: Path

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """What Ctrl-C in its terminal does (SIGINT to the group), then SIGKILL if it does not end."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT_S + 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def start_background(workdir: Path, env: dict[str, str], line: str, name: str, ready_url: str) -> Background:
    """Start ``line`` in bash in its own session and wait until ``ready_url`` answers 200."""
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            ["bash", "-c", line],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Background(process, log)

    def answers() -> bool:
        assert process.poll() is None, f"{name} ended: {running.said()}"
        try:
            return httpx.get(ready_url, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, f"{name} answers {ready_url}", timeout=TIMEOUT, every=0.1)
    except BaseException:
        running.stop()
        raise
    return running


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    """The reader's application at http://127.0.0.1:9000/mo (its port substituted): "Hi " + the text."""

    def answer(call: RecordedCall) -> Answer:
        return Answer.text("Hi " + call.json()["message"])

    with CallbackRecorder.in_thread(answer, path="/mo") as recorder:
        yield recorder


def test_the_rehearsal_on_one_machine_runs_as_written(tmp_path: Path, app: CallbackRecorder) -> None:
    ports = Ports(graph=free_port(), gateway=free_port(), app=app.port)
    text = section("### A rehearsal on one machine")
    sh = [ports.apply(b) for b in blocks(text, "sh")]
    (toml,) = [ports.apply(b) for b in blocks(text, "toml")]
    (python,) = [ports.apply(b) for b in blocks(text, "python")]
    assert len(sh) == 4, "the rehearsal's blocks changed: adapt the test"
    (fake_line,) = commands(sh[0])
    migration = commands(sh[1])
    (serve_line,) = commands(sh[2])
    last_steps = commands(sh[3])
    env = reader_env()

    fake = start_background(
        tmp_path, env, fake_line, "fake-graph", f"http://127.0.0.1:{ports.graph}/__fake/state"
    )
    try:
        # The second terminal: the export, the first run (stops for the code), the run with the code.
        first = migration[1]
        assert first.startswith("mogateway waba migrate --graph-url") and "…" not in first
        same_options = first.removeprefix("mogateway waba migrate ")
        outbox = f"http://127.0.0.1:{ports.graph}/__fake/outbox"
        read_code = "import json, sys; print(json.load(sys.stdin)['data'][-1]['code'])"
        code = f'$(curl -s {outbox} | python -c "{read_code}")'
        assert "<the code from /__fake/outbox>" in migration[2]
        lines = [
            line.replace("…", same_options).replace("<the code from /__fake/outbox>", code)
            for line in migration
        ]
        statuses, said = run_each(tmp_path, env, lines)
        assert statuses == [0, 3, 0], said
        assert "Waiting for the 6-digit code" in said and "CONNECTED" in said
        state = json.loads((tmp_path / "waba-919876543210.json").read_text())
        assert "registered" in state["completed"], state
        pnid = str(state["phone_number_id"])

        # mogateway.toml with the state file's phone_number_id, read by the real loader of `serve`.
        placeholder = "<phone_number_id from waba-919876543210.json>"
        assert placeholder in toml and placeholder in python
        (tmp_path / "mogateway.toml").write_text(toml.replace(placeholder, pnid))
        gateway_url = f"http://127.0.0.1:{ports.gateway}"
        serve = start_background(tmp_path, env, serve_line, "serve", gateway_url + "/healthz")
        try:
            # Back in the second terminal, where the export still holds: the client, then the last step.
            lines = [migration[0], *(line.replace("…", same_options) for line in last_steps)]
            statuses, said = run_each(tmp_path, reader_env(MOGATEWAY_URL=gateway_url), lines)
            assert statuses == [0, 0, 0], said
            webhook = f"{gateway_url}/v1/whatsapp/webhook"
            assert f"{webhook} answered the handshake (and refused a wrong token)" in said, said

            # The signed webhook, as the doc's Python: stored (its id printed) and called back.
            posted = subprocess.run(
                [sys.executable, "-c", python.replace(placeholder, pnid)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            assert posted.returncode == 0, posted.stderr
            (message_id,) = json.loads(posted.stdout)["ids"]
            wait_until(lambda: app.calls, "the application's callback", timeout=TIMEOUT)
            (call,) = app.calls
            body = call.json()
            assert body["message"] == "HELLO" and body["channel"] == "whatsapp", body
            assert body["shortcode"] == 919876543210 and body["msisdn"] == 919812345678
            assert call.headers.get("x-mogateway-message-id") == message_id

            # The answer, at the fake Graph API as the doc's curl reads it, sent from the migrated number.
            def sent() -> list[dict[str, Any]]:
                read = httpx.get(f"http://127.0.0.1:{ports.graph}/__fake/messages", timeout=10.0)
                return [m for m in read.json()["data"] if m.get("text") == "Hi HELLO"]

            wait_until(sent, "the answer at the fake Graph API", timeout=TIMEOUT)
            (reply,) = sent()
            assert reply["phone_number_id"] == pnid and reply["to"] == "919812345678", reply
        finally:
            serve.stop()
    finally:
        fake.stop()


# ---------------------------------------------------------------------------------- simulate --whatsapp


def simulate_blocks(app_port: int) -> list[list[str]]:
    """The two blocks' commands, with the application's port for 9000."""
    text = section("## Trying a client application: `mogateway simulate --whatsapp`")
    ports = Ports(graph=8765, gateway=8080, app=app_port)
    found = [commands(ports.apply(b)) for b in blocks(text, "sh")]
    assert [len(b) for b in found] == [2, 2], "the section's blocks changed: adapt the test"
    return found


def run_one(tmp_path: Path, line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, env=reader_env(), capture_output=True, text=True, timeout=TIMEOUT
    )


def test_simulate_whatsapp_says_what_the_doc_shows(tmp_path: Path) -> None:
    answers: dict[str, Answer] = {
        # Longer than one WhatsApp text: the doc's "2 text messages (split at 4,096 characters)".
        "HELLO": Answer.text("x" * 5000),
        "BAL": Answer.text("Hi BAL"),
    }

    def answer(call: RecordedCall) -> Answer:
        return answers.get(call.json()["message"], Answer.text("Hi"))

    with CallbackRecorder.in_thread(answer, path="/mo") as app:
        (hello, bal), (image, location) = simulate_blocks(app.port)
        said = run_one(tmp_path, hello)
        assert said.returncode == 0, said.stdout + said.stderr
        assert "WhatsApp: 2 text messages (split at 4,096 characters)" in said.stdout, said.stdout
        assert "UTF-16 units" in said.stdout

        said = run_one(tmp_path, bal)
        assert said.returncode == 0, said.stdout + said.stderr
        report = json.loads(said.stdout)
        assert report["channel"] == "whatsapp"
        assert report["whatsapp"] == {"messages": 1, "limit": 4096, "lengths": [6]}, report

        # What the application got: the seed's members, the business number, then the channel.
        first, second = (call.json() for call in app.calls)
        assert all(call.headers.get("authorization") == "Bearer s3cret" for call in app.calls)
        assert list(first)[:3] == ["shortcode", "msisdn", "message"]
        assert list(first)[-2:] == ["channel", "whatsapp"] and first["channel"] == "whatsapp"
        assert first["shortcode"] == 919876543210 and first["whatsapp"]["type"] == "text"
        assert second["shortcode"] == 919876543299 and second["message"] == "BAL"

        # The typed messages of the second block: an image with its caption, a location.
        for line in (image, location):
            said = run_one(tmp_path, line)
            assert said.returncode == 0, said.stdout + said.stderr
        image_call, location_call = (call.json() for call in app.calls[2:])
        assert image_call["message"] == "my bill"
        assert image_call["whatsapp"]["image"]["caption"] == "my bill"
        assert location_call["whatsapp"]["location"] == {
            "latitude": 28.61,
            "longitude": 77.21,
            "name": "Office",
        }


def test_simulate_whatsapp_judges_a_rich_answer_and_an_sms_shaped_run_refuses_it(tmp_path: Path) -> None:
    rich = {
        "whatsapp": [
            {
                "type": "interactive",
                "interactive": {
                    "type": "button",
                    "body": {"text": "Pay now?"},
                    "action": {"buttons": [{"type": "reply", "reply": {"id": "yes", "title": "Yes"}}]},
                },
            },
            {"type": "image", "image": {"link": "https://shop.example/bill.png"}},
        ]
    }
    answer = Answer(status=200, body=json.dumps(rich).encode(), content_type="application/json")
    with CallbackRecorder.in_thread(answer, path="/mo") as app:
        ((hello, _), _) = simulate_blocks(app.port)
        said = run_one(tmp_path, hello)
        assert said.returncode == 0, said.stdout + said.stderr
        assert "WhatsApp: a rich reply, 2 messages in order: interactive button, image" in said.stdout
        # Without --whatsapp the same answer is bad_response, with a hint.
        sms = run_one(tmp_path, hello.replace(" --whatsapp", ""))
        assert sms.returncode != 0 and "bad_response" in sms.stdout + sms.stderr, sms.stdout
