"""docs/operations.md, as written: its shell blocks run in bash against a real ``mogateway serve`` started
as the systemd unit starts it, and what the doc says they print and leave behind is what they do.

One machine, unprivileged, under a umask of 022 (the doc promises private files whatever the umask). The
test changes only what a test must: the paths (``/etc/mogateway``, ``/var/lib/mogateway``,
``/var/backups/mogateway`` and ``/opt/mogateway/venv`` move under a temporary directory), the port (8080
may be taken here), the listening address (loopback, not 0.0.0.0) and the doc's placeholders. Lines that
need root or systemd are not run, and each skipped line is checked to be one of these:

* ``systemctl enable --now``, ``start``, ``stop`` and ``restart mogateway``: the test starts the unit's
  own ``ExecStart`` (deploy/systemd/mogateway.service) and stops it by its pid with SIGTERM, as systemd
  does; ``systemctl daemon-reload`` has nothing to reload;
* ``systemd-sysusers`` and the ``install`` of the sysusers file and the unit (system directories);
* ``chown mogateway:mogateway`` (no such user here; the doc itself says "when restore ran as root");
* ``python3 -m venv`` and ``pip install`` of the program (the tests run from its virtual environment;
  an upgrade needs a newer release than the one under test);
* the crontab line's ``runuser -u mogateway --`` and its schedule (the command after them runs).

PostgreSQL's backup (``pg_dump``, archiving) and the runbook's commands are not run here:
tests/ops/test_doctor.py and test_backup_restore.py cover the gateway's side of them."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from gateway_harness import ServeProcess, clean_env, free_port, mogateway_command

from markdown_doc import MarkdownDoc
from mogateway.config.settings import Settings, load_settings
from mogateway.config.whatsapp import WhatsAppSettings
from mogateway.edges.storage import migrations

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/operations.md")
UNIT = ROOT / "deploy" / "systemd" / "mogateway.service"

#: The doc's paths of one machine; the test puts each under its temporary directory.
MACHINE_DIRS = ("/etc/mogateway", "/var/lib/mogateway", "/var/backups/mogateway")
#: A path or URL of the doc's machine inside a line: kept exact when a doc line becomes a pattern.
DOC_PLACE = re.compile(r"(?:/etc|/var/lib|/var/backups)/mogateway(?:/[^\s:,)`]*)?|http://127\.0\.0\.1:8080")
#: A line the test does not run (root or systemd), with why.
SKIPPED = (
    (re.compile(r"^python3 -m venv "), "the tests run from the program's virtual environment"),
    (re.compile(r"^\S*/pip install "), "installs the program: needs a release other than this one"),
    (re.compile(r"^install -m 0644 deploy/systemd/"), "writes system directories (root)"),
    (re.compile(r"^systemd-sysusers$"), "creates a system user (root)"),
    (re.compile(r"^systemctl daemon-reload$"), "systemd"),
    (re.compile(r"^chown mogateway:mogateway "), "no mogateway user here; the doc: when run as root"),
)
UNIT_ACTION = re.compile(r"^systemctl (enable --now|start|stop|restart) mogateway\b")
FINDING = re.compile(r"^(ok|warn|FAIL) +(\S+(?: [^:\s]+)?): (.*)$")


# ------------------------------------------------------------------------------------------ the doc


def section(heading: str) -> str:
    """The text under ``heading`` (its whole line, "## Retention"), up to the next heading of its level
    or a higher one."""
    return DOC.section(heading)


def blocks(heading: str, language: str = "sh") -> list[str]:
    """The fenced blocks of one language under a heading, in order."""
    return DOC.blocks(heading, language)


def quoted(heading: str, starting: str) -> str:
    """A `...` quote in a section's prose that starts with ``starting``, joined across line breaks."""
    text = re.sub(r"[ \t]*\n[ \t]*", " ", section(heading))
    found = re.search(rf"`({re.escape(starting)}[^`]*)`", text)
    assert found, f"{heading!r} no longer quotes {starting!r}: adapt the test"
    return found.group(1)


def doc_headings() -> set[str]:
    """Every heading of docs/operations.md, without its hashes and backquotes."""
    return {line.lstrip("#").strip().replace("`", "") for line in DOC.text.splitlines() if line[:2] == "##"}


