"""Fixtures: a fake Graph API on 127.0.0.1 per test, and a runner for the real ``mogateway`` command."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from typer.testing import CliRunner

from mogateway.cli import app
from mogateway.testing.fake_graph import FakeGraphServer, default_fixtures
from mogateway.testing.fake_graph.fixtures import APP_ID, DEST_WABA, TOKEN

PIN = "135790"


@dataclass
class Fake:
    """The running fake plus helpers to drive its control endpoints over HTTP."""

    server: FakeGraphServer
    http: httpx.Client

    @property
    def url(self) -> str:
        return self.server.url

    def outbox(self, phone: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self.http.get("/__fake/outbox", params={"phone": phone}).json()["data"]
        return data

    def last_code(self, phone: str) -> str:
        return str(self.outbox(phone)[-1]["code"])

    def fault(self, **fields: Any) -> None:
        self.http.post("/__fake/faults", json=fields).raise_for_status()

    def clear_faults(self) -> None:
        self.http.delete("/__fake/faults").raise_for_status()

    def advance(self, seconds: float) -> None:
        self.http.post("/__fake/clock", json={"advance_s": seconds}).raise_for_status()

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = self.http.get("/__fake/state").json()
        return data

    def requests(self, method: str | None = None, path_end: str | None = None) -> list[dict[str, Any]]:
        log: list[dict[str, Any]] = self.http.get("/__fake/requests").json()["data"]
        return [
            r
            for r in log
            if (method is None or r["method"] == method)
            and (path_end is None or r["path"].endswith(path_end))
        ]


@pytest.fixture
def fixtures() -> dict[str, Any]:
    """The built-in world; tests may edit it before ``fake`` starts."""
    return default_fixtures()


@pytest.fixture
def fake(fixtures: dict[str, Any]) -> Iterator[Fake]:
    with FakeGraphServer(fixtures) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        yield Fake(server, http)


@dataclass
class Result:
    exit_code: int
    output: str


@dataclass
class Migrate:
    """Runs ``mogateway waba migrate`` with the common arguments for one number."""

    fake: Fake
    state: Path
    phone: str = "+91 98765 43210"
    waba: str = DEST_WABA
    token: str = TOKEN

    def command(self) -> list[str]:
        """``waba migrate`` with the fake, the WABA, the number and the state file: what every run says."""
        return [
            "waba",
            "migrate",
            "--graph-url",
            self.fake.url,
            "--waba-id",
            self.waba,
            "--phone",
            self.phone,
            "--state",
            str(self.state),
        ]

    def __call__(
        self, *extra: str, input: str | None = None, token: str | None = None, pin: bool = True
    ) -> Result:
        args = [*self.command(), "--yes"]
        if pin:
            args += ["--pin", PIN]
        env = {"WABA_TOKEN": token or self.token, "MOGATEWAY_WABA_TIME_SCALE": "0"}
        result = CliRunner().invoke(app, [*args, *extra], input=input, env=env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Result(result.exit_code, result.output)

    def complete(self, *extra: str, max_runs: int = 4) -> list[Result]:
        """Run, feeding the code from the outbox whenever the tool stops for it, until it ends."""
        results = [self(*extra)]
        while results[-1].exit_code == 3 and len(results) < max_runs:
            results.append(self(*extra, "--code", self.fake.last_code(self.phone)))
        return results

    def saved(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state.read_text())
        return data


@pytest.fixture
def migrate(fake: Fake, tmp_path: Path) -> Migrate:
    return Migrate(fake, tmp_path / "state.json")


class Hooks:
    """A real webhook endpoint on loopback that answers Meta's handshake for ``token`` (403 otherwise)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.echo_any = False  # True: answers every challenge, whatever the token (a careless endpoint)
        self.handshakes: list[dict[str, str]] = []
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                hooks.handshakes.append(query)
                ok = query.get("hub.mode") == "subscribe" and (
                    hooks.echo_any or query.get("hub.verify_token") == hooks.token
                )
                body = query.get("hub.challenge", "").encode() if ok else b"forbidden"
                self.send_response(200 if ok else 403)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/whatsapp/webhook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    """A webhook endpoint answering the handshake for ``verify-secret-0042``."""
    endpoint = Hooks("verify-secret-0042")
    try:
        yield endpoint
    finally:
        endpoint.close()


__all__ = ["APP_ID", "DEST_WABA", "PIN", "TOKEN", "Fake", "Hooks", "Migrate"]
