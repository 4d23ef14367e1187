"""``mogateway backup`` while a real ``mogateway serve`` (default workers) takes MOs, and ``mogateway
restore`` refusing while it serves and working once it is stopped."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    INGEST_TOKEN,
    ServeProcess,
    clean_env,
    mogateway_command,
    start_serve,
)

pytestmark = pytest.mark.slow

ENV = clean_env(
    MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN, MOGATEWAY_LOG_LEVEL="warning"
)


def run(*args: str, cwd: Path, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mogateway_command(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


class Pusher:
    """Threads pushing MOs over HTTP until stopped; every acknowledged id with when it was acknowledged."""

    def __init__(self, url: str, threads: int = 3, limit: int = 6000) -> None:
        self.url = url
        self.limit = limit
        self.acked: list[tuple[float, str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self) -> Pusher:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def acked_before(self, moment: float) -> set[str]:
        with self._lock:
            return {mid for at, mid in self.acked if at < moment}

    def _run(self, n: int) -> None:
        headers = {"authorization": f"Bearer {INGEST_TOKEN}"}
        with httpx.Client(timeout=10.0) as http:
            i = 0
            while not self._stop.is_set() and self.count() < self.limit:
                i += 1
                body = {
                    "shortcode": "56767",
                    "msisdn": f"9198100{n:01d}{i % 10000:04d}",
                    "message": f"m{n}-{i}",
                }
                try:
                    resp = http.post(self.url + "/v1/inbound", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    self.errors.append(str(exc))
                    continue
                if resp.status_code != 202:
                    self.errors.append(f"{resp.status_code} {resp.text[:100]}")
                    continue
                done = time.monotonic()
                with self._lock:
                    self.acked.append((done, str(resp.json()["id"])))


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s")
        time.sleep(0.02)


def ids_in(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return {str(r[0]) for r in conn.execute("SELECT id FROM messages")}
    finally:
        conn.close()


def test_backup_while_serving_then_restore(tmp_path: Path) -> None:
    gateway: ServeProcess = start_serve(tmp_path, ENV)  # default workers: one per core
    copy = tmp_path / "copies" / "journal-copy.db"
    try:
        with Pusher(gateway.url) as pusher:
            wait_for(lambda: pusher.count() >= 1500, 120, "1500 acknowledged MOs")
            began = time.monotonic()
            acknowledged = pusher.acked_before(began)
            copy.parent.mkdir()
            result = run("backup", str(copy), cwd=tmp_path)
            after_backup = pusher.count()
        assert result.returncode == 0, result.stderr
        assert after_backup > len(acknowledged), "the gateway took no MO while the backup ran"
        assert not pusher.errors[:1]
        held = ids_in(copy)
        assert acknowledged <= held, f"{len(acknowledged - held)} acknowledged MOs are not in the copy"
        assert f"backup {copy}: {len(held)} messages" in result.stdout
        assert "integrity ok" in result.stdout
        later = {mid for _, mid in pusher.acked} - held
        assert later, "every MO was in the copy: nothing arrived after it began"

        # The gateway serves: restore refuses and changes nothing.
        before = (tmp_path / "mogateway.db").stat().st_ino
        refused = run("restore", str(copy), cwd=tmp_path)
        assert refused.returncode == 1, refused
        assert "a running gateway (pid " in refused.stderr and "stop the gateway first" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert (tmp_path / "mogateway.db").stat().st_ino == before
        assert not list(tmp_path.glob("mogateway.db.before-restore-*"))
    finally:
        assert gateway.stop() == 0

    restored = run("restore", str(copy), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert f"restored {len(held)} messages" in restored.stdout
    kept = list(tmp_path.glob("mogateway.db.before-restore-*[0-9]"))
    assert len(kept) == 1 and later <= ids_in(kept[0]), "the replaced journal was not kept whole"

    again = start_serve(tmp_path, ENV, log_name="serve-again")
    try:
        with httpx.Client(timeout=10.0, headers={"authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
            for mid in sorted(held)[:: max(1, len(held) // 200)]:
                resp = http.get(f"{again.url}/v1/messages/{mid}")
                assert resp.status_code == 200, (mid, resp.text)
            gone = sorted(later)[0]
            assert http.get(f"{again.url}/v1/messages/{gone}").status_code == 404
    finally:
        assert again.stop() == 0


def test_restore_refuses_a_damaged_copy_and_a_gateway_waits_for_a_restore(tmp_path: Path) -> None:
    from mogateway.edges.journal_hold import JournalHold

    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\0" + b"\x07" * 8192)
    refused = run("restore", str(bad), cwd=tmp_path)
    assert refused.returncode == 1
    assert "nothing was changed" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "mogateway.db").exists()

    hold = JournalHold(str(tmp_path / "mogateway.db"))
    hold.take(exclusive=True)  # as a restore does while it replaces the file
    try:
        started = subprocess.run(
            [*mogateway_command(), "serve", "--port", "1"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        hold.release()
    assert started.returncode == 1
    assert "being replaced by `mogateway restore`" in started.stderr


def test_postgresql_journal_points_to_its_own_tools(tmp_path: Path) -> None:
    env = {**ENV, "MOGATEWAY_DATABASE": "postgresql://postgres@127.0.0.1:5432/postgres"}
    for command in ("backup", "restore"):
        result = run(command, str(tmp_path / "x.db"), cwd=tmp_path, env=env)
        assert result.returncode == 2
        assert "pg_dump" in result.stderr and "docs/operations.md" in result.stderr