# ------------------------------------------------------------------------------------------ the machine


def _umask_022() -> None:
    os.umask(0o022)


def mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


@dataclass
class Machine:
    """The doc's machine under ``root``: its paths, the gateway's port, and the unit that serves."""

    root: Path
    port: int = field(default_factory=free_port)
    serve: ServeProcess | None = None
    starts: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def path(self, doc_path: str) -> Path:
        return Path(self.local(doc_path))

    def local(self, text: str) -> str:
        """``text`` with the doc's paths and port moved to this machine's."""
        for where in MACHINE_DIRS:
            text = text.replace(where, f"{self.root}{where}")
        text = text.replace("/opt/mogateway/venv", sys.prefix).replace("8080", str(self.port))
        return text.replace('host = "0.0.0.0"', 'host = "127.0.0.1"')  # a test listens on loopback only

    def shape(self, doc_line: str) -> re.Pattern[str]:
        """A line the doc shows as a pattern: its paths and URLs this machine's, exactly; every other
        number any number, every size unit any unit (the doc's values are an example's)."""
        parts = []
        at = 0
        for place in DOC_PLACE.finditer(doc_line):
            parts.append(_any_numbers(doc_line[at : place.start()]))
            parts.append(re.escape(self.local(place.group(0))))
            at = place.end()
        parts.append(_any_numbers(doc_line[at:]))
        return re.compile("".join(parts))

    def env(self) -> dict[str, str]:
        """An operator's shell: no MOGATEWAY_* setting, ``mogateway`` on the PATH."""
        env: dict[str, str] = clean_env()
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{Path(sys.prefix) / 'bin'}:{os.defpath}"
        return env

    def sh(self, commands: str) -> subprocess.CompletedProcess[str]:
        """``commands`` in bash as the doc writes them (paths and port moved), under umask 022."""
        script = "set -euo pipefail\numask 022\n" + self.local(commands)
        return subprocess.run(
            ["bash", "-c", script], cwd=self.root, env=self.env(), capture_output=True, text=True, timeout=120
        )

    def run_block(self, block: str) -> list[subprocess.CompletedProcess[str]]:
        """A shell block line by line: ``systemctl ... mogateway`` acts on the unit, a line needing root
        or systemd is skipped (recorded in :attr:`skipped`), the rest runs in bash, a here-document
        whole. Each run must succeed; returns them."""
        ran = []
        pending: list[str] = []

        def flush() -> None:
            if pending:
                result = self.sh("\n".join(pending) + "\n")
                assert result.returncode == 0, f"{pending}: {result.stdout}{result.stderr}"
                ran.append(result)
                pending.clear()

        in_heredoc = ""
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if in_heredoc:
                pending.append(line)
                in_heredoc = "" if line.strip() == in_heredoc else in_heredoc
                continue
            if heredoc := re.search(r"<<'(\w+)'", line):
                in_heredoc = heredoc.group(1)
            action = UNIT_ACTION.match(command)
            if action:
                flush()
                self.act(action.group(1))
            elif any(pattern.match(command) for pattern, _ in SKIPPED):
                self.skipped.append(command)
            else:
                pending.append(line)
        flush()
        return ran

    def act(self, action: str) -> None:
        if action in ("stop", "restart"):
            self.stop()
        if action != "stop":
            self.start()

    def start(self) -> None:
        """The unit's ``ExecStart`` (paths moved), under umask 022 (the unit says 0077: the gateway must
        not need it); ready once ``/healthz`` answers on the settings' port."""
        assert self.serve is None, "the unit is already running"
        (exec_start,) = re.findall(r"^ExecStart=(.*)$", UNIT.read_text(), flags=re.M)
        argv = self.local(exec_start).split()
        assert argv[0] == mogateway_command()[0], argv
        self.starts += 1
        log = self.root / f"serve-{self.starts}.stderr"
        with log.open("wb") as err:
            process = subprocess.Popen(
                argv,
                cwd=self.root,
                env=self.env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=_umask_022,
                start_new_session=True,
            )
        self.serve = ServeProcess(process, self.url, log)
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"mogateway serve exited: {self.serve.stderr()}"
            try:
                if httpx.get(self.url + "/healthz", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no /healthz within 60 s: {self.serve.stderr()}"
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM to the unit's main process, as ``systemctl stop`` (``KillMode=mixed``); it exits 0."""
        assert self.serve is not None, "the unit is not running"
        serve, self.serve = self.serve, None
        assert serve.stop() == 0, serve.stderr()

    def tokens(self) -> dict[str, str]:
        """The generated tokens, where the doc says to read them."""
        text = self.path("/var/lib/mogateway/mogateway.tokens").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if line.startswith("MOGATEWAY_"))


