"""``mogateway doctor`` against real parts: a SQLite journal under a running ``mogateway serve`` with a
bind whose host refuses TCP and a client whose callback URL the guard refuses; a real PostgreSQL and NATS
JetStream; and both unreachable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, clean_env, free_port, mogateway_command, start_serve

from mogateway.cli.doctor_findings import size
from mogateway.edges.storage import migrations
from postgres_databases import throwaway_database

pytestmark = pytest.mark.slow

BIND_PASSWORD = "pw5ecr3t"


def doctor(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mogateway_command(), "doctor", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def by_check(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {f["check"]: f for f in report["findings"]}


def test_sqlite_with_a_bind_down_and_a_refused_callback(tmp_path: Path) -> None:
    closed = free_port()  # nobody listens: the bind's host refuses the connection
    config = tmp_path / "mogateway.toml"
    config.write_text(
        f'[[smpp.binds]]\nname = "down-bind"\nhost = "127.0.0.1"\nport = {closed}\n'
        f'system_id = "aggr01"\npassword = "{BIND_PASSWORD}"\n'
    )
    env = clean_env(MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN)
    gateway = start_serve(
        tmp_path, {**env, "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true"}, args=["--config", str(config)]
    )
    try:
        # Registered while private callbacks were allowed; the operator has since turned that off.
        resp = httpx.post(
            gateway.url + "/v1/clients",
            json={"name": "intranet-app", "shortcodes": ["56767"], "callback_url": "http://127.0.0.1:9/cb"},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert resp.status_code == 201, resp.text
        client_id = resp.json()["id"]

        result = doctor(tmp_path, env, "--config", str(config), "--url", gateway.url, "--json")
        assert result.returncode == 1, result.stderr
        report = json.loads(result.stdout)
        found = by_check(report)
        assert report["ok"] is False
        assert found["schema"]["status"] == "ok"
        assert f"schema version {migrations.LATEST}" in found["schema"]["detail"]
        assert found["journal-write"]["status"] == "ok" and "fsync" in found["journal-write"]["detail"]
        assert found["free-space"]["status"] in ("ok", "warn") and "free of" in found["free-space"]["detail"]
        assert found["queue"]["status"] == "ok"
        assert found["gateway"]["status"] == "ok"
        bind = found["bind down-bind"]
        assert bind["status"] == "fail" and f"127.0.0.1:{closed}" in bind["detail"]
        assert "cannot be reached over TCP" in bind["detail"] and bind["action"]
        assert "last state" in bind["detail"] and "not known" not in bind["detail"]  # the gateway told it
        callback = found["callback intranet-app"]
        assert callback["status"] == "fail" and client_id in callback["detail"]
        assert "127.0.0.1" in callback["detail"] and "allow_private_callbacks" in callback["action"]
        opened = found["open-files"]
        assert opened["status"] == "ok" and f"pid {gateway.process.pid}" in opened["detail"]
        assert report["settings"]["admin_token"] == "(set)"
        assert report["settings"]["smpp"]["binds"][0]["password"] == "(set)"
        assert ADMIN_TOKEN not in result.stdout and BIND_PASSWORD not in result.stdout

        text = doctor(tmp_path, env, "--config", str(config), "--url", gateway.url)
        assert text.returncode == 1
        assert ADMIN_TOKEN not in text.stdout and BIND_PASSWORD not in text.stdout
        lines = [line for line in text.stdout.splitlines() if line.startswith(("ok ", "warn ", "FAIL "))]
        assert len(lines) == len(report["findings"])
        assert all(" -> " in line for line in lines if line.startswith("FAIL"))
        assert any(line.startswith("FAIL  bind down-bind:") for line in lines)
    finally:
        assert gateway.stop() == 0


def test_postgresql_and_nats_reachable(tmp_path: Path) -> None:
    with throwaway_database("mogw_doctor") as url:
        # trust authentication takes any password: one in the URL shows that it is hidden
        with_password = url.replace("postgres@", "postgres:pgPassw0rd@")
        env = clean_env(
            MOGATEWAY_DATABASE=with_password,
            MOGATEWAY_QUEUE="nats://127.0.0.1:4222",
            MOGATEWAY_PORT=str(free_port()),  # no gateway there
        )
        result = doctor(tmp_path, env, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pgPassw0rd" not in result.stdout
    report = json.loads(result.stdout)
    found = by_check(report)
    assert report["ok"] is True
    assert found["journal"]["status"] == "ok"
    assert found["schema"] == {
        "check": "schema",
        "status": "ok",
        "detail": f"schema version {migrations.LATEST}",
        "action": "",
    }
    assert found["journal-write"]["status"] == "ok"
    assert found["clock"]["status"] == "ok" and "differ by" in found["clock"]["detail"]
    assert found["queue"]["status"] == "ok" and "JetStream" in found["queue"]["detail"]
    assert found["gateway"]["status"] == "warn"


def test_postgresql_behind_and_nats_unreachable(tmp_path: Path) -> None:
    with throwaway_database("mogw_doctor", migrate=False) as url:
        env = clean_env(
            MOGATEWAY_DATABASE=url, MOGATEWAY_QUEUE=f"nats://127.0.0.1:{free_port()}", MOGATEWAY_PORT="1"
        )
        result = doctor(tmp_path, env, "--json")
    assert result.returncode == 1
    found = by_check(json.loads(result.stdout))
    assert found["schema"]["status"] == "fail" and "mogateway migrate" in found["schema"]["action"]
    assert found["queue"]["status"] == "fail" and "cannot connect to NATS" in found["queue"]["detail"]

    env = clean_env(
        MOGATEWAY_DATABASE=f"postgresql://postgres@127.0.0.1:{free_port()}/none", MOGATEWAY_PORT="1"
    )
    result = doctor(tmp_path, env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "FAIL  journal: cannot connect to PostgreSQL" in result.stdout


def test_sizes_are_written_in_the_unit_that_fits() -> None:
    # A disk's free space in GiB read as MiB (76.4 GiB shown as "76.4 MiB") hides that all is well.
    assert [size(n) for n in (512, 3.5 * 2**10, 3.4 * 2**20, 76.4 * 2**30, 2.5 * 2**40)] == [
        "512 B",
        "3.5 KiB",
        "3.4 MiB",
        "76.4 GiB",
        "2.5 TiB",
    ]


def test_doctor_hides_passwords_in_url_query_strings_and_user_info(tmp_path: Path) -> None:
    reply = "http://127.0.0.1:9/send?user=acme&password=replyPw7&api_key=replyKey8&to={to}"
    with throwaway_database("mogw_doctor") as url:
        # trust authentication takes any password: those in the URL show that they are hidden
        database = url.replace("postgres@", "postgres:userPw5@") + "?password=queryPw6&sslmode=disable"
        env = clean_env(
            MOGATEWAY_DATABASE=database,
            MOGATEWAY_REPLY_HTTP_URL=reply,
            MOGATEWAY_PORT=str(free_port()),  # no gateway there
        )
        as_json = doctor(tmp_path, env, "--json")
        as_text = doctor(tmp_path, env)
    for result in (as_json, as_text):
        assert "Traceback" not in result.stderr
        for secret in ("userPw5", "queryPw6", "replyPw7", "replyKey8"):
            assert secret not in result.stdout + result.stderr, (secret, result.stdout)
    shown = json.loads(as_json.stdout)["settings"]
    assert shown["reply_http_url"] == "http://127.0.0.1:9/send?user=acme&password=***&api_key=***&to={to}"
    assert shown["database"].startswith("postgresql://postgres:***@127.0.0.1:5432/")
    assert shown["database"].endswith("?password=***&sslmode=disable")
    assert "reply_http_url = http://127.0.0.1:9/send?user=acme&password=***" in as_text.stdout
    assert by_check(json.loads(as_json.stdout))["journal"]["status"] == "ok"  # the URL still worked
