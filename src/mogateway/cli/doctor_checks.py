"""What ``mogateway doctor`` looks at, each check a function that returns findings.

Every check only reads (the one write is a scratch file beside the SQLite journal, to see that the disk
takes a write and an fsync); none needs the gateway to run, and what the running gateway says (its bind
states, its readiness) is asked over its API when it answers. A finding is one line: what was found, and
what to do when it is not ``ok``.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import sqlite3
from collections.abc import Awaitable, Sequence
from typing import Any, NamedTuple

import orjson

from mogateway import compiled
from mogateway.cli.doctor_files import check_file_modes
from mogateway.cli.doctor_findings import TIMEOUT_S, Finding
from mogateway.cli.doctor_journal import check_clock, check_journal
from mogateway.config import Settings
from mogateway.core.callback_url import UrlRefused
from mogateway.core.redaction import redact_url
from mogateway.edges.journal_hold import hold_path, sqlite_path
from mogateway.edges.urlguard import check_callback_url

__all__ = ["Finding", "run_checks", "settings_view"]


_SECRET_NAME = re.compile(r"token|key|password|secret|creds|nkey|jwt", re.I)


def settings_view(settings: Settings) -> dict[str, Any]:
    """The resolved settings as JSON, every secret replaced by ``"(set)"`` and every URL without its
    password and the query values whose keys name a secret (``core.redaction``)."""

    def hide(value: Any, name: str = "") -> Any:
        if isinstance(value, dict):
            return {k: hide(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [hide(v, name) for v in value]
        if _SECRET_NAME.search(name) and value not in (None, "", [], {}):
            return "(set)"
        if isinstance(value, str) and "://" in value:
            return redact_url(value)  # user-info passwords and secret query values (core.redaction)
        return value

    data = settings.model_dump(mode="json")
    return dict(hide(data))


# ------------------------------------------------------------------------------------------ build


def check_compiled() -> Finding:
    """Whether the pure layers run compiled (``mogateway.compiled``): pure Python works, at about a
    tenth more CPU per MO."""
    if compiled.COMPILED or compiled.CHOSEN_PURE:
        return Finding("compiled", "ok", compiled.STATUS)
    return Finding("compiled", "warn", compiled.STATUS, "scripts/setup.sh builds them (scripts/compile.py)")


def check_whatsapp_media(settings: Settings) -> Finding | None:
    """Whether WhatsApp media callbacks carry a ``url`` (api.whatsapp_media); None without WhatsApp."""
    if settings.whatsapp is None:
        return None
    if not settings.public_url:
        return Finding(
            "whatsapp-media",
            "warn",
            "public_url is not set: WhatsApp media callbacks carry the media id and no url, so "
            "applications can fetch media only with their own token at /v1/whatsapp/media/{id}",
            "set public_url (MOGATEWAY_PUBLIC_URL) to the gateway's external base URL, e.g. "
            "https://gw.example.com",
        )
    where = "secret_key" if settings.secret_key else "the [whatsapp] app secret (no secret_key)"
    return Finding(
        "whatsapp-media",
        "ok",
        f"media callbacks carry a url under {settings.public_url}, signed with a key derived from "
        f"{where}, valid {settings.whatsapp_media_url_ttl_s} s",
    )


# ------------------------------------------------------------------------------------------ queue


async def check_queue(settings: Settings) -> Finding:
    if settings.queue == "local":
        return Finding("queue", "ok", "in-process queue (one node; no NATS needed)")
    import nats
    import nats.errors

    where = redact_url(settings.queue)
    servers = [u.strip() for u in settings.queue.split(",") if u.strip()]
    try:
        nc = await asyncio.wait_for(
            nats.connect(
                servers=servers, connect_timeout=TIMEOUT_S, max_reconnect_attempts=0, allow_reconnect=False
            ),
            timeout=TIMEOUT_S * 2,
        )
    except (OSError, TimeoutError, nats.errors.Error) as exc:
        return Finding(
            "queue",
            "fail",
            f"cannot connect to NATS at {where}: {exc or 'no answer'}",
            "check the queue setting and that nats-server runs (with JetStream: -js)",
        )
    try:
        info = await nc.jetstream(timeout=TIMEOUT_S).account_info()
    except (TimeoutError, nats.errors.Error) as exc:
        return Finding(
            "queue",
            "fail",
            f"NATS at {where} answers but JetStream does not: {exc}",
            "start nats-server with JetStream enabled (-js, or jetstream {} in its config)",
        )
    finally:
        await nc.close()
    return Finding("queue", "ok", f"NATS JetStream at {where} answers ({info.streams} streams)")


# ------------------------------------------------------------------------------------------ gateway


class _Answer(NamedTuple):
    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class _Unreachable(Exception):
    """No HTTP answer from ``url`` (refused, timed out, not an http(s) URL...)."""


#: The most of an answer doctor reads (the binds' list is well under it).
_MAX_ANSWER_BYTES = 4 * 1024 * 1024


def _get(url: str, headers: dict[str, str] | None = None) -> _Answer:
    """One GET with the standard library's client, as the API commands do (cli.common): httpx's import
    and the TLS context each of its clients loads took about a third of doctor's start
    (docs/benchmarks.md §0.20). Raises :class:`_Unreachable` when no answer comes."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn = kind(parts.hostname, parts.port, timeout=TIMEOUT_S)
        try:
            conn.request("GET", target, headers=headers or {})
            resp = conn.getresponse()
            return _Answer(resp.status, resp.getheader("content-type") or "", resp.read(_MAX_ANSWER_BYTES))
        finally:
            conn.close()
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise _Unreachable(str(exc) or type(exc).__name__) from None


