"""The journal's part of ``mogateway doctor``: SQLite (readable, schema, writable with a working fsync,
free space) or PostgreSQL (reachable, schema, writable, durable, and its clock against this machine's)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from typing import Any

from mogateway.cli.doctor_findings import TIMEOUT_S, Finding, size
from mogateway.config import Settings
from mogateway.core.redaction import redact_url
from mogateway.edges.journal_hold import sqlite_path

__all__ = ["check_clock", "check_journal"]

#: The free-space guard's defaults (issue 28 §1: keep 5 % or 1 GiB free, whichever is smaller), used
#: when this mogateway's settings do not have them yet.
_MIN_FREE_BYTES = 1 << 30
_MIN_FREE_PERCENT = 5.0
#: An fsync slower than this makes every group commit (every acknowledged MO) wait as long.
_SLOW_FSYNC_S = 0.1
#: Clocks further apart than these (seconds): a warning, a failure.
_CLOCK_WARN_S = 0.5
_CLOCK_FAIL_S = 5.0


async def check_journal(settings: Settings) -> tuple[list[Finding], Any]:
    """The journal's findings, and an open asyncpg connection for the checks that follow (or None)."""
    if settings.database.startswith(("postgresql://", "postgres://")):
        return await _check_postgres(settings.database)
    path = sqlite_path(settings.database)
    if path is None:
        return [
            Finding(
                "journal",
                "warn",
                "the journal is in memory: everything is lost when it stops",
                "set database to a file (or a postgresql:// URL) for a gateway that keeps MOs",
            )
        ], None
    return _check_sqlite(path, settings), None


def _check_sqlite(path: str, settings: Settings) -> list[Finding]:
    from mogateway.edges.storage.migrations import LATEST as SCHEMA_VERSION
    from mogateway.edges.storage.migrations import sqlite_file_version

    found: list[Finding] = []
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return [
            Finding(
                "journal",
                "fail",
                f"the directory of the journal {path} does not exist",
                f"create {directory}, owned by the user the gateway runs as",
            )
        ]
    if not os.path.exists(path):
        found.append(
            Finding(
                "journal",
                "warn",
                f"no journal at {path} yet",
                "the gateway creates it at its first start; check that database names the file you mean",
            )
        )
    else:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=TIMEOUT_S)
            try:
                found_version = sqlite_file_version(conn)
                count = conn.execute("SELECT count(*) FROM message_states").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return [
                Finding(
                    "journal",
                    "fail",
                    f"cannot read the journal {path}: {exc}",
                    "check the file and its permissions; restore a copy (`mogateway restore`) if "
                    "it is damaged",
                )
            ]
        version = found_version or 0
        if version > SCHEMA_VERSION:
            found.append(
                Finding(
                    "schema",
                    "fail",
                    f"schema version {version}, newer than this mogateway ({SCHEMA_VERSION})",
                    "run the mogateway that wrote it, or a newer one",
                )
            )
        else:
            note = "" if version == SCHEMA_VERSION else " (upgraded in place at the next start)"
            found.append(
                Finding(
                    "schema",
                    "ok",
                    f"SQLite {path}: schema version {version}, this mogateway "
                    f"{SCHEMA_VERSION}{note}; {count} messages",
                )
            )
        if not os.access(path, os.R_OK | os.W_OK):
            found.append(
                Finding(
                    "journal",
                    "fail",
                    f"{path} is not writable by this user ({os.getuid()})",
                    "run doctor as the gateway's user, or give that user the file",
                )
            )
    if not os.access(directory, os.W_OK | os.X_OK):
        found.append(
            Finding(
                "journal",
                "fail",
                f"{directory} is not writable (SQLite writes its -wal and -shm files there)",
                "give the gateway's user write access to the directory",
            )
        )
        return found
    found.append(_fsync_probe(directory))
    found.append(_free_space(directory, settings))
    return found


def _fsync_probe(directory: str) -> Finding:
    try:
        fd, scratch = tempfile.mkstemp(prefix=".mogateway-doctor-", dir=directory)
    except OSError as exc:
        return Finding(
            "journal-write",
            "fail",
            f"cannot create a file in {directory}: {exc.strerror}",
            "check the disk (full? read-only?) and the directory's permissions",
        )
    try:
        os.write(fd, b"\0" * 4096)
        started = time.monotonic()
        os.fsync(fd)
        took = time.monotonic() - started
    except OSError as exc:
        return Finding(
            "journal-write",
            "fail",
            f"a write and fsync in {directory} failed: {exc.strerror}",
            "check the disk (full? read-only? I/O errors in dmesg?)",
        )
    finally:
        os.close(fd)
        os.unlink(scratch)
    if took > _SLOW_FSYNC_S:
        return Finding(
            "journal-write",
            "warn",
            f"writable, but an fsync took {took * 1000:.0f} ms",
            "every group commit waits for the disk: put the journal on a faster (SSD) disk",
        )
    return Finding("journal-write", "ok", f"writable; a write and fsync took {took * 1000:.1f} ms")


