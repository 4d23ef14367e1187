"""Files that hold the generated tokens, numbers and texts are the gateway's user's alone, whatever the
umask: under umask 022 (which gives 0644 by default) ``mogateway serve``'s journal with its -wal and
-shm, ``mogateway backup``'s copy, ``restore``'s journal and retention's exports are 0600, and the
directories made for them 0700; ``mogateway doctor`` names any of them, and any kept WhatsApp media
(``whatsapp_media_store``, made private by tests/whatsapp/test_whatsapp_media_store.py), the group or
others may read."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, clean_env, free_port, mogateway_command, start_serve

from mogateway.service.retention_export import DayFile

pytestmark = pytest.mark.slow

ENV = clean_env(
    MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN, MOGATEWAY_LOG_LEVEL="warning"
)


def _umask_022() -> None:
    os.umask(0o022)


def mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mogateway_command(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_umask_022,
    )


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_serve_backup_and_restore_write_private_files_under_umask_022(tmp_path: Path) -> None:
    journal = tmp_path / "data" / "journal" / "mogateway.db"
    env = {**ENV, "MOGATEWAY_DATABASE": str(journal), "MOGATEWAY_ALLOW_PRIVATE_CALLBACKS": "true"}
    gateway = start_serve(tmp_path, env, preexec_fn=_umask_022)
    try:
        added = httpx.post(
            gateway.url + "/v1/clients",
            json={"name": "app", "shortcodes": ["56767"], "callback_url": "http://127.0.0.1:9/cb"},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert added.status_code == 201, added.text
        journal_modes = {p.name: mode(p) for p in journal.parent.glob("mogateway.db*")}
        assert {"mogateway.db", "mogateway.db-wal", "mogateway.db-shm"} <= set(journal_modes)
        assert set(journal_modes.values()) == {"0600"}, journal_modes
        assert mode(journal.parent) == mode(journal.parent.parent) == "0700"

        copy = tmp_path / "backups" / "daily" / "copy.db"
        made = run("backup", str(copy), "--database", str(journal), cwd=tmp_path, env=env)
        assert made.returncode == 0, made.stderr
        assert mode(copy) == "0600"  # it holds the tokens in clear
        assert mode(copy.parent) == mode(copy.parent.parent) == "0700"
        assert list(copy.parent.iterdir()) == [copy]
    finally:
        assert gateway.stop() == 0

    os.chmod(journal, 0o644)  # as an older mogateway left it: restore puts a private file in its place
    put = run("restore", str(copy), "--database", str(journal), cwd=tmp_path, env=env)
    assert put.returncode == 0, put.stdout + put.stderr
    assert mode(journal) == "0600"


def test_retention_exports_are_private_under_umask_022(tmp_path: Path, umask_022: None) -> None:
    directory = tmp_path / "exports" / "sms"
    day = DayFile(directory, 86_400.0 * 20_000)
    day.add([((86_400.0 * 20_000 + 1, "m1"), b'{"id": "m1", "received_at": 1728000001.0}\n')])
    day.commit()
    assert [mode(p) for p in directory.iterdir()] == ["0600"]
    assert mode(directory) == mode(directory.parent) == "0700"


def test_doctor_names_journal_backup_and_export_files_others_may_read(tmp_path: Path) -> None:
    journal = tmp_path / "mogateway.db"
    exports = tmp_path / "exports"
    backups = tmp_path / "backups"
    env = {
        **ENV,
        "MOGATEWAY_DATABASE": str(journal),
        "MOGATEWAY_RETENTION_EXPORT_DIR": str(exports),
        "MOGATEWAY_PORT": str(free_port()),  # no gateway there
    }
    gateway = start_serve(tmp_path, env, preexec_fn=_umask_022)
    deadline = time.monotonic() + 30
    while not exports.exists():  # retention's first sweep makes it, soon after the start
        assert time.monotonic() < deadline, "retention made no export directory"
        time.sleep(0.05)
    assert gateway.stop() == 0
    made = run("backup", str(backups / "copy.db"), "--database", str(journal), cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    assert mode(exports) == "0700"  # made by retention's first sweep, under serve's own umask
    (exports / "messages-2026-11-01.jsonl").write_text("{}\n")
    os.chmod(exports / "messages-2026-11-01.jsonl", 0o600)

    def file_modes(*args: str) -> dict[str, str]:
        result = run("doctor", "--json", *args, cwd=tmp_path, env=env)
        found = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
        return found["file-modes"]

    private = file_modes("--backups", str(backups))
    assert private["status"] == "ok", private

    shutil.copy(journal, tmp_path / "kept-copy.db")  # a backup beside the journal, copied by hand
    os.chmod(tmp_path / "kept-copy.db", 0o644)
    os.chmod(journal, 0o640)
    os.chmod(backups / "copy.db", 0o604)
    os.chmod(exports / "messages-2026-11-01.jsonl", 0o644)
    os.chmod(exports, 0o755)
    exposed = file_modes("--backups", str(backups))
    assert exposed["status"] == "warn" and "chmod 600" in exposed["action"]
    for path, shown in (
        (journal, "0640"),
        (tmp_path / "kept-copy.db", "0644"),
        (backups / "copy.db", "0604"),
        (exports, "0755"),
    ):
        assert f"{path} ({shown})" in exposed["detail"], exposed["detail"]
    assert "messages-2026-11-01.jsonl (0644)" in exposed["detail"]
    assert str(backups / "copy.db") not in file_modes()["detail"]  # backups elsewhere: --backups


def test_doctor_names_kept_whatsapp_media_others_may_read(tmp_path: Path) -> None:
    store = tmp_path / "media"
    store.mkdir(mode=0o755)
    os.chmod(store, 0o755)
    kept = store / "2lsqbom9gc7jn5j105giu25n54"
    kept.write_bytes(b"a photo")
    os.chmod(kept, 0o644)  # as an older mogateway (or a copy by hand) left them
    env = {
        **ENV,
        "MOGATEWAY_DATABASE": str(tmp_path / "mogateway.db"),
        "MOGATEWAY_WHATSAPP_MEDIA_STORE": str(store),
        "MOGATEWAY_PORT": str(free_port()),  # no gateway there
    }

    def file_modes() -> dict[str, str]:
        result = run("doctor", "--json", cwd=tmp_path, env=env)
        found = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
        return found["file-modes"]

    exposed = file_modes()
    assert exposed["status"] == "warn" and "chmod 600" in exposed["action"]
    assert f"{store} (0755)" in exposed["detail"] and f"{kept} (0644)" in exposed["detail"]
    os.chmod(store, 0o700)
    os.chmod(kept, 0o600)
    private = file_modes()
    assert (
        private["status"] == "ok"
        and private["detail"] == "2 journal, backup, export and media files are private"
    )