def _any_numbers(text: str) -> str:
    pattern = re.escape(text)
    pattern = re.sub(r"\d+(?:\\\.\d+)?", r"[0-9]+(?:\\.[0-9]+)?", pattern)
    return re.sub(r"\b[KMGT]iB\b", "(?:B|[KMGT]iB)", pattern)


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    here = Machine(tmp_path / "machine")
    here.root.mkdir()
    try:
        yield here
    finally:
        if here.serve is not None:
            here.serve.stop()


# ------------------------------------------------------------------------------------------ steps


def push(machine: Machine, text: str, received_at: str | None = None) -> str:
    """One MO over HTTP with the generated ingest token; its id once acknowledged."""
    body = {"shortcode": "56767", "msisdn": "919810012345", "message": text}
    if received_at is not None:
        body["received_at"] = received_at
    token = machine.tokens()["MOGATEWAY_INGEST_TOKEN"]
    resp = httpx.post(
        machine.url + "/v1/inbound", json=body, headers={"authorization": f"Bearer {token}"}, timeout=30
    )
    assert resp.status_code == 202, resp.text
    return str(resp.json()["id"])


def status_of(machine: Machine, message_id: str) -> int:
    token = machine.tokens()["MOGATEWAY_ADMIN_TOKEN"]
    resp = httpx.get(
        f"{machine.url}/v1/messages/{message_id}", headers={"authorization": f"Bearer {token}"}, timeout=30
    )
    return resp.status_code


def command_and_output(block: str) -> tuple[str, list[str]]:
    """A block showing one ``$ command`` and what it prints."""
    lines = block.strip("\n").splitlines()
    assert lines[0].startswith("$ "), block
    return lines[0][2:], lines[1:]


def findings(lines: list[str]) -> list[tuple[str, str, str]]:
    """(status, check, rest of the line) of doctor's finding lines."""
    found = []
    for line in lines:
        if match := FINDING.match(line):
            status, check, rest = match.groups()
            found.append((status, check, rest))
    return found


# ------------------------------------------------------------------------------------------ tests


def test_retention_settings_example_loads_as_the_doc_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = blocks("## Retention", "toml")
    machine = Machine(tmp_path)
    config = tmp_path / "mogateway.toml"
    config.write_text(machine.local(example))
    settings = load_settings(config)
    assert settings.message_retention_days == 30
    assert settings.retention_export_dir == machine.path("/var/lib/mogateway/exports")
    # What the prose around it says of the settings' defaults.
    prose = " ".join(section("## Retention").split())
    default = re.search(r"`message_retention_days` \(default \*\*(\d+)\*\*", prose)
    assert default and int(default.group(1)) == Settings.model_fields["message_retention_days"].default
    assert "0 keeps everything" in example
    assert load_settings(config, message_retention_days=0).message_retention_days == 0
    assert re.search(r"`\[whatsapp\] max_message_age_s` \(8 days\)", prose)
    assert WhatsAppSettings.model_fields["max_message_age_s"].default == 8 * 86_400
    # The environment's names the doc gives for them are the loader's.
    env_names = re.findall(r"`(MOGATEWAY_[A-Z_]+)`", prose)
    assert env_names == ["MOGATEWAY_MESSAGE_RETENTION_DAYS", "MOGATEWAY_RETENTION_EXPORT_DIR"]
    monkeypatch.setenv("MOGATEWAY_MESSAGE_RETENTION_DAYS", "7")
    monkeypatch.setenv("MOGATEWAY_RETENTION_EXPORT_DIR", str(tmp_path / "elsewhere"))
    assert load_settings(config).message_retention_days == 7
    assert load_settings(config).retention_export_dir == tmp_path / "elsewhere"