def _free_space(directory: str, settings: Settings) -> Finding:
    usage = shutil.disk_usage(directory)
    floor_bytes = int(getattr(settings, "journal_min_free_bytes", _MIN_FREE_BYTES))
    floor_percent = float(getattr(settings, "journal_min_free_percent", _MIN_FREE_PERCENT))
    floor = min(floor_bytes, int(usage.total * floor_percent / 100))
    detail = f"{size(usage.free)} free of {size(usage.total)} ({100 * usage.free / usage.total:.1f} %)"
    action = (
        "free space or grow the disk (docs/operations.md, Capacity: the journal takes about 1 GiB "
        "per million messages kept)"
    )
    if usage.free < floor:
        return Finding("free-space", "fail", f"{detail}, under the {size(floor)} kept free", action)
    if usage.free < 2 * floor:
        return Finding("free-space", "warn", f"{detail}, near the {size(floor)} kept free", action)
    return Finding("free-space", "ok", detail)


async def _check_postgres(url: str) -> tuple[list[Finding], Any]:
    import asyncpg

    from mogateway.edges.storage import migrations

    where = redact_url(url)
    try:
        conn = await asyncpg.connect(url, timeout=TIMEOUT_S)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return [
            Finding(
                "journal",
                "fail",
                f"cannot connect to PostgreSQL {where}: {exc or 'no answer'}",
                "check the database setting, that PostgreSQL runs and that pg_hba.conf lets this host in",
            )
        ], None
    found = [Finding("journal", "ok", f"PostgreSQL {where} answers")]
    version = await migrations.applied_version(conn)
    if version < migrations.LATEST:
        found.append(
            Finding(
                "schema",
                "fail",
                f"schema version {version}, this mogateway needs {migrations.LATEST}",
                "run `mogateway migrate` (docs/operations.md, Upgrade)",
            )
        )
    elif version > migrations.LATEST:
        found.append(
            Finding(
                "schema",
                "fail",
                f"schema version {version}, newer than this mogateway ({migrations.LATEST})",
                "upgrade this node's mogateway",
            )
        )
    else:
        found.append(Finding("schema", "ok", f"schema version {version}"))
    if await conn.fetchval("SELECT pg_is_in_recovery()"):
        found.append(
            Finding(
                "journal-write",
                "fail",
                "the database is a read-only standby",
                "point database at the primary",
            )
        )
    else:
        try:
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE mogateway_doctor (n integer) ON COMMIT DROP")
                await conn.execute("INSERT INTO mogateway_doctor VALUES (1)")
            taken = await conn.fetchval("SELECT pg_database_size(current_database())")
            found.append(
                Finding(
                    "journal-write",
                    "ok",
                    f"writable; the database takes {size(taken)} "
                    "(watch its disk with the database server's own monitoring)",
                )
            )
        except asyncpg.PostgresError as exc:
            found.append(
                Finding(
                    "journal-write",
                    "fail",
                    f"a write was refused: {exc}",
                    "check the role's privileges and the server's disk",
                )
            )
    fsync = await conn.fetchval("SHOW fsync")
    commit = await conn.fetchval("SHOW synchronous_commit")
    if fsync != "on" or commit == "off":
        found.append(
            Finding(
                "journal-durable",
                "warn",
                f"fsync={fsync}, synchronous_commit={commit}: an "
                "acknowledged MO can be lost in a crash of the database server",
                "set fsync=on and synchronous_commit=on (or remote_apply) in postgresql.conf",
            )
        )
    return found, conn


async def check_clock(conn: Any) -> Finding:
    before = time.time()
    theirs = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
    after = time.time()
    skew = theirs - (before + after) / 2
    detail = f"this machine's clock and PostgreSQL's differ by {skew * 1000:+.0f} ms"
    action = "keep both clocks synchronised (chrony or systemd-timesyncd): message times come from both"
    if abs(skew) > _CLOCK_FAIL_S:
        return Finding("clock", "fail", detail, action)
    if abs(skew) > _CLOCK_WARN_S + (after - before):
        return Finding("clock", "warn", detail, action)
    return Finding("clock", "ok", detail)
