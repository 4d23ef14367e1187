"""The files an operator deploys with (``deploy/``): the systemd unit passes ``systemd-analyze verify``,
the alert rules pass their ``promtool test rules`` unit tests, and every metric the rules and the
Grafana dashboard use is in a running gateway's ``/metrics``.

The tools come from Debian packages that ``scripts/ensure-ops-tools.sh`` installs (``scripts/test.sh``
runs it); a missing tool fails these tests, it never skips them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    INGEST_TOKEN,
    GatewayClient,
    clean_env,
    free_port,
    mogateway_command,
    start_serve,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "mogateway.service"
RULES = DEPLOY / "prometheus" / "mogateway-alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "mogateway-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "mogateway-dashboard.json"
OPERATIONS = ROOT / "docs" / "operations.md"


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `bash scripts/ensure-ops-tools.sh`", pytrace=False)
    return found


def verify(unit_text: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` of the unit with ExecStart pointing at this checkout's mogateway (verify
    checks that the program exists)."""
    installed = str(Path(mogateway_command()[0]))
    unit = directory / "mogateway.service"
    unit.write_text(unit_text.replace("/opt/mogateway/venv/bin/mogateway", installed))
    return subprocess.run(
        [tool("systemd-analyze"), "verify", str(unit)], capture_output=True, text=True, timeout=60
    )


def directives(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = UNIT.read_text()
    result = verify(text, tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    unit = directives(text)
    assert unit["Type"] == "notify" and unit["NotifyAccess"] == "main"
    assert int(unit["WatchdogSec"]) > 0 and int(unit["LimitNOFILE"]) >= 65536
    assert unit["User"] == "mogateway" and unit["KillMode"] == "mixed"
    for hardening in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices"):
        assert unit[hardening] in ("yes", "strict"), hardening
    assert "u mogateway " in (DEPLOY / "systemd" / "mogateway.sysusers").read_text()

    # verify does find mistakes: one it must report
    broken = verify(text.replace("Type=notify", "Type=notifyy"), tmp_path)
    assert "Failed to parse service type" in broken.stderr


def test_the_alert_rules_pass_their_unit_tests(tmp_path: Path) -> None:
    promtool = tool("promtool")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name], cwd=RULES.parent, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr

    # The unit tests can fail: a rule that no longer sees a bind go down is caught.
    shutil.copy(RULE_TESTS, tmp_path)
    (tmp_path / RULES.name).write_text(
        RULES.read_text().replace("mogateway_smpp_bind_up == 0", "mogateway_smpp_bind_up < 0")
    )
    caught = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name], cwd=tmp_path, capture_output=True, text=True
    )
    assert caught.returncode != 0 and "MogatewayBindDown" in caught.stdout + caught.stderr


def test_every_alert_has_a_runbook_entry() -> None:
    alerts = re.findall(r"^\s*- alert: (\w+)$", RULES.read_text(), re.M)
    assert len(alerts) >= 8
    headings = {h.strip().lower() for h in re.findall(r"^### (\w+)\s*$", OPERATIONS.read_text(), re.M)}
    for alert in alerts:
        assert alert.lower() in headings, f"docs/operations.md has no runbook entry '### {alert}'"
        assert f"docs/operations.md#{alert.lower()}" in RULES.read_text()


def used_metrics() -> set[str]:
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])]
    text = "\n".join(exprs) + "\n" + RULES.read_text()
    return set(re.findall(r"\bmogateway_[a-z0-9_]+\b", text))


