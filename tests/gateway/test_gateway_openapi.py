"""/openapi.json is true to the API: schemathesis (every check: status codes, content types, answer
schemas, schema-valid requests accepted and invalid ones refused, methods, stateful sequences) runs
against a real ``mogateway serve`` and finds nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, clean_env, start_serve

CONFIG = Path(__file__).with_name("schemathesis.toml")


def _schemathesis(url: str, cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "schemathesis.cli", "--no-color", "--config-file", str(CONFIG), "run"]
    return subprocess.run(
        [*command, f"{url}/openapi.json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_schemathesis_finds_nothing_the_openapi_document_does_not_say(tmp_path: Path) -> None:
    env = clean_env(
        MOGATEWAY_DATABASE=str(tmp_path / "journal.db"),
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",  # generated callback hosts are not resolved
        MOGATEWAY_WORKERS="1",
    )
    gateway = start_serve(tmp_path, env)
    try:
        # The document names both token schemes and problem answers, so this is what is checked.
        doc = httpx.get(gateway.url + "/openapi.json").json()
        assert set(doc["components"]["securitySchemes"]) == {"admin", "ingest"}
        run = _schemathesis(
            gateway.url,
            tmp_path,
            env,
            "--checks",
            "all",
            "--max-examples",
            os.environ.get("MOGATEWAY_SCHEMATHESIS_EXAMPLES", "25"),
            "--seed",
            "20261123",
            "--generation-database",
            ":memory:",
        )
        report = run.stdout[-20000:] + run.stderr[-5000:]
        assert run.returncode == 0, report
        operations = sum(len(item) for item in doc["paths"].values())
        assert f"Tested: {operations}" in run.stdout, report  # every operation was tried
        assert gateway.process.poll() is None, "the gateway died under schemathesis"
    finally:
        gateway.stop()
    assert "Traceback" not in gateway.stderr(), gateway.stderr()[-5000:]