def test_install_backup_restore_upgrade_and_doctor_as_written(machine: Machine) -> None:
    # ---- Install: the settings file, the environment file, the start, doctor's "all ok".
    (install,) = blocks("## Install")
    machine.run_block(install)
    assert machine.serve is not None, "the Install block starts the unit"
    config = machine.path("/etc/mogateway/mogateway.toml")
    assert mode(config.parent) == "0755" and mode(machine.path("/etc/mogateway/mogateway.env")) == "0600"
    assert mode(machine.path("/var/lib/mogateway/mogateway.tokens")) == "0600"
    # Retention's example, added to the settings file, takes effect at the next start.
    (retention,) = blocks("## Retention", "toml")
    with config.open("a") as settings_file:
        settings_file.write(machine.local(retention))

    now = time.time()
    kept = [push(machine, f"before the backup {n}") for n in range(3)]
    old_day = dt.datetime.fromtimestamp(now - 40 * 86_400, dt.UTC)
    old = push(machine, "forty days ago", old_day.isoformat().replace("+00:00", "Z"))

    # ---- Backup and restore, SQLite: `mogateway backup FILE` while the gateway serves.
    sqlite = blocks("### SQLite")
    assert len(sqlite) == 3, "the SQLite section's blocks changed: adapt the test"
    command, shown = command_and_output(sqlite[0])
    backup = machine.sh(command)
    assert backup.returncode == 0, backup.stderr
    assert machine.shape(shown[0]).fullmatch(backup.stdout.strip()), (shown[0], backup.stdout)
    assert ": 4 messages (" in backup.stdout
    assert f"schema version {migrations.LATEST}, integrity ok" in backup.stdout
    after_backup = push(machine, "after the backup")

    # The nightly line, without its schedule and `runuser` (root): today's copy, a week kept.
    (cron_line,) = sqlite[1].strip().splitlines()
    nightly = re.fullmatch(r"(?:\S+ ){5}runuser -u mogateway -- (.*)", cron_line)
    assert nightly, cron_line
    copies = machine.path("/var/backups/mogateway")
    stale, recent = copies / "mogateway-2026-01-01.db", copies / "mogateway-2026-01-02.db"
    for copy, days in ((stale, 9), (recent, 6)):
        copy.write_bytes(b"an older copy")
        copy.chmod(0o600)  # as `mogateway backup` made it
        os.utime(copy, (now - days * 86_400, now - days * 86_400))
    ran = machine.sh(nightly.group(1))
    assert ran.returncode == 0, ran.stderr
    today = copies / f"mogateway-{dt.date.today().isoformat()}.db"
    assert today.exists() and not stale.exists() and recent.exists(), sorted(os.listdir(copies))

    # `mogateway restore` refuses while the gateway serves, with the message the doc quotes.
    restore_block = sqlite[2]
    (restore_line,) = [line for line in restore_block.splitlines() if line.startswith("mogateway restore")]
    refused = machine.sh(restore_line)
    assert refused.returncode == 1
    refusal = quoted("### SQLite", "mogateway: a running gateway")
    assert machine.shape(refusal).fullmatch(refused.stderr.strip()), (refusal, refused.stderr)

    # Stop, restore, (chown: root), start: the messages of the backup are there, the later one not.
    journal = machine.path("/var/lib/mogateway/mogateway.db")
    assert "chown mogateway:mogateway /var/lib/mogateway/mogateway.db" in restore_block
    machine.run_block(restore_block)
    assert "chown mogateway:mogateway /var/lib/mogateway/mogateway.db" in machine.skipped
    assert all(status_of(machine, mid) == 200 for mid in kept)
    assert status_of(machine, after_backup) == 404
    aside = sorted(journal.parent.glob("mogateway.db.before-restore-*"))
    (replaced,) = [path for path in aside if re.fullmatch(r"mogateway\.db\.before-restore-[^-]+", path.name)]

    # Retention at that start: the forty-day-old message written to its day's file, then deleted.
    exports = machine.path("/var/lib/mogateway/exports")
    day_file = exports / f"messages-{old_day.date().isoformat()}.jsonl"
    deadline = time.monotonic() + 60
    while not day_file.exists() or status_of(machine, old) != 404:
        assert time.monotonic() < deadline, f"retention did not export and delete {old} within 60 s"
        time.sleep(0.1)
    (line,) = [json.loads(text) for text in day_file.read_text().splitlines()]
    prose = " ".join(section("## Retention").split())
    fields = prose.split("one JSON object per line, ordered by received time:", 1)[1].split("— what", 1)[0]
    promised = set(re.findall(r"`([a-z_]+)`", fields)) - {"http", "smpp", "whatsapp"}
    assert promised <= set(line), promised - set(line)
    assert line["id"] == old and line["text"] == "forty days ago"

    # ---- Upgrade: the backup before it, the restart (the new version: not here), doctor.
    (upgrade,) = blocks("## Upgrade")
    machine.run_block(upgrade)
    assert machine.starts == 3 and machine.path("/var/backups/mogateway/before-upgrade.db").exists()
    assert any("pip install --upgrade" in line for line in machine.skipped)

    # ---- `mogateway doctor`: what it prints, in the shape the doc shows.
    (doctor_block,) = blocks("## `mogateway doctor`")
    command, shown = command_and_output(doctor_block)
    doctor = machine.sh(command)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    printed = doctor.stdout.splitlines()
    assert machine.shape(shown[0]).fullmatch(printed[0]), (shown[0], printed[0])
    settings_lines = printed[1 : printed.index("")]
    assert "  host = 127.0.0.1" in settings_lines and "  port = " + str(machine.port) in settings_lines
    assert "  admin_token = None" in settings_lines  # generated, not configured: the doc says so
    assert all(token not in doctor.stdout for token in machine.tokens().values())
    doc_findings = {check: f"{status:<4}  {check}: {rest}" for status, check, rest in findings(shown)}
    real = findings(printed)
    first = ["schema", "journal-write", "free-space", "queue", "gateway", "ready"]
    assert [check for _, check, _ in real][:6] == first
    doc_order = list(doc_findings)
    for status, check, rest in real:
        line = f"{status:<4}  {check}: {rest}"
        assert line in printed, f"doctor's columns are not the doc's: {line!r}"
        if check == "callbacks":  # all pass: one line, as the prose under the example quotes it
            example = quoted("## `mogateway doctor`", "ok    callbacks:")
            assert machine.shape(example).fullmatch(line), (example, line)
            continue
        assert check in doc_findings, f"doctor checks {check!r}; the doc's example does not show it"
        if check == "compiled":  # the build's state: compiled or pure Python, and why
            assert re.fullmatch(r"compiled \(\d+ modules built by mypyc\)|pure Python \(.+\)", rest), rest
            continue
        assert machine.shape(doc_findings[check]).fullmatch(line), (doc_findings[check], line)
    assert [c for _, c, _ in real if c in doc_order] == [c for c in doc_order if c in {c for _, c, _ in real}]
    schema = next(rest for _, check, rest in real if check == "schema")
    latest = migrations.LATEST
    assert f"schema version {latest}, this mogateway {latest}; 3 messages" in schema  # 4 restored, 1 swept
    opened = next(rest for _, check, rest in real if check == "open-files")
    assert machine.serve is not None and opened.endswith(f"(pid {machine.serve.process.pid})"), opened
    total = re.fullmatch(r"(\d+) failed, (\d+) warnings, (\d+) checks", printed[-1])
    assert total and total.groups() == ("0", str(sum(s == "warn" for s, _, _ in real)), str(len(real)))
    assert machine.shape(shown[-1]).fullmatch(printed[-1])

    # --json: the keys the doc names.
    as_json = machine.sh(command + " --json")
    report = json.loads(as_json.stdout)
    keys = re.search(
        r'`\{"ok": \.\.\., "settings": \{\.\.\.\}, "findings": \[\{(.*?)\}\]\}`',
        " ".join(section("## `mogateway doctor`").split()),
    )
    assert keys and set(report) == {"ok", "settings", "findings"} and report["ok"] is True
    finding_keys = set(re.findall(r'"(\w+)"', keys.group(1)))
    assert all(set(f) == finding_keys for f in report["findings"]), report["findings"]

    # ---- Files and their modes: what the gateway, backup, restore and retention made, under umask 022.
    assert machine.serve is not None
    lib, backups = journal.parent, machine.path("/var/backups/mogateway")
    made = {
        lib: "0700",
        journal: "0600",
        lib / "mogateway.db-wal": "0600",
        lib / "mogateway.db-shm": "0600",
        lib / "mogateway.tokens": "0600",
        exports: "0700",
        day_file: "0600",
        backups.parent: "0700",  # made by `mogateway backup` for its first copy
        backups: "0700",
        backups / "mogateway-2026-11-27.db": "0600",
        today: "0600",
        backups / "before-upgrade.db": "0600",
        **{path: "0600" for path in aside},
    }
    assert {str(p): mode(p) for p in made} == {str(p): m for p, m in made.items()}
    doctor_at = "mogateway doctor --config /etc/mogateway/mogateway.toml"  # the doc's paths: sh() moves them
    files = machine.sh(f"{doctor_at} --backups /var/backups/mogateway --json")
    (file_modes,) = [f for f in json.loads(files.stdout)["findings"] if f["check"] == "file-modes"]
    assert file_modes["status"] == "ok", file_modes
    os.chmod(journal, 0o644)  # as an older mogateway left it: it keeps its mode, and doctor says so
    files = machine.sh(f"{doctor_at} --json")
    (file_modes,) = [f for f in json.loads(files.stdout)["findings"] if f["check"] == "file-modes"]
    assert file_modes["status"] == "warn" and f"{journal} (0644)" in file_modes["detail"]
    assert "chmod 600" in file_modes["action"] and "700" in file_modes["action"]
    # Last (SQLite adds its -shm beside what it opens): the journal restore replaced was kept whole,
    # with the MO acknowledged after the backup (in its -wal when the gateway was stopped).
    with contextlib.closing(sqlite3.connect(replaced)) as kept_aside:
        assert kept_aside.execute("SELECT 1 FROM messages WHERE id = ?", (after_backup,)).fetchall()


