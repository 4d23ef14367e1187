"""The real gateway of the SDK's end-to-end tests: ``mogateway serve`` in a subprocess on 127.0.0.1, an
httpx client on its admin API, and an MO pushed in and followed until its state is final."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import free_port, serve_settings

from mogateway.core.timeline import FINAL_STATES


@contextmanager
def running_gateway(
    workdir: Path, base_env: Mapping[str, str], admin_token: str, ingest_token: str, **settings: str
) -> Iterator[httpx.Client]:
    """``mogateway serve`` until the block ends, and a client on its API with ``admin_token``.

    Its environment is ``base_env`` with the journal in ``workdir``, the two tokens, callbacks to
    loopback allowed (the application runs there), warnings only, and ``settings`` (MOGATEWAY_*). Its
    output goes to ``workdir``/gateway.log, a file, not a pipe: a chatty gateway can never block on a
    full pipe nobody reads."""
    tokens = {"MOGATEWAY_ADMIN_TOKEN": admin_token, "MOGATEWAY_INGEST_TOKEN": ingest_token}
    env = {**base_env, **serve_settings(workdir, **tokens, **settings)}
    port = free_port()
    log_path = workdir / "gateway.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mogateway", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gateway exited: {log_path.read_text()}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start within 20 s")
            time.sleep(0.1)
        with httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {admin_token}"}, timeout=10
        ) as api:
            yield api
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def push_until_final(api: httpx.Client, ingest_token: str, inbound: dict[str, Any]) -> dict[str, Any]:
    """POST ``inbound`` to /v1/inbound with ``ingest_token``; the message once its state is final."""
    pushed = httpx.post(
        str(api.base_url) + "/v1/inbound",
        json=inbound,
        headers={"authorization": f"Bearer {ingest_token}"},
        timeout=10,
    )
    assert pushed.status_code == 202, pushed.text
    mo_id = pushed.json()["id"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        record: dict[str, Any] = api.get(f"/v1/messages/{mo_id}").json()
        if record["state"] in FINAL_STATES:
            return record
        time.sleep(0.05)
    raise AssertionError(f"message {mo_id} did not settle: {record}")