async def ask_gateway(url: str, token: str | None) -> tuple[list[Finding], dict[str, dict[str, Any]] | None]:
    """The running gateway: does it answer, is it ready, and its binds' states (None: not known)."""
    try:
        health = await asyncio.to_thread(_get, f"{url}/healthz")
    except _Unreachable:
        return [
            Finding(
                "gateway",
                "warn",
                f"no gateway answers at {url}",
                "start it (systemctl start mogateway), or pass --url where it listens",
            )
        ], None
    found = [
        Finding(
            "gateway",
            "ok" if health.status == 200 else "fail",
            f"{url}/healthz answered {health.status}",
            "" if health.status == 200 else "read the gateway's log",
        )
    ]
    ready = await asyncio.to_thread(_get, f"{url}/readyz")
    if ready.status == 503:
        reasons = ready.json().get("reasons") if ready.content_type.endswith("json") else None
        found.append(
            Finding(
                "ready",
                "fail",
                f"not ready: {reasons or ready.body.decode('utf-8', 'replace')[:200]}",
                "see the alert runbook in docs/operations.md (MogatewayNotReady)",
            )
        )
    elif ready.status == 200:
        found.append(Finding("ready", "ok", "ready (/readyz answered 200)"))
    if not token:
        return found, None
    resp = await asyncio.to_thread(_get, f"{url}/v1/binds", {"authorization": f"Bearer {token}"})
    if resp.status != 200:
        found.append(
            Finding(
                "gateway",
                "warn",
                f"/v1/binds answered {resp.status}: bind states not known",
                "pass the admin token (--token or MOGATEWAY_ADMIN_TOKEN)",
            )
        )
        return found, None
    return found, {str(b["name"]): b for b in resp.json().get("binds", [])}


async def check_binds(
    settings: Settings, states: dict[str, dict[str, Any]] | None, url: str
) -> list[Finding]:
    found = []
    for bind in settings.smpp.binds:
        where = f"{bind.host}:{bind.port}"
        if states is None:
            last = f"last state not known (no answer from the gateway at {url})"
        elif bind.name in states:
            row = states[bind.name]
            last = f"last state {row.get('state')}"
            if row.get("last_error"):
                last += f", last error {row['last_error']!r}"
        else:
            last = "not held by the gateway that answers"
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(bind.host, bind.port), TIMEOUT_S)
            writer.close()
            found.append(Finding(f"bind {bind.name}", "ok", f"{where} accepts TCP connections; {last}"))
        except (OSError, TimeoutError) as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            found.append(
                Finding(
                    f"bind {bind.name}",
                    "fail",
                    f"{where} cannot be reached over TCP ({why}); {last}",
                    "check the host and port with the operator, and the firewall "
                    "between this machine and the SMSC",
                )
            )
    return found


# ------------------------------------------------------------------------------------------ limits


def check_open_files(settings: Settings, journal: str | None) -> Finding:
    """The open-files limit of the running gateway (from /proc, its pid in the journal's lock file), or
    the one this shell would give it."""
    need = 2 * settings.max_connections + 256
    pid, limit = _gateway_limit(journal)
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # serve raises its soft limit to this
        whose = "this shell's (hard) limit, which `mogateway serve` started here would raise itself to"
    else:
        whose = f"the running gateway's (pid {pid})"
    shown = "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
    if limit != resource.RLIM_INFINITY and limit < need:
        return Finding(
            "open-files",
            "warn",
            f"open files: {shown}, {whose}; max_connections "
            f"{settings.max_connections} wants {need}: at most {max(8, limit // 2)} HTTP connections",
            "raise it: LimitNOFILE=65536 in the unit (deploy/mogateway.service), or ulimit -n",
        )
    return Finding("open-files", "ok", f"open files: {shown}, {whose}")