def exposed_metrics(exposition: str) -> set[str]:
    """The names a query can use: every sample's name, and a histogram's _bucket/_sum/_count even before
    it has a sample."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names.update({f"{name}_bucket", f"{name}_sum", f"{name}_count"})
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


@pytest.mark.slow
def test_every_metric_of_the_rules_and_dashboard_is_exposed(tmp_path: Path) -> None:
    config = tmp_path / "mogateway.toml"  # one bind (its host refuses), so that the SMPP families exist
    config.write_text(
        f'[[smpp.binds]]\nname = "b1"\nhost = "127.0.0.1"\nport = {free_port()}\nsystem_id = "x"\n'
    )
    env = clean_env(MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN)
    gateway = start_serve(tmp_path, env, args=["--config", str(config)])
    try:
        # The SMPP families appear once the worker holding the bind has started it: poll for them.
        deadline = time.monotonic() + 30
        while True:
            resp = httpx.get(gateway.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
            assert resp.status_code == 200
            exposed = exposed_metrics(resp.text)
            if "mogateway_smpp_bind_up" in exposed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        assert gateway.stop() == 0
    used = used_metrics()
    assert {"mogateway_smpp_bind_up", "mogateway_callbacks_total", "mogateway_queue_lag"} <= used
    assert {"mogateway_journal_free_bytes", "mogateway_journal_write_errors_total", "mogateway_ready"} <= used
    missing = used - exposed
    assert not missing, f"used but not in /metrics: {sorted(missing)}"


# ------------------------------------------------------------------------------------ hardening

#: What `systemd-analyze security` must find hardened in the unit (issue 36): name -> its line's start.
HARDENED = (
    "PrivateUsers=",
    "ProcSubset=",
    "UMask=",
    "SystemCallFilter=~@privileged",
    "SystemCallFilter=~@resources",
)


def security(unit_text: str, directory: Path) -> tuple[dict[str, bool], float]:
    """``systemd-analyze security --offline=true`` of the unit: each check's name -> passed, and the
    overall exposure level (0 safest, 10 worst)."""
    installed = str(Path(mogateway_command()[0]))
    unit = directory / "mogateway.service"
    unit.write_text(unit_text.replace("/opt/mogateway/venv/bin/mogateway", installed))
    result = subprocess.run(
        [tool("systemd-analyze"), "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = {}
    for line in result.stdout.splitlines():
        mark, _, rest = line.partition(" ")
        if mark in ("✓", "✗") and rest.split():
            checks[rest.split()[0]] = mark == "✓"
    level = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout)
    assert level, result.stdout + result.stderr
    return checks, float(level[1])


def test_systemd_analyze_security_finds_the_unit_hardened(tmp_path: Path) -> None:
    checks, level = security(UNIT.read_text(), tmp_path)
    for name in HARDENED:
        assert checks.get(name) is True, (name, {k: v for k, v in checks.items() if not v})
    assert level <= 1.3, level  # 1.7 before PrivateUsers, ProcSubset, UMask and the narrower filter
    unit = directives(UNIT.read_text())
    assert unit["UMask"] == "0077" and unit["StateDirectoryMode"] == "0700"
    # An export directory outside /var/lib needs ReadWritePaths=: the unit and the docs say so.
    assert "#   ReadWritePaths=" in UNIT.read_text()
    assert "ReadWritePaths=" in OPERATIONS.read_text()

    # The same checks fail for a unit without them: this test sees the difference.
    weaker = re.sub(r"^(PrivateUsers|ProcSubset)=.*$\n", "", UNIT.read_text(), flags=re.M)
    weaker = weaker.replace("SystemCallFilter=~@privileged @resources\n", "").replace(
        "UMask=0077", "UMask=0027"
    )
    loose, loose_level = security(weaker, tmp_path)
    assert not any(loose[name] for name in HARDENED) and loose_level > level


def test_the_gateway_serves_confined_as_the_unit_confines_it(tmp_path: Path) -> None:
    """PrivateUsers=, ProcSubset=pid and SystemCallFilter=~@privileged @resources, done by hand
    (``confined.py``): the gateway starts its workers, takes an MO, calls back, replies and stops."""
    from confined import confined_command

    from mogateway.testing.recorder import Answer, CallbackRecorder

    groups = directives(UNIT.read_text())["SystemCallFilter"].removeprefix("~").split()
    assert groups == ["@privileged", "@resources"]
    probe = (
        "import os\n"
        "calls = (('setuid', lambda: os.setuid(0)), ('setpriority', lambda: os.setpriority(0, 0, 5)))\n"
        "for name, call in calls:\n"
        "    try:\n        call()\n    except PermissionError:\n        print(name, 'refused')\n"
        "print('meminfo', os.path.exists('/proc/meminfo'), 'self', os.path.exists('/proc/self/status'))\n"
    )
    confined = subprocess.run(
        confined_command(groups, [sys.executable, "-c", probe]), capture_output=True, text=True, timeout=60
    )
    assert confined.returncode == 0, confined.stderr
    assert confined.stdout.split("\n")[:3] == [
        "setuid refused",
        "setpriority refused",
        "meminfo False self True",
    ]

    port = free_port()
    env = clean_env(
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        MOGATEWAY_LOG_LEVEL="warning",
    )
    serve = [*mogateway_command(), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    log = tmp_path / "serve.stderr"
    with CallbackRecorder.in_thread(Answer.text("Thanks")) as app, log.open("wb") as err:
        process = subprocess.Popen(
            confined_command(groups, serve), cwd=tmp_path, env=env, stderr=err, start_new_session=True
        )
        gateway = GatewayClient(f"http://127.0.0.1:{port}")
        try:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, log.read_text()
                try:
                    if httpx.get(gateway.url + "/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            gateway.add_client(shortcodes=["56767"], callback_url=app.url)
            done = gateway.wait_state(gateway.push("56767", "VOTE 7")["id"], timeout=20)
            assert done["state"] == "replied", done
        finally:
            gateway.close()
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
    text = log.read_text()
    assert "Traceback" not in text and "Operation not permitted" not in text, text