def test_doctor_points_to_sections_the_doc_has(machine: Machine, tmp_path: Path) -> None:
    """A gateway that is not ready (its one SMPP bind's host refuses TCP, so no bind is up): doctor
    fails it, and every place in docs/operations.md its actions send the operator to is a heading
    there (the runbook's alerts are headings)."""
    config = tmp_path / "mogateway.toml"
    config.write_text(
        f'port = {machine.port}\ndatabase = "{tmp_path / "mogateway.db"}"\n\n[[smpp.binds]]\n'
        f'name = "down-bind"\nhost = "127.0.0.1"\nport = {free_port()}\nsystem_id = "a"\npassword = "b"\n'
    )
    env = machine.env()
    with (tmp_path / "serve.stderr").open("wb") as err:
        process = subprocess.Popen(
            [*mogateway_command(), "serve", "--config", str(config), "--host", "127.0.0.1", "--workers", "1"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    machine.serve = ServeProcess(process, machine.url, tmp_path / "serve.stderr")
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, machine.serve.stderr()
        try:
            if httpx.get(machine.url + "/readyz", timeout=2.0).status_code == 503:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the gateway did not answer /readyz 503 within 60 s"
        time.sleep(0.05)
    ran = subprocess.run(
        [*mogateway_command(), "doctor", "--config", str(config), "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 1, ran.stderr
    found = {f["check"]: f for f in json.loads(ran.stdout)["findings"]}
    assert found["ready"]["status"] == "fail" and found["bind down-bind"]["status"] == "fail"
    headings = doc_headings()
    pointed = []
    for finding in found.values():
        for place in re.finditer(r"docs/operations\.md(?:, '?([^':)]+)'?| \(([^)]+)\))", finding["action"]):
            pointed.append(place.group(1) or place.group(2))
    assert pointed, found
    assert [p for p in pointed if p not in headings] == [], sorted(headings)
    machine.stop()