def _gateway_limit(journal: str | None) -> tuple[int | None, int | None]:
    if journal is None:
        return None, None
    try:
        with open(hold_path(journal)) as fh:
            pid = int(fh.read().strip() or 0)
        with open(f"/proc/{pid}/limits") as fh:
            for line in fh:
                if line.startswith("Max open files"):
                    soft = line.split()[3]
                    return pid, resource.RLIM_INFINITY if soft == "unlimited" else int(soft)
    except (OSError, ValueError):
        pass
    return None, None


# ------------------------------------------------------------------------------------------ clients


async def check_callbacks(settings: Settings, conn: Any) -> list[Finding]:
    """Every client's callback URL through the URL guard the gateway applies at each connect."""
    rows: list[tuple[str, Any]]
    if conn is not None:
        import asyncpg

        try:
            rows = [(r["id"], r["doc"]) for r in await conn.fetch("SELECT id, doc::text AS doc FROM clients")]
        except asyncpg.PostgresError as exc:
            return [Finding("callbacks", "fail", f"cannot read the clients: {exc}", "see the schema finding")]
    else:
        path = sqlite_path(settings.database)
        if path is None or not os.path.exists(path):
            return []
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=TIMEOUT_S)
            try:
                rows = list(db.execute("SELECT id, doc FROM clients"))
            finally:
                db.close()
        except sqlite3.Error as exc:
            return [
                Finding("callbacks", "fail", f"cannot read the clients: {exc}", "see the journal finding")
            ]
    found = []
    for client_id, doc in rows:
        data = orjson.loads(doc)
        url = str(data.get("callback_url", ""))
        name = str(data.get("name", client_id))
        try:
            await check_callback_url(url, settings.allow_private_callbacks)
        except UrlRefused as exc:
            found.append(
                Finding(
                    f"callback {name}",
                    "fail",
                    f"client {name} ({client_id}): {redact_url(url)} is refused: {exc}",
                    f"give the client a public callback_url (PATCH /v1/clients/{client_id} "
                    "or the console), or set allow_private_callbacks if it really lives on "
                    "your network",
                )
            )
    if not found:
        found.append(Finding("callbacks", "ok", f"{len(rows)} clients' callback URLs pass the URL guard"))
    return found


async def _guarded(check: str, work: Awaitable[list[Finding]]) -> list[Finding]:
    """A check that broke in a way nobody foresaw is a failed finding, not a traceback."""
    try:
        return await work
    except Exception as exc:
        return [
            Finding(
                check,
                "fail",
                f"the check itself failed: {type(exc).__name__}: {exc}",
                "look into this first: the other findings may be incomplete",
            )
        ]


async def _one(finding: Awaitable[Finding]) -> list[Finding]:
    return [await finding]


async def run_checks(
    settings: Settings, url: str, token: str | None, backups: Sequence[str] = ()
) -> list[Finding]:
    conn: Any = None
    try:
        findings, conn = await check_journal(settings)
    except Exception as exc:
        findings = [
            Finding(
                "journal",
                "fail",
                f"the check itself failed: {type(exc).__name__}: {exc}",
                "look into this first: the other findings may be incomplete",
            )
        ]
    try:
        if conn is not None:
            findings += await _guarded("clock", _one(check_clock(conn)))
        findings += await _guarded("queue", _one(check_queue(settings)))
        states: dict[str, dict[str, Any]] | None = None
        try:
            gateway, states = await ask_gateway(url, token)
            findings += gateway
        except Exception as exc:
            findings.append(
                Finding(
                    "gateway", "warn", f"asking the gateway at {url} failed: {exc}", "read the gateway's log"
                )
            )
        findings += await _guarded("binds", check_binds(settings, states, url))
        findings.append(check_open_files(settings, sqlite_path(settings.database)))
        findings.append(check_file_modes(settings, backups))
        findings.append(check_compiled())
        media = check_whatsapp_media(settings)
        if media is not None:
            findings.append(media)
        findings += await _guarded("callbacks", check_callbacks(settings, conn))
    finally:
        if conn is not None:
            await conn.close()
    return findings
