"""Where ``mogateway serve`` puts the tokens it generates: an owner-only file, never the log.

(The SQLite default — ``mogateway.tokens`` next to ``mogateway.db`` — is covered with the rest of the
start-up in test_gateway_serve.py.)
"""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import time
from pathlib import Path

import pytest
from gateway_harness import GatewayClient, clean_env, free_port, mogateway_command, start_serve

from postgres_databases import throwaway_database

pytestmark = pytest.mark.slow


def read_tokens(path: Path) -> dict[str, str]:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def assert_tokens_work(url: str, tokens: dict[str, str]) -> None:
    gw = GatewayClient(
        url, admin_token=tokens["MOGATEWAY_ADMIN_TOKEN"], ingest_token=tokens["MOGATEWAY_INGEST_TOKEN"]
    )
    try:
        assert gw.admin("GET", "/v1/clients").status_code == 200
        assert gw.ingest("POST", "/v1/inbound", json={}).status_code == 422  # authorised, then refused
    finally:
        gw.close()


def test_on_postgresql_the_tokens_file_is_in_the_working_directory(tmp_path: Path) -> None:
    with throwaway_database("mogw_tokens") as url:
        running = start_serve(tmp_path, clean_env(MOGATEWAY_DATABASE=url))
        try:
            tokens = read_tokens(tmp_path / "mogateway.tokens")
            assert_tokens_work(running.url, tokens)
            assert not any(token in running.stderr() for token in tokens.values())
        finally:
            running.stop()


def test_the_tokens_file_setting_and_a_configured_token(tmp_path: Path) -> None:
    target = tmp_path / "secrets" / "gw.tokens"
    target.parent.mkdir()
    configured = "configured-admin-token-0123456789"
    env = clean_env(MOGATEWAY_TOKENS_FILE=str(target), MOGATEWAY_ADMIN_TOKEN=configured)
    running = start_serve(tmp_path, env)
    try:
        tokens = read_tokens(target)
        assert set(tokens) == {"MOGATEWAY_INGEST_TOKEN"}  # only what was generated
        assert_tokens_work(running.url, {**tokens, "MOGATEWAY_ADMIN_TOKEN": configured})
        assert "generated the ingest token" in running.stderr()
        assert tokens["MOGATEWAY_INGEST_TOKEN"] not in running.stderr()
        assert not (tmp_path / "mogateway.tokens").exists()
    finally:
        running.stop()


def test_an_unwritable_tokens_file_is_a_warning_not_a_leak(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-directory" / "gw.tokens"  # unwritable even for root
    running = start_serve(tmp_path, clean_env(MOGATEWAY_TOKENS_FILE=str(missing)))
    try:
        err = running.stderr()
        assert "could not write" in err and "kept in the journal" in err
        assert "token: " not in err  # stderr is not a terminal: no token printed
        # The tokens are in the journal, where the CLI on this machine finds them.
        cli = subprocess.run(
            [*mogateway_command(), "clients", "list", "--json"],
            cwd=tmp_path,
            env=clean_env(MOGATEWAY_URL=running.url),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
    finally:
        running.stop()


def test_on_a_terminal_the_tokens_are_printed_as_well(tmp_path: Path) -> None:
    """A person who started the gateway by hand sees the tokens; the file holds the same ones."""
    master, slave = pty.openpty()
    port = free_port()
    process = subprocess.Popen(
        [*mogateway_command(), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while seen.count(b" token: ") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen += os.read(master, 65536)
        shown = dict(
            line.strip().split(" token: ", 1)
            for line in seen.decode(errors="replace").splitlines()
            if " token: " in line
        )
        tokens = read_tokens(tmp_path / "mogateway.tokens")
        assert shown == {
            "admin": tokens["MOGATEWAY_ADMIN_TOKEN"],
            "ingest": tokens["MOGATEWAY_INGEST_TOKEN"],
        }
    finally:
        process.terminate()
        process.wait(15)
        os.close(master)
